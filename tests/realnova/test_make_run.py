"""``make run`` on a machine without ``$KUBECONFIG``, as CI can afford it: the warm path (every stage
of ``tools/prepare`` finds its cache, one line each), the real Nova up with the samples, reachable
with the printed ``clouds.yaml`` by one ``openstack`` call; Ctrl-C leaves no process, mount, bridge
or rule behind.

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
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from simcluster.platform.controlplane import REPO
from simcluster.platform.installtools import tool
from simcluster.realtier.services.openstack import VENVS

pytestmark = pytest.mark.realnova

# tools/prepare/plans.py's make run plan without the .venv stage
STAGES = (
    "Debian packages",
    "nova venv ",
    "Keystone, Placement and Glance venvs",
    "nova image tree ",
    "kube-apiserver",
)


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


def _left_behind(workdir: pathlib.Path) -> list[str]:
    """Processes and mounts of the run, and its bridge (named in ``real/network.json``), the bridge's
    ports and its nftables table."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = pathlib.Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if str(workdir) in cmdline:
                found.append(f"process {entry}: {cmdline[:200]}")
    mounts = pathlib.Path("/proc/self/mounts").read_text().splitlines()
    found += [f"mount {line}" for line in mounts if str(workdir) in line]
    network = json.loads((workdir / "real" / "network.json").read_text())
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    for line in links.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name == network["bridge"] or f"master {network['bridge']} " in line:
            found.append(f"link {name}")
    tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True, check=True).stdout
    found += [f"nft {line}" for line in tables.splitlines() if line.split()[-1:] == [network["table"]]]
    return found


@dataclass
class MakeRun:
    """``prepare run`` (what ``make run`` calls) as a user's shell runs it; ``rc`` once it ended."""

    proc: subprocess.Popen[bytes]
    log: pathlib.Path
    workdir: pathlib.Path
    env: dict[str, str]
    rc: int | None = None

    def assert_stopped_clean(self) -> None:
        """Ctrl-C ended it with 0 and left nothing of the run behind."""
        assert self.rc == 0, self.log.read_text()[-4000:]
        time.sleep(1)
        assert _left_behind(self.workdir) == []


@contextlib.contextmanager
def make_run(tmp_path: pathlib.Path, *flags: str, stop_within: float = 120) -> Iterator[MakeRun]:
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


def test_make_run_serves_a_real_nova_the_printed_clouds_yaml_reaches(tmp_path: pathlib.Path) -> None:
    with make_run(tmp_path) as run:
        log, proc, env = run.log, run.proc, run.env
        _wait_for_line(log, r"make run: prepared in \d+ s", proc, within=300)
        progress = re.findall(
            r"^\[ ?(\d)/(\d)\] (.+) \.\.\. (\d+) s \(CPU \d+ s\)$", log.read_text(), re.MULTILINE
        )
        assert [(n, total) for n, total, _, _ in progress] == [(str(i), "5") for i in range(1, 6)], progress
        titles = [title for _, _, title, _ in progress]
        assert all(any(t.startswith(stage) for t in titles) for stage in STAGES), titles
        assert "kwok" not in log.read_text()  # the real tier runs none, so make run builds none
        clouds = pathlib.Path(_wait_for_line(log, r"clouds\.yaml: (\S+)", proc, within=600).group(1))
        compute = _wait_for_line(log, r"compute API: (\S+)", proc, within=10).group(1)
        assert re.fullmatch(r"http://10\.96\.\d+\.\d+:8774/v2\.1", compute), compute
        assert set(yaml.safe_load(clouds.read_text())["clouds"]) == {"simcluster", "simcluster-nova"}
        cli_env = {**env, "OS_CLIENT_CONFIG_FILE": str(clouds), "OS_CLOUD": "simcluster"}
        listed = subprocess.run(
            [str(VENVS / "keystone" / "bin" / "openstack"), "compute", "service", "list", "-f", "json"],
            env=cli_env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert listed.returncode == 0, listed.stderr
        rows = json.loads(listed.stdout)
        binaries = sorted(r["Binary"] for r in rows)
        assert binaries.count("nova-scheduler") == 1, rows
        assert binaries.count("nova-conductor") == 1, rows
        computes = {r["Host"]: r for r in rows if r["Binary"] == "nova-compute"}
        assert set(computes) == {"compute-0", "compute-1"}, rows
        assert all(r["State"] == "up" for r in rows if r["Binary"] != "nova-osapi_compute"), rows
    run.assert_stopped_clean()
