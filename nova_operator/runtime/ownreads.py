"""Read-your-writes for a controller's own kind: the informer cache, except right after a write of ours."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from nova_operator.kube.client import Kube
from nova_operator.kube.errors import NotFound
from nova_operator.kube.resources import ResourceRef
from nova_operator.kube.types import Object
from nova_operator.runtime.cache import Cache, object_version
from nova_operator.runtime.request import Request

_R = TypeVar("_R")


async def read_object(kube: Kube, ref: ResourceRef, namespace: str, name: str) -> Object | None:
    """The CR as the API server has it now; None when it is gone (the pass ends without error)."""
    try:
        return await kube.get(ref, name, namespace)
    except NotFound:
        return None


class OwnReads:
    """A controller's own CR, read from its informer cache: no request on a pass, except right after a write.

    The cache returns a copy (the pass may change it freely) and lags the API server by the
    watch's delay. That lag only matters after the controller's own write to the CR: a pass
    started before the watch delivered that write would work from the object as it was before
    it, e.g. add the finalizer again, snapshot a status it has already replaced (a second,
    redundant status write, a transition event told twice), or retry a Job-recorder annotation.
    None of that corrupts anything (every metadata write carries the resourceVersion it read as
    a precondition, so a stale one ends in a Conflict and a retried pass, never in a lost or
    doubled record), but it is noise. So: after a pass that changed the CR's resourceVersion
    (our own finalizer, annotation or status write) the reader remembers the version the write
    returned; the next pass uses the cache only when the cache shows exactly that version, else
    it GETs (and remembers what the GET returned, until the cache catches up). Registered as a
    handler of the CR's informer, it learns when the watch delivered that version, so a later
    change by somebody else is read from the cache too (resourceVersions are only compared for
    equality, never ordered); a write whose echo the cache holds already when the pass ends is not
    waited for (the watch can deliver it before the pass has finished). A pass that
    raised may have written without learning the version: the next pass GETs. A change by
    anybody else reaches the cache through the watch, which also wakes the pass, so a converged
    CR is read with no request at all. Without a cache for the CR's namespace every read is a GET.
    """

    def __init__(self, kube: Kube, ref: ResourceRef, cache: Cache | None) -> None:
        self.kube = kube
        self.ref = ref
        self.cache = cache
        self._fresh: dict[tuple[str, str], str | None] = {}  # key -> the version to expect; None: GET

    async def read(self, namespace: str, name: str) -> Object | None:
        key = (namespace, name)
        cache = self.cache
        if cache is None or not cache.covers(namespace):
            return await read_object(self.kube, self.ref, namespace, name)
        obj = cache.get(name, namespace)
        if key not in self._fresh:
            return obj
        expected = self._fresh[key]
        if obj is not None and expected is not None and object_version(obj) == expected:
            del self._fresh[key]  # the cache has caught up with our write
            return obj
        live = await read_object(self.kube, self.ref, namespace, name)
        if live is None or cache.resource_version(Request(namespace, name)) == object_version(live):
            self._fresh.pop(key, None)  # gone, or the watch delivered what the GET read while it ran
        else:
            self._fresh[key] = object_version(live)
        return live

    async def run_pass(
        self, namespace: str, name: str, body: Callable[[Object], Awaitable[_R]], gone: _R
    ) -> _R:
        """Read the CR, run ``body`` on it (``gone`` when there is none) and record the outcome."""
        obj = await self.read(namespace, name)
        if obj is None:
            return gone
        read_version = object_version(obj)
        failed = True
        try:
            outcome = await body(obj)
            failed = False
            return outcome
        finally:
            self.after_pass(obj, read_version, failed=failed)

    def after_pass(self, obj: Mapping[str, Any], read_version: str, *, failed: bool = False) -> None:
        """Record the pass's outcome: ``obj`` as the pass left it, ``read_version`` what it started from."""
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if self.cache is None or not self.cache.covers(key[0]):
            return
        gone = bool(meta.get("deletionTimestamp")) and not meta.get("finalizers")
        if gone:  # the last finalizer released: the CR is going away, nothing to wait for
            self._fresh.pop(key, None)
        elif failed:
            self._fresh[key] = None
        elif object_version(obj) != read_version:
            if self.cache.resource_version(Request(key[0], key[1])) == object_version(obj):
                self._fresh.pop(key, None)  # the watch delivered our write before the pass ended
            else:
                self._fresh[key] = object_version(obj)

    # -- the CR's informer (register with ``informer.add_handler(reads)``) ------------------

    def _seen(self, obj: Mapping[str, Any]) -> None:
        """The cache now holds ``obj``: once it shows the version we wrote, every later one is newer."""
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if key in self._fresh and self._fresh[key] == object_version(obj):
            del self._fresh[key]

    def on_add(self, obj: Object) -> None:
        self._seen(obj)

    def on_update(self, old: Object, new: Object) -> None:
        self._seen(new)

    def on_delete(self, obj: Object) -> None:
        meta = obj.get("metadata") or {}
        self._fresh.pop((str(meta.get("namespace") or ""), str(meta.get("name") or "")), None)

    def __len__(self) -> int:
        return len(self._fresh)
