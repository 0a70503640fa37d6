"""A controller's own writes, so that their watch echoes do not wake the key that made them.

Every write a pass sends comes back through the watch a moment later: an Added for each child the
pass created, a Modified for each it changed, and for an annotation patch of the CR itself a
Modified the primary's predicates admit. The pass that wrote already knows that state (the write
returned it), so reconciling the writer again for the echo finds nothing new; with many keys
waiting, those passes sit in the queue in front of work that is due (measured: a third of a Nova's
passes during an install). controller-runtime leaves them in; this filter takes them out, and only
them:

- ``wrote(obj, writer)`` records the object's UID and the resourceVersion the write returned,
  with the key of the writer (one entry per object: a later write replaces it).
- ``writer_of(old, new)`` names that writer when an event carries exactly that version: an add,
  or an update that moved the resourceVersion to it. A resync (the same version handed twice)
  is never an echo, and neither is any other version: another writer's change, our own write's
  successor by someone else, a deletion.
- The handler drops only the writer's key: any other key the event maps to (another CR that
  names the object) is enqueued as before.
- ``forget`` on a deletion, so the table holds at most one entry per live object written.

A write whose echo arrives before the pass recorded it (the watch can be faster than the
response) is simply not filtered: one extra pass, as without this filter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nova_operator.runtime.request import Request

Object = Mapping[str, Any]


def _meta(obj: Object | None) -> Mapping[str, Any]:
    meta = (obj or {}).get("metadata")
    return meta if isinstance(meta, Mapping) else {}


class OwnWrites:
    def __init__(self) -> None:
        self._written: dict[str, tuple[str, Request]] = {}  # uid -> (resourceVersion, writer)

    def wrote(self, obj: Object, writer: Request) -> None:
        """``obj`` as a write by ``writer`` returned it (its UID and resourceVersion)."""
        meta = _meta(obj)
        uid, version = str(meta.get("uid") or ""), str(meta.get("resourceVersion") or "")
        if uid and version:
            self._written[uid] = (version, writer)

    def writer_of(self, old: Object | None, new: Object) -> Request | None:
        """The key whose own write ``new`` is, for an add (``old`` None) or an update; else None."""
        meta = _meta(new)
        version = str(meta.get("resourceVersion") or "")
        if old is not None and str(_meta(old).get("resourceVersion") or "") == version:
            return None  # a resync: it exists to reconcile again
        found = self._written.get(str(meta.get("uid") or ""))
        if found is None or not version or found[0] != version:
            return None
        return found[1]

    def forget(self, obj: Object) -> None:
        self._written.pop(str(_meta(obj).get("uid") or ""), None)

    def __len__(self) -> int:
        return len(self._written)
