"""The cells report of a completed db-sync Job (reconciler.md §5.5).

The db-sync script writes ``<name>=<uuid>`` lines (cell0 first) to the termination log;
nova generates a cell's UUID when it maps it, so this is the only place to learn them.
Anything else on a line, or a message with no valid line, yields nothing: published
UUIDs are never cleared by garbage.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from nova_operator.models.nova import CELL_NAME_MAX, MAX_CELLS

_LINE: Final = re.compile(r"^([A-Za-z0-9_-]+)=([0-9a-f-]{36})$")


def parse_cells_report(message: str | None) -> list[dict[str, str]]:
    """``[{"name", "uuid"}, ...]`` in the order of the report; empty when no line is valid.

    Bounded by what ``status.cells`` accepts: a name longer than the CRD allows is no valid line,
    and only the first ``MAX_CELLS`` (cell0 first) are kept: the API server refuses a longer list,
    and with it the whole status write, on every pass.
    """
    if not message:
        return []
    return [
        {"name": m.group(1), "uuid": m.group(2)}
        for line in message.splitlines()
        if (m := _LINE.match(line.strip("\r"))) is not None and len(m.group(1)) <= CELL_NAME_MAX
    ][:MAX_CELLS]


def termination_message(pod: Mapping[str, Any]) -> str | None:
    """The first container's ``state.terminated.message``, else ``lastState.terminated.message``."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    if not statuses:
        return None
    first = statuses[0]
    for key in ("state", "lastState"):
        message = ((first.get(key) or {}).get("terminated") or {}).get("message")
        if message:
            return str(message)
    return None


def report_pod(pods: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The pod in phase Succeeded, else the newest by creation time."""
    for pod in pods:
        if (pod.get("status") or {}).get("phase") == "Succeeded":
            return pod
    if not pods:
        return None
    return max(pods, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "")
