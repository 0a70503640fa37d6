"""The host's PIDs of a container's processes on a real node, for a test that injects a fault into
them (a hang by SIGSTOP, a kill): ``ctr tasks ps`` on the pod's node lists them. The nodes share
the host's PID namespace (each has its own mount and UTS namespaces only), so the PIDs are the
host's."""

from __future__ import annotations

import contextlib
import os
import subprocess
from typing import Any

from realnode.nodes import RealNodes


def container_pids(nodes: RealNodes, pod: dict[str, Any], container: str) -> list[int]:
    """Every process of ``container`` in ``pod`` (running, on one of ``nodes``)."""
    node = next(n for n in nodes.nodes if n.name == pod["spec"]["nodeName"])
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    (status,) = [s for s in statuses if s["name"] == container]
    container_id = str(status["containerID"]).partition("://")[2]
    listed = subprocess.run(node.ctr("tasks", "ps", container_id), capture_output=True, text=True, check=True)
    return parse_tasks_ps(listed.stdout)


def parse_tasks_ps(text: str) -> list[int]:
    """The PIDs of ``ctr tasks ps``'s table (a ``PID  INFO`` header, then a PID per line)."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    return [int(fields[0]) for fields in lines[1:] if fields[0].isdigit()]


def send(pids: list[int], sig: int) -> None:
    """``sig`` to each of ``pids``; one that ended meanwhile (a short-lived child) is skipped."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
