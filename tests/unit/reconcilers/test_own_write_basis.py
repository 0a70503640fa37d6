"""Issue 26 item 12: a pass records a write as its own only when the write's basis is known.

The server here behaves as the API server does for server-side apply: a ``metadata.resourceVersion``
in the body is a precondition (409 when it is not the object's), an apply that changes nothing
answers with the object as it is (its version unchanged), and every writer leaves a
``managedFields`` entry.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from nova_operator import apply
from nova_operator.kube.errors import Conflict, NotFound
from nova_operator.kube.resources import SECRETS, ResourceRef
from nova_operator.metrics import Metrics
from nova_operator.models.nova import Nova
from nova_operator.reconcilers.metrics import NovaMetrics
from nova_operator.reconcilers.nova.context import PassContext
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.echoes import OwnWrites
from nova_operator.runtime.handlers import enqueue_for_owner
from nova_operator.runtime.request import Request
from tests.unit.reconcilers.fakes import _merge

NS = "ns"
NOVA = Request(NS, "nova")
RAW_NOVA: dict[str, Any] = {
    "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
    "kind": "Nova",
    "metadata": {"name": "nova", "namespace": NS, "uid": "nova-uid", "generation": 1, "resourceVersion": "1"},
    "spec": {
        "openStackRelease": "2025.2",
        "image": {"repository": "ghcr.io/c5c3/nova", "tag": "2025.2"},
        "apiDatabase": {"host": "db", "database": "nova_api", "secretRef": {"name": "api-db"}},
        "database": {"host": "db", "database": "nova", "secretRef": {"name": "cell-db"}},
        "cache": {"servers": ["memcached:11211"]},
        "messaging": {"secretRef": {"name": "bus"}},
        "keystoneEndpoint": "http://keystone:5000/v3",
        "serviceUser": {"secretRef": {"name": "service-user"}},
        "metadata": {"sharedSecretRef": {"name": "metadata-proxy"}},
    },
}


def derived(**data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "nova-derived", "namespace": NS},
        "type": "Opaque",
        "data": dict(data),
    }


class Server:
    """One object's API: server-side apply and merge patch with the API server's precondition rules."""

    def __init__(self) -> None:
        self.obj: dict[str, Any] | None = None
        self.rv = 4
        self.metrics = Metrics()
        self.requests: list[str] = []

    def _write(self, new: dict[str, Any], manager: str) -> dict[str, Any]:
        if self.obj is not None and _content(new) == _content(self.obj):
            return copy.deepcopy(self.obj)  # nothing to do: the object as it is, version unchanged
        self.rv += 1
        meta = new["metadata"]
        meta["resourceVersion"] = str(self.rv)
        meta.setdefault("uid", "secret-uid")
        fields = meta.setdefault("managedFields", [])
        if manager not in [f["manager"] for f in fields]:
            fields.append({"manager": manager})
        self.obj = new
        return copy.deepcopy(new)

    def _check(self, body: Mapping[str, Any]) -> None:
        want = (body.get("metadata") or {}).get("resourceVersion")
        # an absent object is created from an apply, its precondition dropped (no version to check)
        if want is not None and self.obj is not None and want != self.obj["metadata"]["resourceVersion"]:
            raise Conflict("the object has been modified; please apply your changes to the latest version")

    async def get(self, ref: ResourceRef, name: str, namespace: str | None = None) -> dict[str, Any]:
        """The ownership check's read of a child the label-filtered cache does not hold."""
        self.requests.append("get")
        if self.obj is None:
            raise NotFound(f"{name} not found")
        return copy.deepcopy(self.obj)

    async def apply(self, ref: ResourceRef, body: Mapping[str, Any], **kw: Any) -> dict[str, Any]:
        self.requests.append("apply")
        self._check(body)
        new = copy.deepcopy(self.obj) if self.obj is not None else {}
        sent = copy.deepcopy(dict(body))
        sent["metadata"].pop("resourceVersion", None)
        _merge(new, sent)
        return self._write(new, kw["field_manager"])

    async def patch(
        self, ref: ResourceRef, name: str, patch: Mapping[str, Any], namespace: str | None = None, **kw: Any
    ) -> dict[str, Any]:
        self.requests.append("patch")
        self._check(patch)
        if self.obj is None:
            raise NotFound("not found")
        new, sent = copy.deepcopy(self.obj), copy.deepcopy(dict(patch))
        sent.get("metadata", {}).pop("resourceVersion", None)
        _merge(new, sent)
        return self._write(new, kw.get("field_manager") or "patcher")

    def user_edit(self, **data: str) -> None:
        """Another writer (``kubectl edit``) adds keys."""
        assert self.obj is not None
        new = copy.deepcopy(self.obj)
        new["data"].update(data)
        self._write(new, "kubectl-edit")


def _content(obj: Mapping[str, Any]) -> Any:
    meta = {k: v for k, v in obj["metadata"].items() if k not in ("resourceVersion", "managedFields")}
    return {**obj, "metadata": meta}


def lagging_cache(obj: dict[str, Any] | None) -> Cache:
    cache = Cache(str(SECRETS))
    if obj is not None:
        cache.upsert(copy.deepcopy(obj))
    return cache


def make_ctx(server: Server, cache: Cache, writes: OwnWrites) -> PassContext:
    raw = copy.deepcopy(RAW_NOVA)
    ctx = PassContext(
        kube=server,  # type: ignore[arg-type]
        obj=raw,
        nova=Nova.model_validate(raw),
        status={},
        now=lambda: datetime(2026, 1, 1, tzinfo=UTC),
        events=None,  # type: ignore[arg-type]
        caches={SECRETS: cache},
        metrics=NovaMetrics.of(server.metrics),
        writes=writes,
    )
    ctx.state.digest_key = b"digest-key-of-the-nova"  # the Secrets step reads it before any ensure
    return ctx


def woken(writes: OwnWrites, old: dict[str, Any] | None, new: dict[str, Any]) -> list[Request]:
    """The keys the Secrets watch wakes for the event ``old`` -> ``new`` (a relist's difference)."""
    keys: list[Request] = []
    handler = enqueue_for_owner(keys.append, group="nova.openstack.c5c3.io", kind="Nova", echoes=writes)
    if old is None:
        handler.on_add(copy.deepcopy(new))
    else:
        handler.on_update(copy.deepcopy(old), copy.deepcopy(new))
    return keys


async def converge(server: Server, writes: OwnWrites, **data: str) -> dict[str, Any]:
    """A first pass writes the derived Secret; returns it as the cache then shows it."""
    await make_ctx(server, lagging_cache(None), writes).ensure(derived(**data))
    assert server.obj is not None
    return copy.deepcopy(server.obj)


async def test_a_no_op_apply_answered_with_another_writers_version_wakes_the_nova() -> None:
    # The issue's case: the cache lags (the Secrets watch is down), a pass re-sends an apply the
    # server finds nothing to do for, and the server answers with the user's version.
    server, writes = Server(), OwnWrites()
    v5 = await converge(server, writes, password="b2xk")  # cached, then the watch goes down
    await make_ctx(server, lagging_cache(v5), writes).ensure(derived(password="bmV3"))  # our write: v6
    server.user_edit(extra="dXNlcg==")  # v7: a user adds a key during the outage
    await make_ctx(server, lagging_cache(v5), writes).ensure(derived(password="bmV3"))  # cache still v5
    assert server.obj is not None
    assert server.obj["data"]["extra"] == "dXNlcg=="  # the pass could not see it: it must be woken
    assert woken(writes, v5, server.obj) == [NOVA]  # the relist's update wakes the Nova


async def test_a_write_on_the_cached_basis_is_still_the_passs_own() -> None:
    server, writes = Server(), OwnWrites()
    v5 = await converge(server, writes, password="b2xk")
    assert woken(writes, None, v5) == []  # the create's echo
    await make_ctx(server, lagging_cache(v5), writes).ensure(derived(password="bmV3"))
    assert server.obj is not None
    assert woken(writes, v5, server.obj) == []  # its echo wakes nobody
    # one request per write, no refusal on a fresh cache, and no read: the child the cache did not
    # hold yet (its first write) is created first (``apply.create``)
    assert server.requests == ["apply", "apply"]


async def test_a_child_the_cache_lacks_is_read_first_so_the_write_has_a_known_basis() -> None:
    # An earlier life of the object, edited by a user, that the cache does not hold: the create-first
    # write is refused (the object exists), so the ownership check reads it before the write, which
    # goes out on the server's own version and is the pass's (the pass saw the user's key); without
    # that read the write's answer would hold a change no pass saw, and apply's managedFields rule
    # would make it wake the Nova.
    server, writes = Server(), OwnWrites()
    await converge(server, OwnWrites(), password="bmV3")
    server.user_edit(extra="dXNlcg==")
    seen = copy.deepcopy(server.obj)
    server.requests.clear()
    await make_ctx(server, lagging_cache(None), writes).ensure(derived(password="bmV3"))  # cache: absent
    assert server.obj is not None
    assert server.requests[:2] == ["apply", "get"]  # refused (nothing written), then read
    assert "extra" not in server.obj["data"]  # the key the pass saw is dropped
    assert woken(writes, seen, server.obj) == []


async def test_dropping_foreign_keys_from_a_lagging_cache_is_not_the_passs_own() -> None:
    server, writes = Server(), OwnWrites()
    await converge(server, writes, password="bmV3")
    server.user_edit(extra="dXNlcg==")
    assert server.obj is not None
    seen = copy.deepcopy(server.obj)  # the cache saw the first extra key ...
    server.user_edit(more="bW9yZQ==")  # ... not the second
    await make_ctx(server, lagging_cache(seen), writes).ensure(derived(password="bmV3"))
    assert server.obj["data"]["more"] == "bW9yZQ=="  # only the keys the pass saw are dropped
    assert woken(writes, seen, server.obj) == [NOVA]  # so the next pass must see the rest
    # on a fresh cache the drop is the pass's own
    fresh = copy.deepcopy(server.obj)
    await make_ctx(server, lagging_cache(fresh), writes).ensure(derived(password="bmV3"))
    assert set(server.obj["data"]) == {"password"}
    assert woken(writes, fresh, server.obj) == []
    assert apply.APPLIED_DIGEST in server.obj["metadata"]["annotations"]
