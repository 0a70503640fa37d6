"""An informer whose namespaces follow other informers: ``ScopedInformer``.

Some kinds must not be listed and watched cluster-wide (Secrets: a cluster-wide informer
would hold every credential of the cluster in memory and needs a ClusterRole to read them
all). A ``ScopedInformer`` runs one reflector loop per namespace it is asked to cover, and
the set changes at runtime: ``follow(source)`` makes every namespace that holds at least one
object of ``source`` (say, a Nova or a NovaCompute) covered, and releases a namespace once
its last such object is gone (its objects are dropped from the cache without delete events).
``follow(source, when=predicate)`` counts only the objects ``predicate`` admits (a Nova that names
a policy ConfigMap): a namespace whose objects need nothing of this kind is never listed.

Readers ask ``cache.covers(namespace)`` before trusting a miss: a namespace that has not
been listed yet (a CR that just appeared) is not covered, and the caller falls back to one
GET. Once listed, every read is served from the cache (a converged pass sends no GET). The
informer counts as synced from the start, so it never holds up the manager's start-up.
"""

from __future__ import annotations

import asyncio

from nova_operator.kube.resources import ResourceRef
from nova_operator.kube.types import Object
from nova_operator.metrics import Metrics
from nova_operator.runtime.handlers import forgotten
from nova_operator.runtime.informer import Informer, ListWatcher
from nova_operator.runtime.transform import Admits
from nova_operator.settings import WatchSettings


class ScopedInformer(Informer):
    def __init__(
        self,
        lw: ListWatcher,
        ref: ResourceRef,
        *,
        label_selector: str | None = None,
        settings: WatchSettings | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        super().__init__(lw, ref, label_selector=label_selector, settings=settings, metrics=metrics)
        self.namespaces = ()
        self._holders: dict[str, set[str]] = {}  # namespace -> who wants it covered
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._changed = asyncio.Event()
        self.cache.cover(set())
        self.cache.mark_synced()
        self._synced.set()

    # -- scope -------------------------------------------------------------------------------

    @property
    def wanted(self) -> frozenset[str]:
        return frozenset(self._holders)

    def want(self, namespace: str, holder: str) -> None:
        """Cover ``namespace`` while ``holder`` wants it (idempotent)."""
        holders = self._holders.setdefault(namespace, set())
        if holder not in holders:
            holders.add(holder)
            self._changed.set()

    def release(self, namespace: str, holder: str) -> None:
        """``holder`` no longer needs ``namespace``; the last holder's release stops covering it."""
        holders = self._holders.get(namespace)
        if holders is None or holder not in holders:
            return
        holders.discard(holder)
        if not holders:
            del self._holders[namespace]
            self._changed.set()

    def follow(self, source: Informer, when: Admits | None = None) -> None:
        """Cover every namespace in which ``source``'s cache holds an object (one ``when`` admits)."""
        source.add_handler(_Follower(self, source, when))

    # -- running -----------------------------------------------------------------------------

    async def run(self) -> None:
        self._started = True
        try:
            while True:
                self._changed.clear()
                self._reconcile_tasks()
                await self._changed.wait()
        finally:
            tasks = list(self._tasks.values())
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._tasks.clear()

    def _reconcile_tasks(self) -> None:
        for namespace in sorted(self._holders.keys() - self._tasks.keys()):
            self._tasks[namespace] = asyncio.create_task(
                self._reflect(namespace), name=f"informer {self.ref} {namespace}"
            )
        for namespace in sorted(self._tasks.keys() - self._holders.keys()):
            task = self._tasks.pop(namespace)
            task.cancel()  # suspended at an await: it writes nothing more to the cache
            self._listed.discard(namespace)
            self._rv.pop(namespace, None)
            for obj in self.cache.uncover(namespace):  # no delete events: bookkeeping only
                for handler in self._handlers:
                    forgotten(handler, obj)

    async def _list(self, namespace: str | None) -> str:
        rv = await super()._list(namespace)
        if namespace is not None and namespace in self._holders:
            self.cache.cover({namespace} | self.cache.covered)
        return rv


class _Follower:
    """Turns ``source``'s add/delete events (of the objects ``when`` admits) into want/release of the
    object's namespace."""

    def __init__(self, scoped: ScopedInformer, source: Informer, when: Admits | None = None) -> None:
        self._scoped, self._source, self._when = scoped, source, when
        self._holder = f"{source.ref}" if when is None else f"{source.ref} admitted"

    @staticmethod
    def _namespace(obj: Object) -> str:
        return str((obj.get("metadata") or {}).get("namespace") or "")

    def on_add(self, obj: Object) -> None:
        namespace = self._namespace(obj)
        if namespace and (self._when is None or self._when(obj)):
            self._scoped.want(namespace, self._holder)
        elif namespace:
            self._release_unless_held(namespace)  # an update that no longer admits it

    def on_update(self, old: Object, new: Object) -> None:
        self.on_add(new)

    def on_delete(self, obj: Object) -> None:
        if namespace := self._namespace(obj):
            self._release_unless_held(namespace)

    def _release_unless_held(self, namespace: str) -> None:
        """Release ``namespace`` when no object of ``source`` left there is admitted."""
        if self._when is None:
            held = bool(self._source.cache.list_keys(namespace))
        else:
            held = any(self._when(obj) for obj in self._source.cache.list(namespace))
        if not held:
            self._scoped.release(namespace, self._holder)
