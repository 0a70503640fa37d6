"""The one base of the stand-in controllers, and the ``Backend`` the MariaDB and RabbitMQ ones act on.

A stand-in names the collections it needs cached (``watches``), the kinds it answers for
(``kinds``), the keys of its kinds a change of another object affects (``affected``) and how it
answers one object (``reconcile``); ``StandIns`` (``runner``) runs the caches, the queue and the
workers for all of them. A stand-in with a loop of its own (the compute agent) overrides ``run``.
The writes every stand-in makes (status, finalizers, the Service in front of a real server) are
here.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar, Protocol

from simcluster.client.asynckube import JSON, ApiError, AsyncKube
from simcluster.client.watchcache import Store
from simcluster.standins.objects import (
    merge_conditions,
    object_path,
    owner_reference,
    same_conditions,
    strip_times,
)

Key = tuple[str, str, str]  # kind (plural), namespace, name


class Backend(Protocol):
    """The servers behind the MariaDB and RabbitMQ objects, when they are real (the real-Nova tier).

    Blocking calls: the stand-ins run them in a thread. Without a backend the stand-ins only write
    status, as before. Names are the server's own: every MariaDB object maps to one server here, so
    two Novas that name the same schema or user share it (the real tier gives each its own names).
    """

    def create_database(self, name: str, *, charset: str, collation: str) -> None: ...
    def drop_database(self, name: str) -> None: ...
    def ensure_user(self, name: str, password: str, *, max_connections: int, host: str) -> None: ...
    def drop_user(self, name: str, host: str) -> None: ...
    def grant(
        self,
        privileges: Sequence[str],
        database: str,
        table: str,
        user: str,
        *,
        host: str,
        grant_option: bool,
    ) -> None: ...
    def revoke_all(self, database: str, table: str, user: str, *, host: str) -> None: ...
    def ensure_broker_user(self, name: str, password: str) -> None: ...
    def delete_broker_user(self, name: str) -> None: ...
    def endpoint(self, kind: str) -> tuple[str, int]:
        """Where the real server of ``kind`` ("mariadb", "rabbitmq") listens: address and port."""
        ...


class StandIn:
    """One stand-in controller over the shared caches (see the module docstring)."""

    watches: ClassVar[tuple[str, ...]] = ()  # collection paths; a store is named by the last segment
    kinds: ClassVar[frozenset[str]] = frozenset()  # the stores whose objects this stand-in answers

    def __init__(self, kube: AsyncKube, stores: Mapping[str, Store], backend: Backend | None = None) -> None:
        self.kube = kube
        self.stores = stores
        self.backend = backend

    def store(self, kind: str) -> Store:
        return self.stores[kind]

    def affected(self, kind: str, obj: JSON) -> Iterable[Key]:
        """Keys of this stand-in's kinds that a change of ``obj`` (of store ``kind``) affects."""
        return ()

    async def reconcile(self, kind: str, obj: JSON) -> None:
        """Answer one object of one of ``kinds``, from the caches."""

    async def run(self, stop: asyncio.Event) -> None:
        """A loop of the stand-in's own, beside the caches' (none by default)."""

    # -- the writes every stand-in makes ------------------------------------------------------

    def remember(self, plural: str, answer: JSON) -> None:
        """A write's answer is the newest object: cache it, so the next look does not repeat the write."""
        if answer.get("metadata"):
            self.store(plural).put(answer)

    async def write_status(
        self, base: str, plural: str, obj: JSON, status: JSON, *, cluster_scoped: bool = False
    ) -> None:
        """Merge-patch ``status`` unless it already holds the same (conditions compared without times)."""
        old = obj.get("status", {}) or {}
        status = dict(status)
        if "conditions" in status:
            status["conditions"] = merge_conditions(old.get("conditions", []), status["conditions"])
        unchanged = all(
            same_conditions(old.get(k, []), v)
            if k == "conditions"
            else strip_times(old.get(k)) == strip_times(v)
            for k, v in status.items()
        )
        if unchanged:
            return
        name = obj["metadata"]["name"]
        path = f"{base}/{plural}/{name}" if cluster_scoped else object_path(base, plural, obj)
        with contextlib.suppress(ApiError):  # gone or conflicting: the watch brings the new state
            self.remember(plural, await self.kube.merge_patch(path + "/status", {"status": status}))

    async def finalize(self, base: str, plural: str, obj: JSON, finalizer: str) -> bool:
        """Add the real controller's finalizer; on deletion remove it. True when the object is going away."""
        finalizers = list(obj["metadata"].get("finalizers", []))
        path = object_path(base, plural, obj)
        if obj["metadata"].get("deletionTimestamp"):
            if finalizer in finalizers:
                finalizers.remove(finalizer)
                await self._patch_finalizers(plural, path, obj, finalizers)
            return True
        if finalizer not in finalizers:
            await self._patch_finalizers(plural, path, obj, [*finalizers, finalizer])
        return False

    async def _patch_finalizers(self, plural: str, path: str, obj: JSON, finalizers: list[str]) -> None:
        rv = obj["metadata"]["resourceVersion"]
        with contextlib.suppress(ApiError):  # conflict or gone: the watch brings the new state
            body = {"metadata": {"finalizers": finalizers, "resourceVersion": rv}}
            self.remember(plural, await self.kube.merge_patch(path, body))

    def secret_value(self, ns: str, name: str, key: str) -> str:
        raw = ((self.store("secrets").get(ns, name) or {}).get("data") or {}).get(key, "")
        return base64.b64decode(raw).decode() if raw else ""

    async def backend_service(self, owner: JSON, api_version: str, kind: str, server: str, port: int) -> None:
        """The Service the cluster's operator would create (named as the object), here without a
        selector and with an EndpointSlice naming the real server; created once, owned by the object."""
        assert self.backend is not None
        meta = owner["metadata"]
        ns, name = meta["namespace"], meta["name"]
        if self.store("services").get(ns, name) is not None:
            return
        address, target = self.backend.endpoint(server)
        ref = [owner_reference(owner, api_version, kind)]
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": ns, "ownerReferences": ref},
            "spec": {"ports": [{"name": server, "port": port, "targetPort": target, "protocol": "TCP"}]},
        }
        endpoints = {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{name}-{server}",
                "namespace": ns,
                "labels": {
                    "kubernetes.io/service-name": name,
                    "endpointslice.kubernetes.io/managed-by": "simcluster.standins",
                },
                "ownerReferences": ref,
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
            "ports": [{"name": server, "port": target, "protocol": "TCP"}],
        }
        with contextlib.suppress(ApiError):  # AlreadyExists after a race: fine
            await self.kube.create(f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices", endpoints)
        with contextlib.suppress(ApiError):
            self.remember("services", await self.kube.create(f"/api/v1/namespaces/{ns}/services", service))
