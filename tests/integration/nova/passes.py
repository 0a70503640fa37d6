"""A Nova pass's context over the real API server, for step tests (not a test module).

``make_ctx`` builds the pass a step runs in: the Nova (``tests/novas.py``'s) is stored by
kube-apiserver (its uid, generation and resourceVersion are the server's), the client is the real
one, and the informer caches are ``Cache`` objects the test fills with what the server holds (so a
test decides what the watch has delivered).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from nova_operator.kube import Kube
from nova_operator.kube.resources import CONFIGMAPS, DEPLOYMENTS, JOBS, NOVAS, SECRETS, ResourceRef, ref_for
from nova_operator.kube.types import Object
from nova_operator.models.nova import Nova
from nova_operator.reconcilers.metrics import NovaMetrics
from nova_operator.reconcilers.nova.context import NovaOptions, PassContext
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.echoes import OwnWrites
from tests.novas import nova_spec

NOW = datetime(2026, 1, 1, tzinfo=UTC)
CACHED = {"Secret": SECRETS, "ConfigMap": CONFIGMAPS, "Deployment": DEPLOYMENTS, "Job": JOBS}


async def stored_nova(
    admin: Kube, ns: str, name: str = "nova", *, finalizers: list[str] | None = None, **spec: Any
) -> Object:
    """A Nova created on the server (``nova_spec(**spec)``) as the server answers it."""
    meta: dict[str, Any] = {"name": name}
    if finalizers:
        meta["finalizers"] = finalizers
    body = {"apiVersion": NOVAS.api_version, "kind": "Nova", "metadata": meta, "spec": nova_spec(**spec)}
    return await admin.create(NOVAS, body, ns)


def secret(name: str, **data: str) -> Object:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": encoded}


async def put(admin: Kube, ref: ResourceRef, body: Mapping[str, Any], ns: str) -> Object:
    """``body`` created on the server in ``ns``: the stored object (for a cache or an assertion)."""
    return await admin.create(ref, {**body, "metadata": {**body["metadata"], "namespace": ns}}, ns)


class Emitted:
    """An event sink recording (type, reason, message): the steps' events, without the Events API."""

    def __init__(self) -> None:
        self.emitted: list[tuple[str, str, str]] = []

    async def emit(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        self.emitted.append((type_, reason, message))


def make_ctx(
    kube: Kube,
    nova: Object,
    *cached: Object,
    events: Any = None,
    options: NovaOptions | None = None,
    caches: Mapping[ResourceRef, Cache] | None = None,
    writes: OwnWrites | None = None,
    status: Object | None = None,
) -> PassContext:
    """A pass over the stored ``nova``: the Secrets, ConfigMaps, Deployments and Jobs caches hold
    ``cached`` (objects as the server answered them) and nothing else; ``caches`` adds or replaces.
    ``status``: the working status to begin from (a test of several passes keeps one)."""
    filled = {ref: Cache(str(ref)) for ref in CACHED.values()}
    for obj in cached:
        filled[CACHED[obj["kind"]]].upsert(obj)
    return PassContext(
        kube=kube,
        obj=nova,
        nova=Nova.model_validate(nova),
        status=status if status is not None else {},
        now=lambda: NOW,
        events=events if events is not None else Emitted(),
        caches={**filled, **(caches or {})},
        metrics=NovaMetrics.of(kube.metrics),
        options=options or NovaOptions(),
        writes=writes,
    )


async def stored(admin: Kube, ns: str, *bodies: Mapping[str, Any]) -> list[Object]:
    """Each of ``bodies`` created on the server in ``ns``, as the server answered (for the caches)."""
    return [await put(admin, ref_for(b["apiVersion"], b["kind"]), b, ns) for b in bodies]


ALL_SECRETS = (
    secret("api-db", username="a", password="pa"),
    secret("cell-db", username="c", password="pc"),
    secret("service-user", password="ps"),
    secret("metadata-proxy", shared_secret="pm"),
)


def owned_by(body: Object, nova: Object) -> Object:
    """``body`` with ``nova`` as its controller (as the operator's own writes leave a child)."""
    meta = nova["metadata"]
    ref = {"apiVersion": NOVAS.api_version, "kind": "Nova", "name": meta["name"], "uid": meta["uid"]}
    return {**body, "metadata": {**body["metadata"], "ownerReferences": [{**ref, "controller": True}]}}
