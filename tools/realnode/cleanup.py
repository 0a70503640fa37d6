"""Finding and ending what real nodes leave: processes by namespace or cgroup, and the cgroups.

Used by ``RealNodes.stop()`` and by ``realnode.janitor``, which does the same when the process that
started the nodes died without stopping them. ``Traces`` names what belongs to one ``RealNodes``.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import signal
import time
from dataclasses import asdict, dataclass, field

CGROUPS = pathlib.Path("/sys/fs/cgroup")


@dataclass
class Traces:
    """What identifies the processes and cgroups of one set of nodes."""

    net_inode: int | None = None  # the nodes' network namespace
    mnt_inodes: list[int] = field(default_factory=list)  # one per node
    cgroup_roots: list[str] = field(default_factory=list)  # one per node, in every hierarchy

    def save(self, path: pathlib.Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self)))
        tmp.rename(path)

    @classmethod
    def load(cls, path: pathlib.Path) -> Traces:
        return cls(**json.loads(path.read_text()))


def ns_inode(pid: int, kind: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/{kind}").st_ino
    except OSError:
        return None


def pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def zombie(pid: int) -> bool:
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def cmdline(pid: int) -> str:
    try:
        raw = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace")[:200]


def in_cgroups(pid: int, roots: list[str]) -> bool:
    try:
        cgroups = pathlib.Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return False
    return any(f":/{root}/" in cgroups or f":/{root}\n" in cgroups for root in roots)


def belongs(pid: int, traces: Traces) -> str | None:
    """Why ``pid`` is one of these nodes' processes, or None."""
    if traces.net_inode is not None and ns_inode(pid, "net") == traces.net_inode:
        return "in the nodes' network namespace"
    if ns_inode(pid, "mnt") in traces.mnt_inodes:
        return "in a node's mount namespace"
    if in_cgroups(pid, traces.cgroup_roots):
        return "in a node's cgroup"
    return None


def kill_all(traces: Traces, spare: set[int], timeout: float = 20.0) -> None:
    """SIGKILL every live process of ``traces`` but ``spare``, until none is left or ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in pids() if p not in spare and not zombie(p) and belongs(p, traces)]
        if not left or time.monotonic() > deadline:
            return
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def cgroup_dirs(root: str) -> list[pathlib.Path]:
    return [d for d in CGROUPS.glob(f"*/{root}") if d.is_dir()]


def remove_cgroups(roots: list[str], timeout: float = 10.0) -> None:
    """Depth first, in every hierarchy; a cgroup whose last process just died may stay busy a moment."""
    deadline = time.monotonic() + timeout
    while True:
        busy = False
        for root in roots:
            for top in cgroup_dirs(root):
                for d in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                    try:
                        d.rmdir()
                    except FileNotFoundError:
                        pass
                    except OSError:
                        busy = True
                try:
                    top.rmdir()
                except FileNotFoundError:
                    pass
                except OSError:
                    busy = True
        if not busy or time.monotonic() > deadline:
            return
        time.sleep(0.2)


def sweep(traces: Traces, spare: set[int] | None = None) -> None:
    kill_all(traces, spare or set())
    remove_cgroups(traces.cgroup_roots)
