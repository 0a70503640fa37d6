"""Watches (as admin) the kinds a Nova's install waits on and records when each object first turned
ready, with this process's wall clock (the audit log's clock: the same machine)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from simcluster.client.asynckube import JSON, AsyncKube
from simcluster.client.watchcache import Store, reflect


def _conditions(obj: JSON) -> dict[str, JSON]:
    return {c.get("type", ""): c for c in (obj.get("status") or {}).get("conditions") or []}


def _cond_true(obj: JSON, type_: str) -> bool:
    return _conditions(obj).get(type_, {}).get("status") == "True"


def nova_ready(obj: JSON) -> bool:
    ready = _conditions(obj).get("Ready") or {}
    return ready.get("status") == "True" and ready.get("observedGeneration") == obj["metadata"].get(
        "generation"
    )


def deployment_available(obj: JSON) -> bool:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    want = int(spec.get("replicas", 1))
    return bool(
        status.get("observedGeneration") == obj["metadata"].get("generation")
        and (status.get("availableReplicas") or 0) >= want
        and (status.get("updatedReplicas") or 0) >= want
    )


def route_accepted(obj: JSON) -> bool:
    return any(
        c.get("type") == "Accepted" and c.get("status") == "True"
        for p in (obj.get("status") or {}).get("parents") or []
        for c in p.get("conditions") or []
    )


# kind -> (collection path, ready predicate); children are those the operator labels as its own.
MANAGED = "app.kubernetes.io%2Fmanaged-by%3Dnova-operator"
KINDS: dict[str, tuple[str, Callable[[JSON], bool]]] = {
    "novas": ("/apis/nova.openstack.c5c3.io/v1alpha1/novas", nova_ready),
    "databases": ("/apis/k8s.mariadb.com/v1alpha1/databases", lambda o: _cond_true(o, "Ready")),
    "users": ("/apis/k8s.mariadb.com/v1alpha1/users", lambda o: _cond_true(o, "Ready")),
    "grants": ("/apis/k8s.mariadb.com/v1alpha1/grants", lambda o: _cond_true(o, "Ready")),
    "jobs": (f"/apis/batch/v1/jobs?labelSelector={MANAGED}", lambda o: _cond_true(o, "Complete")),
    "deployments": (f"/apis/apps/v1/deployments?labelSelector={MANAGED}", deployment_available),
    "httproutes": ("/apis/gateway.networking.k8s.io/v1/httproutes", route_accepted),
}

Key = tuple[str, str, str]  # kind, namespace, name


class Tracker:
    """``ready[(kind, ns, name)]``: when the object was first seen ready (epoch seconds)."""

    def __init__(self, kube: AsyncKube, namespaces: set[str]) -> None:
        self.kube = kube
        self.namespaces = namespaces
        self.ready: dict[Key, float] = {}
        self.seen: set[Key] = set()
        self.changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._stop = asyncio.Event()  # never set: ``stop`` cancels the watches

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(
                reflect(self.kube, Store(kind, path), self._changed, self._stop), name=f"track {kind}"
            )
            for kind, (path, _) in KINDS.items()
        ]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t

    def ready_in(self, kind: str, namespace: str) -> list[float]:
        return [t for (k, ns, _), t in self.ready.items() if k == kind and ns == namespace]

    def _see(self, kind: str, obj: JSON, check: Callable[[JSON], bool], at: float) -> None:
        meta = obj.get("metadata") or {}
        key = (kind, str(meta.get("namespace", "")), str(meta.get("name", "")))
        if key[1] not in self.namespaces:
            return
        self.seen.add(key)
        if key not in self.ready and check(obj):
            self.ready[key] = at
            self.changed.set()

    def _changed(self, store: Store, obj: JSON, deleted: bool) -> None:
        if not deleted:
            self._see(store.kind, obj, KINDS[store.kind][1], time.time())

    async def wait(self, done: Callable[[], bool], within: float) -> bool:
        deadline = time.monotonic() + within
        while not done():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(left, 1.0)):
                    await self.changed.wait()
        return True


def ready_times(tracker: Tracker, kind: str) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for (k, ns, _), t in tracker.ready.items():
        if k == kind:
            out.setdefault(ns, []).append(t)
    return out
