"""``StandIns``: every stand-in controller over one set of caches, one work queue and its workers.

Watch-driven (``watchcache``): each collection a stand-in names is cached by list + watch, and a
change queues the keys of the objects it affects (the object itself when a stand-in answers for
its kind, and whatever each stand-in's ``affected`` names: a MariaDB's Databases, a User's Grants,
a Secret's Users, a Service's HTTPRoutes, ...); each key is reconciled from the caches by the
stand-in that owns its kind, so an object is answered within moments of its change however many
others exist (the benchmark's 100 Novas: 500 MariaDB objects). Every key is looked at again every
30 s. A stand-in with a loop of its own (the compute agent) runs beside.
"""

from __future__ import annotations

import asyncio

from simcluster.client.asynckube import JSON, AsyncKube, sleep_or
from simcluster.client.watchcache import KeyQueue, Store, key_of, reflect, run_until, run_workers
from simcluster.standins.base import Backend, Key, StandIn
from simcluster.standins.compute import ComputeAgent
from simcluster.standins.gateway import GatewayController
from simcluster.standins.mariadb import MariaDBOperator
from simcluster.standins.openstack import FakeOpenStack
from simcluster.standins.rabbitmq import RabbitMQOperator

RESYNC_SECONDS = 30.0  # every key is looked at again this often, whatever the watches said
WORKERS = 16  # concurrent writes: a burst of 100 Novas' 800 MariaDB objects clears in seconds
CACHED = (MariaDBOperator, RabbitMQOperator, GatewayController)  # the cache-driven stand-ins


class StandIns:
    """Runs every stand-in controller until ``stop`` is set (see the module docstring)."""

    def __init__(
        self,
        kube: AsyncKube,
        openstack: FakeOpenStack | None = None,
        backend: Backend | None = None,
        namespace: str | None = None,
    ) -> None:
        self.kube = kube
        # only this namespace's objects are acted on (None: all); a test's own stand-ins on a shared
        # control plane must not act on what other tests left there, against real servers at that
        self.namespace = namespace
        self.handled = 0  # keys reconciled
        self.queue: KeyQueue[Key] = KeyQueue()
        paths = dict.fromkeys(path for kind in CACHED for path in kind.watches)
        self.stores = {path.rsplit("/", 1)[1]: Store(path.rsplit("/", 1)[1], path) for path in paths}
        self.stand_ins: list[StandIn] = [kind(kube, self.stores, backend) for kind in CACHED]
        self._owner = {kind: s for s in self.stand_ins for kind in s.kinds}
        self.compute = ComputeAgent(kube, self.stores, openstack) if openstack is not None else None

    async def run(self, stop: asyncio.Event) -> None:
        tasks = [
            asyncio.create_task(reflect(self.kube, s, self._changed, stop), name=f"watch {s.path}")
            for s in self.stores.values()
        ]
        tasks.append(asyncio.create_task(run_workers(self.queue, self._handle, WORKERS, stop)))
        tasks.append(asyncio.create_task(self._resync(stop), name="stand-in resync"))
        if self.compute is not None:
            tasks.append(asyncio.create_task(self.compute.run(stop), name="compute agent"))
        await run_until(stop, tasks)

    async def _resync(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await sleep_or(stop, RESYNC_SECONDS)
            for kind, store in self.stores.items():
                if kind in self._owner:
                    for ns, name in list(store.objects):
                        self._add((kind, ns, name))

    def _changed(self, store: Store, obj: JSON, deleted: bool) -> None:
        if store.kind in self._owner:
            self._add((store.kind, *key_of(obj)))
        for stand_in in self.stand_ins:
            for key in stand_in.affected(store.kind, obj):
                self._add(key)

    def _add(self, key: Key) -> None:
        if self.namespace is None or key[1] == self.namespace:
            self.queue.add(key)

    async def _handle(self, key: Key) -> None:
        kind, ns, name = key
        obj = self.stores[kind].get(ns, name)
        self.handled += 1
        if obj is not None:
            await self._owner[kind].reconcile(kind, obj)
