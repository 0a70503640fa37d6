"""``make run`` on a machine without ``$KUBECONFIG``: the warm path (every stage of ``tools/prepare``
finds its cache, one line each), a cluster of real nodes (``control-0``/``control-1`` untainted, the
pool's ``compute-0``/``compute-1`` labelled and tainted) with every supported release's nova image on
each, the samples Ready, the operator's pods of its chart (its defaults, no pin) Ready on the control
nodes, ``openstack compute service list`` through the printed ``clouds.yaml`` from this (the user's)
shell listing the scheduler, the conductor and nova-compute on both compute nodes, up, the catalog's
compute entry public on the host's loopback and internal by the Service's name; Ctrl-C ends with
status 0 and leaves no process, mount, cgroup, link or table, and of its work directory the logs
alone. It prints ``kubectl get pods -A -o
wide`` and each pod's memory (the kubelets' summary) against its limits.

``make run LOCAL_OPERATOR=1`` (marker ``long``): the same cluster with the operator as a local
process in the nodes' network; the samples Ready, its metrics at the printed address.

It runs ``python -m prepare run`` as the Makefile does, with ``--python`` for this interpreter
instead of ``make venv`` (which would reinstall the venv the tests run in). The tier's conftest
runs it before the tier's own cluster starts, so the two real clusters never run at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from realnode import nova_image
from realnode.cleanup import Traces, belongs, cgroup_dirs, pids, zombie
from realnode.dns import REAL_NODE_LABEL
from simcluster.platform.controlplane import REPO
from simcluster.platform.installtools import tool
from simcluster.realtier.services.openstack import VENVS

pytestmark = [pytest.mark.realnova, pytest.mark.timeout(3600)]

# tools/prepare/plans.py's make run plan without the .venv stage
STAGES = (
    "Debian packages",
    "nova venv",
    "Keystone, Placement and Glance venvs",
    "nova image tree",
    "nova OCI image",
    "kube-apiserver",
    "kubelet, kube-proxy",
    "helm, kustomize, kubectl",
    "operator image",
)
CONTROL = ("control-0", "control-1")
COMPUTE = ("compute-0", "compute-1")
DEDICATED = {"key": "example.org/dedicated", "value": "compute", "effect": "NoSchedule"}


def kubectl_json(kubeconfig: str, *args: str, output: bool = True) -> Any:
    """``kubectl`` against the run's printed kubeconfig, its answer parsed (``-o json`` unless
    ``output`` is False, for a raw read that is JSON already)."""
    done = subprocess.run(
        [str(tool("kubectl")), f"--kubeconfig={kubeconfig}", *args, *(["-o", "json"] if output else [])],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout)


def has_ready(obj: dict[str, Any]) -> bool:
    """Whether ``obj``'s ``Ready`` condition is True."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _wait_for_line(
    log: pathlib.Path, pattern: str, proc: subprocess.Popen[bytes], within: float
) -> re.Match[str]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        match = re.search(pattern, log.read_text(errors="replace"))
        if match:
            return match
        if proc.poll() is not None:
            break
        time.sleep(2)
    raise AssertionError(
        f"no {pattern!r} within {within:.0f} s; make run printed:\n{log.read_text()[-6000:]}"
    )


def _openstack(env: dict[str, str], clouds: pathlib.Path, *args: str) -> Any:
    cli_env = {**env, "OS_CLIENT_CONFIG_FILE": str(clouds), "OS_CLOUD": "simcluster"}
    done = subprocess.run(
        [str(VENVS / "keystone" / "bin" / "openstack"), *args, "-f", "json"],
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _memory(kubeconfig: str, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> list[str]:
    """Each pod's working set (the kubelet's summary) against its containers' memory limits."""
    limits = {}
    for pod in pods:
        total = [
            ((c.get("resources") or {}).get("limits") or {}).get("memory") for c in pod["spec"]["containers"]
        ]
        limits[(pod["metadata"]["namespace"], pod["metadata"]["name"])] = "+".join(str(x) for x in total)
    lines = []
    for node in nodes:
        name = node["metadata"]["name"]
        summary = kubectl_json(
            kubeconfig, "get", "--raw", f"/api/v1/nodes/{name}/proxy/stats/summary", output=False
        )
        for pod in summary.get("pods", []):
            ref = pod["podRef"]
            rss = sum((c.get("memory") or {}).get("rssBytes", 0) for c in pod.get("containers", []))
            limit = limits.get((ref["namespace"], ref["name"]), "?")
            lines.append(
                f"  {name:10} {ref['namespace']}/{ref['name']}: RSS {rss / 2**20:.0f} MiB, limit {limit}"
            )
    return lines


def _diagnose(kubeconfig: pathlib.Path) -> None:
    """What the pods and the events say, for a run whose samples never got Ready."""
    for args in (("get", "pods", "-A", "-o", "wide"), ("get", "events", "-A", "--sort-by=.lastTimestamp")):
        done = subprocess.run(
            [str(tool("kubectl")), f"--kubeconfig={kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        print(f"$ kubectl {' '.join(args)}\n{done.stdout[-8000:]}{done.stderr[-2000:]}")


def _left_behind(workdir: pathlib.Path, traces: Traces, tag: str) -> list[str]:
    """Processes of the nodes' namespaces or cgroups or naming the run's directory, the nodes'
    cgroups, mounts of the directory, host links with the nodes' tag, a kube-proxy table on the host."""
    found = [f"process {p}" for p in pids() if not zombie(p) and belongs(p, traces)]
    found += [f"cgroup {d}" for root in traces.cgroup_roots for d in cgroup_dirs(root)]
    for pid in pids():
        try:
            cmdline = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(workdir) in cmdline and not zombie(pid):
            found.append(f"process {pid}: {cmdline[:200]}")
    found += [
        f"mount {m}" for m in pathlib.Path("/proc/self/mounts").read_text().splitlines() if str(workdir) in m
    ]
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    found += [f"link {w}" for w in links.split() if tag in w]
    tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True, check=True).stdout
    found += [f"nft {line}" for line in tables.splitlines() if "kube-proxy" in line]
    return found


def _traces(workdir: pathlib.Path) -> Traces:
    traces = Traces.load(workdir / "real" / "realnodes" / "traces.json")
    assert traces.net_inode is not None
    assert len(traces.cgroup_roots) == len(CONTROL) + len(COMPUTE)
    return traces


@dataclass
class MakeRun:
    """``prepare run`` (what ``make run`` calls) as a user's shell runs it; ``rc`` once it ended."""

    proc: subprocess.Popen[bytes]
    log: pathlib.Path
    workdir: pathlib.Path
    env: dict[str, str]
    rc: int | None = None

    def assert_stopped_clean(self, traces: Traces) -> None:
        """Ctrl-C ended it with 0 and left nothing of the run behind but its logs (``traces``: what its
        nodes were)."""
        assert self.rc == 0, self.log.read_text()[-4000:]
        time.sleep(1)
        tag = traces.cgroup_roots[0].split("-")[1]  # realnode-<tag>-<n>: the tag names its links too
        assert _left_behind(self.workdir, traces, tag) == []
        # of the work directory the logs alone are left: the operator's, each node's kubelet
        files = [p for p in self.workdir.rglob("*") if not p.is_dir()]
        assert [p for p in files if p.is_symlink() or not p.name.endswith(".log")] == []
        names = {p.name for p in files}
        assert {"operator.log", "kubelet.log", "containerd.log", "etcd.log"} <= names, sorted(names)
        kept = f"the run's logs are kept in {self.workdir.resolve()} ({len(files)} files"
        removing = f"removing the run's data from {self.workdir.resolve()}, keeping its logs ..."
        text = self.log.read_text()
        assert kept in text
        assert removing in text.split(kept)[0]  # said before the removal, then what it did


@contextlib.contextmanager
def make_run(tmp_path: pathlib.Path, *flags: str, stop_within: float = 300) -> Iterator[MakeRun]:
    """``prepare run [flags]`` with its output in ``tmp_path/make-run.log``; Ctrl-C at the end (to its
    process group, as a terminal sends it), then ``rc`` is set."""
    workdir = tmp_path / "run"
    log = tmp_path / "make-run.log"
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env["PYTHONPATH"] = f"{REPO}:{REPO / 'tools'}"
    argv = [sys.executable, "-m", "prepare", "run", "--python", sys.executable, *flags]
    argv += ["--logs", str(tmp_path / "stages"), "--workdir", str(workdir)]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=REPO,
            start_new_session=True,
        )
    run = MakeRun(proc, log, workdir, env)
    try:
        yield run
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
        try:
            run.rc = proc.wait(timeout=stop_within)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise


def _samples_ready(run: MakeRun) -> re.Match[str]:
    try:
        return _wait_for_line(
            run.log, r"the sample Nova and NovaCompute are Ready after ([\d.]+) s", run.proc, 1800
        )
    except AssertionError:
        kubeconfig = re.search(r"export KUBECONFIG=(\S+)", run.log.read_text())
        _diagnose(pathlib.Path(kubeconfig.group(1) if kubeconfig else run.workdir / "kubeconfig"))
        raise


def _services_up(env: dict[str, str], clouds: pathlib.Path) -> None:
    """The printed clouds.yaml from this shell lists the scheduler, the conductor and nova-compute on
    both compute nodes, up."""
    rows = _openstack(env, clouds, "compute", "service", "list")
    binaries = sorted(r["Binary"] for r in rows)
    assert binaries.count("nova-scheduler") == 1, rows
    assert binaries.count("nova-conductor") == 1, rows
    computes = {r["Host"]: r for r in rows if r["Binary"] == "nova-compute"}
    assert set(computes) == set(COMPUTE), rows
    assert all(r["State"] == "up" for r in rows if r["Binary"] != "nova-osapi_compute"), rows


def test_make_run_serves_a_real_nova_on_real_nodes_to_the_users_shell(tmp_path: pathlib.Path) -> None:
    t0 = time.monotonic()
    releases = nova_image.releases()
    with make_run(tmp_path) as run:
        log, proc, workdir, env = run.log, run.proc, run.workdir, run.env
        _wait_for_line(log, r"make run: prepared in \d+ s", proc, within=1800)
        progress = re.findall(
            r"^\[ ?(\d)/(\d)\] (.+) \.\.\. (\d+) s \(CPU \d+ s\)$", log.read_text(), re.MULTILINE
        )
        count = str(len(STAGES))
        assert sorted((n, total) for n, total, _, _ in progress) == [
            (str(i), count) for i in range(1, len(STAGES) + 1)
        ], progress
        titles = [title for _, _, title, _ in progress]
        assert all(any(t.startswith(stage) for t in titles) for stage in STAGES), titles
        assert "kwok" not in log.read_text()  # the real tier runs none, so make run builds none
        nodes_line = _wait_for_line(log, r"real nodes (\S+, \S+, \S+, \S+) Ready \((.*)\)", proc, 1800)
        print(f"\nmake run: {nodes_line.group(0)}")
        ready = _samples_ready(run)
        print(f"  samples Ready {ready.group(1)} s after the cluster's start")
        kubeconfig = _wait_for_line(log, r"export KUBECONFIG=(\S+)", proc, 10).group(1)
        clouds = pathlib.Path(_wait_for_line(log, r"clouds\.yaml: (\S+)", proc, within=120).group(1))
        compute = _wait_for_line(log, r"compute API: (\S+)", proc, within=10).group(1)
        assert set(yaml.safe_load(clouds.read_text())["clouds"]) == {"simcluster", "simcluster-nova"}

        # every node real, the pool's tainted
        nodes = kubectl_json(kubeconfig, "get", "nodes")["items"]
        by_name = {n["metadata"]["name"]: n for n in nodes}
        assert sorted(by_name) == sorted((*CONTROL, *COMPUTE))
        for name, node in by_name.items():
            assert has_ready(node), name
            assert node["metadata"]["labels"].get(REAL_NODE_LABEL) == "true", name
            assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://"), name
            taints = [{k: t[k] for k in ("key", "value", "effect")} for t in node["spec"].get("taints", [])]
            assert taints == ([DEDICATED] if name in COMPUTE else []), (name, taints)
            # every supported release's image on every node: an upgrade of the sample finds it
            images = {n for image in node["status"].get("images", []) for n in image.get("names", [])}
            for release in releases:
                assert f"ghcr.io/c5c3/nova:{release}" in images, (name, release)

        # the operator by its chart's defaults: on the control nodes
        pods = kubectl_json(
            kubeconfig, "-n", "nova-system", "get", "pods", "-l", "app.kubernetes.io/name=nova-operator"
        )
        assert len(pods["items"]) == 2, pods["items"]
        for pod in pods["items"]:
            assert pod["spec"]["nodeName"] in CONTROL, pod["spec"]["nodeName"]
            assert has_ready(pod), pod["status"]
            assert not pod["spec"].get("nodeSelector"), pod["spec"]["nodeSelector"]
            assert not any("--nova-api-url" in a for a in pod["spec"]["containers"][0]["args"])
        for kind, name in (("nova", "nova"), ("novacompute", "rack7")):
            assert has_ready(kubectl_json(kubeconfig, "-n", "openstack", "get", kind, name)), kind

        # the printed clouds.yaml from this shell: the compute API at the host's loopback
        assert compute.startswith("http://127.0.0.1:"), compute
        _services_up(env, clouds)
        endpoints = _openstack(env, clouds, "endpoint", "list", "--service", "compute")
        by_interface = {e["Interface"]: e["URL"] for e in endpoints}
        assert by_interface["public"] == compute, endpoints
        assert by_interface["internal"] == "http://nova.openstack.svc:8774/v2.1", endpoints

        wide = subprocess.run(
            [str(tool("kubectl")), f"--kubeconfig={kubeconfig}", "get", "pods", "-A", "-o", "wide"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        print(wide.stdout)
        every = kubectl_json(kubeconfig, "get", "pods", "-A")["items"]
        print("\n".join(_memory(kubeconfig, nodes, every)))
        traces = _traces(workdir)
        stopped = time.monotonic()
    print(f"  Ctrl-C to exit: {time.monotonic() - stopped:.0f} s")
    run.assert_stopped_clean(traces)
    print(f"  wall time (prepare, bring-up, checks, Ctrl-C): {time.monotonic() - t0:.0f} s")


@pytest.mark.long
def test_make_run_with_a_local_operator_serves_the_samples_from_a_process_of_this_tree(
    tmp_path: pathlib.Path,
) -> None:
    with make_run(tmp_path, "--local-operator") as run:
        log, proc, workdir, env = run.log, run.proc, run.workdir, run.env
        _wait_for_line(log, r"make run: prepared in \d+ s", proc, within=1800)
        assert "operator image" not in log.read_text()  # no chart: no image built, no helm
        _samples_ready(run)
        kubeconfig = _wait_for_line(log, r"export KUBECONFIG=(\S+)", proc, 10).group(1)
        # no operator pod: the process of this tree serves, as its ServiceAccount
        pods = kubectl_json(kubeconfig, "get", "pods", "-A")["items"]
        assert not [p for p in pods if p["metadata"]["namespace"] == "nova-system"], pods
        assert "operator running as system:serviceaccount:nova-system:nova-operator" in log.read_text()
        metrics = _wait_for_line(log, r"curl -s (http://127\.0\.0\.1:\d+/metrics)", proc, 10).group(1)
        with urllib.request.urlopen(metrics, timeout=10) as resp:
            text = resp.read().decode()
        assert "nova_operator_controller_reconcile_total" in text, text[:2000]
        clouds = pathlib.Path(_wait_for_line(log, r"clouds\.yaml: (\S+)", proc, within=120).group(1))
        _services_up(env, clouds)
        traces = _traces(workdir)
    run.assert_stopped_clean(traces)
