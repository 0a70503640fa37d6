"""The stand-in's container runtime alone (no API server): namespaces, user, exec, signals, leaks."""

from __future__ import annotations

import asyncio
import os
import pathlib
import signal

import pytest
from simcluster.realtier.kubelet.runtime import Image, Process, StartError

pytestmark = pytest.mark.integration


def spec(image: Image, argv: list[str], **extra: object) -> dict[str, object]:
    return {
        "image_root": str(image.root),
        "image_binds": sorted(image.binds.items()),
        "mounts": [],
        "hostname": "pod-a",
        "netns": None,
        "uid": 42424,
        "gid": 42424,
        "groups": [],
        "privileged": False,
        "read_only_root": False,
        "cwd": "/",
        "argv": argv,
        "env": {"PATH": "/usr/bin:/bin"},
        **extra,
    }


def shim_processes() -> list[int]:
    """Pids of every process running the stand-in's shim (or a container it started)."""
    out = []
    for proc in pathlib.Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if b"kubelet/shim.py" in (proc / "cmdline").read_bytes():
                    out.append(int(proc.name))
            except OSError:
                continue
    return out


async def test_container_is_pid_1_of_its_own_namespaces(image: Image, tmp_path: pathlib.Path) -> None:
    script = "echo $(hostname) $$ $(id -u) $(cat /proc/self/status | grep NoNewPrivs | tr -d '\\t')"
    proc = await Process.start(spec(image, ["sh", "-c", script]), tmp_path / "run", tmp_path / "log")
    assert await proc.wait() == 0
    assert (tmp_path / "log").read_text().split() == ["pod-a", "1", "42424", "NoNewPrivs:1"]


async def test_a_missing_command_is_a_start_error(image: Image, tmp_path: pathlib.Path) -> None:
    with pytest.raises(StartError, match="no-such-binary"):
        await Process.start(spec(image, ["no-such-binary"]), tmp_path / "run", tmp_path / "log")


async def test_sigterm_reaches_the_first_process_only_and_exec_runs_inside(
    image: Image, tmp_path: pathlib.Path
) -> None:
    """As the CRI's StopContainer: the first process is signalled, and a child it started hears
    nothing of it (it dies with the PID namespace when the first process exits)."""
    child = "trap 'echo child-term; exit 0' TERM; while true; do sleep 0.1; done"
    script = (
        f'sh -c "{child}" & '
        "trap 'echo got-term; exit 0' TERM; touch /tmp/ready; while true; do sleep 0.1; done"
    )
    proc = await Process.start(spec(image, ["sh", "-c", script]), tmp_path / "run", tmp_path / "log")
    for _ in range(50):
        code, _ = await proc.exec(["test", "-e", "/tmp/ready"], 5)
        if code == 0:
            break
        await asyncio.sleep(0.1)
    code, out = await proc.exec(["sh", "-c", "hostname; id -u"], 5)
    assert (code, out.split()) == (0, ["pod-a", "42424"])
    assert await proc.exec(["sleep", "10"], 0.3) == (None, "")  # a timed-out exec is killed
    proc.signal(signal.SIGTERM)
    assert await proc.wait() == 0
    log = (tmp_path / "log").read_text()
    assert "got-term" in log
    assert "child-term" not in log


def in_namespace(link: str) -> list[int]:
    """Pids of the processes in the PID namespace ``link`` (``pid:[inode]``)."""
    out = []
    for proc in pathlib.Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if os.readlink(proc / "ns" / "pid") == link:
                    out.append(int(proc.name))
            except OSError:
                continue
    return out


async def test_sigkill_of_pid_1_leaves_no_process(image: Image, tmp_path: pathlib.Path) -> None:
    before = set(shim_processes())
    proc = await Process.start(
        spec(image, ["sh", "-c", "sleep 300 & sleep 300 & wait"]), tmp_path / "run", tmp_path / "log"
    )
    await asyncio.sleep(0.3)
    namespace = os.readlink(f"/proc/{proc.pid}/ns/pid")
    assert len(in_namespace(namespace)) == 3
    assert await proc.kill() == 128 + signal.SIGKILL
    await asyncio.sleep(0.2)
    assert in_namespace(namespace) == []
    assert set(shim_processes()) <= before
