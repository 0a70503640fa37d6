"""``python -m realnode up``: real nodes a user can reach with the printed kubeconfig, and Ctrl-C leaves
nothing behind."""

from __future__ import annotations

import os
import pathlib
import selectors
import signal
import subprocess
import sys
import time

import pytest
import yaml
from realnode import BUSYBOX_IMAGE
from realnode.cleanup import Traces, belongs, cgroup_dirs, pids, zombie
from simcluster.client.kube import Kube
from simcluster.platform.controlplane import REPO

pytestmark = pytest.mark.realnova

# SIGINT as a terminal delivers it, even where this session inherited it ignored (nohup, a background
# job): an ignored SIGINT is inherited across exec, and Python then keeps it ignored.
SIGINT_AS_A_TERMINAL = ("env", "--default-signal=INT")


def _read_until(proc: subprocess.Popen[str], marker: str, timeout: float) -> str:
    assert proc.stdout is not None
    seen = ""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while marker not in seen:
            left = deadline - time.monotonic()
            if left <= 0 or proc.poll() is not None:
                pytest.fail(f"no {marker!r} from realnode up (exit {proc.poll()}):\n{seen}")
            if sel.select(left):
                seen += os.read(proc.stdout.fileno(), 65536).decode(errors="replace")
    return seen


def test_up_serves_two_real_nodes_to_the_printed_kubeconfig_and_ctrl_c_leaves_nothing(
    tmp_path: pathlib.Path,
) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "tools"), str(REPO)])}
    proc = subprocess.Popen(
        [
            *SIGINT_AS_A_TERMINAL,
            sys.executable,
            "-m",
            "realnode",
            "up",
            "--nodes",
            "2",
            "--workdir",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        said = _read_until(proc, "Ctrl-C stops everything", 300)
        line = next(x for x in said.splitlines() if "export KUBECONFIG=" in x)
        config = yaml.safe_load(pathlib.Path(line.split("=", 1)[1]).read_text())
        cluster = next(c["cluster"] for c in config["clusters"])
        user = next(u["user"] for u in config["users"] if u["name"] == "envtest-admin")
        kube = Kube(cluster["server"], user["token"], pathlib.Path(cluster["certificate-authority"]))
        nodes = kube.get("/api/v1/nodes")["items"]
        assert sorted(n["metadata"]["name"] for n in nodes) == ["realnode-1", "realnode-2"]
        assert {n["status"]["nodeInfo"]["kubeletVersion"] for n in nodes} == {"v1.37.2"}
        # the second node runs pods too, on its own bridge and subnet
        kube.post("/api/v1/namespaces", {"metadata": {"name": "cli"}})
        container = {
            "name": "c",
            "image": BUSYBOX_IMAGE,
            "imagePullPolicy": "Never",
            "command": ["sleep", "600"],
        }
        kube.post(
            "/api/v1/namespaces/cli/pods",
            {"metadata": {"name": "on-2"}, "spec": {"nodeName": "realnode-2", "containers": [container]}},
        )
        Kube.wait(
            lambda: kube.get("/api/v1/namespaces/cli/pods/on-2")["status"].get("phase") == "Running",
            150,
            "a pod on realnode-2 Running",
            interval=0.5,
        )
        assert kube.get("/api/v1/namespaces/cli/pods/on-2")["status"]["podIP"].startswith("10.88.1.")
        traces = Traces.load(tmp_path / "nodes" / "traces.json")
        assert any(belongs(p, traces) for p in pids())
        proc.send_signal(signal.SIGINT)
        assert proc.wait(120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stdout is not None
    with proc.stdout:
        assert proc.stdout.read().rstrip().endswith("stopped")
    assert [p for p in pids() if not zombie(p) and belongs(p, traces)] == []
    assert [d for root in traces.cgroup_roots for d in cgroup_dirs(root)] == []
    assert [p for p in pids() if not zombie(p) and str(tmp_path) in _cmdline(p)] == []


def _cmdline(pid: int) -> str:
    try:
        return pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""
