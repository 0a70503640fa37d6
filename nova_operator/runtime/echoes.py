"""A controller's own writes, so that their watch echoes do not wake the key that made them.

Every write a pass sends comes back through the watch a moment later: an Added for each child the
pass created, a Modified for each it changed, and for an annotation patch of the CR itself a
Modified the primary's predicates admit. The pass that wrote already knows that state (the write
returned it), so reconciling the writer again for the echo finds nothing new; with many keys
waiting, those passes sit in the queue in front of work that is due. controller-runtime leaves
them in; this filter takes them out, and only them:

- ``wrote(obj, writer)`` records the object's UID and the resourceVersion the write returned,
  with the key of the writer (one entry per object: a later write replaces it).
- ``admit(key, old, new)`` is asked by a handler for every key an add or update maps to. An event
  carrying exactly the version ``key`` wrote is left out. While ``key``'s own pass is running
  (``busy``), the answer is deferred: the event may be the echo of a write whose response the pass
  has not read yet (the watch can be faster than the response). ``settle(key)`` at the end of the
  pass says whether any deferred event was something else; then the key is enqueued, exactly as an
  event during a pass always marked it for one more pass.
- A resync (the same version handed twice), any other version, any other key the event maps to,
  and deletions are admitted as before; a deletion also forgets the entry, so the table holds at
  most one entry per live object written. So does an object an informer stops watching without a
  deletion (its namespace is no longer covered, ``runtime.scoped``: its deletion would never be
  seen), and ``forget_writer`` drops every entry of a writer whose own object is gone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from nova_operator.runtime.cache import object_version
from nova_operator.runtime.request import Request


def _meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    meta = (obj or {}).get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _identity(obj: Mapping[str, Any]) -> tuple[str, str]:
    return str(_meta(obj).get("uid") or ""), object_version(obj)


class OwnWrites:
    def __init__(self, busy: Callable[[Request], bool] = lambda _key: False) -> None:
        self._busy = busy
        self._written: dict[str, tuple[str, Request]] = {}  # uid -> (resourceVersion, writer)
        self._deferred: dict[Request, list[tuple[str, str]]] = {}  # key -> (uid, version) seen in its pass

    def wrote(self, obj: Mapping[str, Any], writer: Request) -> None:
        """``obj`` as a write by ``writer`` returned it (its UID and resourceVersion)."""
        uid, version = _identity(obj)
        if uid and version:
            self._written[uid] = (version, writer)

    def _by(self, key: Request, uid: str, version: str) -> bool:
        return bool(uid and version) and self._written.get(uid) == (version, key)

    def admit(self, key: Request, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
        """Whether an add (``old`` None) or update mapped to ``key`` should enqueue it now."""
        uid, version = _identity(new)
        if old is not None and _identity(old)[1] == version:
            return True  # a resync: it exists to reconcile again
        if self._by(key, uid, version):
            return False  # the echo of key's own write
        if uid and version and self._busy(key):
            self._deferred.setdefault(key, []).append((uid, version))
            return False  # decided when key's pass ends (``settle``)
        return True

    def settle(self, key: Request) -> bool:
        """At the end of ``key``'s pass: whether an event deferred during it was not its own write."""
        return any(not self._by(key, uid, version) for uid, version in self._deferred.pop(key, ()))

    def forget(self, obj: Mapping[str, Any]) -> None:
        self._written.pop(_identity(obj)[0], None)

    def forget_writer(self, writer: Request) -> None:
        """``writer``'s object is gone: its entries can never matter again (nor what it deferred)."""
        self._written = {uid: entry for uid, entry in self._written.items() if entry[1] != writer}
        self._deferred.pop(writer, None)

    def __len__(self) -> int:
        return len(self._written)
