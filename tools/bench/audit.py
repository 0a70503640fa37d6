"""The API server's audit log (JSON lines, one per completed request: the operator's, and others'
status writes to the kinds an install waits on; see ``simcluster.platform.controlplane.AUDIT_POLICY``).

``read(path, offset)`` parses what was appended since ``offset``; ``Request`` keeps the fields the
benchmark counts by. Verbs are the audit verbs (``get``, ``list``, ``watch``, ``create``,
``patch``, ``update``, ``delete``); a resource is ``plural`` or ``plural/subresource``.
"""

from __future__ import annotations

import json
import pathlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

WRITES = frozenset({"create", "patch", "update", "delete", "deletecollection"})
READS = frozenset({"get", "list"})
LEASES = "leases"


@dataclass(frozen=True)
class Request:
    at: float  # requestReceivedTimestamp, seconds since the epoch
    user: str
    verb: str
    resource: str  # plural[/subresource]
    namespace: str
    name: str
    code: int

    @property
    def is_write(self) -> bool:
        return self.verb in WRITES

    @property
    def is_read(self) -> bool:
        return self.verb in READS

    @property
    def created(self) -> bool:
        """A create, or a server-side apply that created the object (201)."""
        return self.code == 201 and self.verb in ("create", "patch")


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def parse(line: str) -> Request | None:
    try:
        event = json.loads(line)
    except ValueError:  # a line being written right now
        return None
    if event.get("stage") != "ResponseComplete":
        return None
    ref = event.get("objectRef") or {}
    resource = str(ref.get("resource") or event.get("requestURI", "?"))
    if ref.get("subresource"):
        resource = f"{resource}/{ref['subresource']}"
    return Request(
        at=_epoch(event["requestReceivedTimestamp"]),
        user=str((event.get("user") or {}).get("username", "")),
        verb=str(event.get("verb", "")),
        resource=resource,
        namespace=str(ref.get("namespace") or ""),
        name=str(ref.get("name") or ""),
        code=int((event.get("responseStatus") or {}).get("code") or 0),
    )


class AuditLog:
    """Reads the log incrementally; ``requests`` holds every request read so far, in log order."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self.requests: list[Request] = []
        self._offset = 0

    def refresh(self) -> list[Request]:
        """Parse the complete lines appended since the last call; returns them."""
        if not self.path.exists():
            return []
        with self.path.open("rb") as fh:
            fh.seek(self._offset)
            data = fh.read()
        end = data.rfind(b"\n") + 1
        self._offset += end
        new = [r for line in data[:end].decode(errors="replace").splitlines() if (r := parse(line))]
        self.requests.extend(new)
        return new

    def between(self, start: float, end: float, user: str | None = None) -> list[Request]:
        return [r for r in self.requests if start <= r.at < end and (user is None or r.user == user)]

    def of(self, user: str) -> list[Request]:
        return [r for r in self.requests if r.user == user]


def by_verb_and_resource(requests: Iterable[Request]) -> Counter[str]:
    """``"verb resource"`` -> count (the Lease renewals of leader election counted apart by the caller)."""
    return Counter(f"{r.verb} {r.resource}" for r in requests)


def without_leases(requests: Iterable[Request]) -> list[Request]:
    return [r for r in requests if r.resource.split("/")[0] != LEASES]
