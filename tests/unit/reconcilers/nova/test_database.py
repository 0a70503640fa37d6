"""The Database step's provisioning (reconciler.md §5.1): every MariaDB object in one pass, one wait."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from nova_operator import conditions
from nova_operator.kube.resources import DATABASES, GRANTS, JOBS, MARIADBS, USERS, ResourceRef
from nova_operator.models.nova import Nova
from nova_operator.reconcilers.metrics import NovaMetrics
from nova_operator.reconcilers.nova import database
from nova_operator.reconcilers.nova.context import PassContext
from nova_operator.runtime.cache import Cache
from tests.unit.reconcilers.nova.passes import NS, managed_nova

CHILDREN = (DATABASES, USERS, GRANTS)
# The spec's creation order (§5.1) in layers: every schema, then the Users, then the Grants
# (each layer in block order: the API block, then the cell block with cell0).
ORDER = [
    ("databases", "nova-api"),
    ("databases", "nova"),
    ("databases", "nova-nova-cell0"),
    ("users", "nova-api"),
    ("users", "nova"),
    ("grants", "nova-api"),
    ("grants", "nova"),
    ("grants", "nova-nova-cell0"),
]
API_BLOCK = [("databases", "nova-api"), ("users", "nova-api"), ("grants", "nova-api")]


def ready(obj: dict[str, Any], status: bool = True) -> dict[str, Any]:
    cond = {"type": "Ready", "status": "True" if status else "False", "reason": "Created"}
    return {**obj, "status": {"conditions": [cond]}}


def mariadb(name: str, is_ready: bool = True) -> dict[str, Any]:
    obj = {"apiVersion": MARIADBS.api_version, "kind": "MariaDB", "metadata": {"name": name, "namespace": NS}}
    return ready(obj, is_ready)


def make_ctx(kube: Any, events: Any, caches: dict[ResourceRef, Cache], **kw: str) -> PassContext:
    raw = managed_nova(**kw)
    return PassContext(
        kube=kube,
        obj=raw,
        nova=Nova.model_validate(raw),
        status={},
        now=lambda: datetime(2026, 1, 1, tzinfo=UTC),
        events=events,
        caches=caches,
        metrics=NovaMetrics.of(kube.metrics),
    )


def new_caches(*servers: dict[str, Any]) -> dict[ResourceRef, Cache]:
    caches = {ref: Cache(str(ref)) for ref in (MARIADBS, *CHILDREN, JOBS)}
    for server in servers:
        caches[MARIADBS].upsert(server)
    return caches


def applied(kube: Any) -> list[tuple[str, str]]:
    return [(ref.split(".")[0], name) for verb, ref, name in kube.calls if verb == "apply"]


def watch_back(kube: Any, caches: dict[ResourceRef, Cache], *, ready_kinds: tuple[str, ...]) -> None:
    """What the informers would hold after the writes, with the given kinds turned Ready."""
    for ref in CHILDREN:
        for (r, _ns, _name), obj in kube.store.items():
            if r == str(ref):
                caches[ref].upsert(ready(obj, ref.plural in ready_kinds))


def reason_and_message(ctx: PassContext) -> tuple[str, str]:
    c = ctx.condition(conditions.DATABASE_READY)
    assert c is not None
    assert c["status"] == "False"
    return str(c["reason"]), str(c["message"])


async def test_one_pass_applies_every_mariadb_object_in_creation_order_and_waits_once(
    kube: Any, events: Any
) -> None:
    caches = new_caches(mariadb("mariadb"))
    ctx = make_ctx(kube, events, caches)
    result = await database.reconcile_database(ctx, upgrade_flow=_no_upgrade)
    assert applied(kube) == ORDER
    assert result.requeue_after == 30.0
    assert reason_and_message(ctx) == (
        "WaitingForDatabase",
        "Database CR not ready: Database nova-api, Database nova, Database nova-nova-cell0",
    )
    owners = {o["metadata"]["ownerReferences"][0]["uid"] for o in kube.store.values()}
    assert owners == {"nova-uid"}


async def test_each_layer_is_sent_at_once_and_only_after_the_layer_before_it_was_answered(
    kube: Any, events: Any
) -> None:
    in_flight: list[tuple[str, str]] = []
    batches: list[list[tuple[str, str]]] = []  # who was in flight together
    answered: list[tuple[str, str]] = []
    plain = kube.apply

    async def slow_apply(ref: Any, body: Any, **kw: Any) -> Any:
        me = (str(ref).split(".")[0], body["metadata"]["name"])
        in_flight.append(me)
        batches.append(list(in_flight))
        await asyncio.sleep(0.01)
        in_flight.remove(me)
        answered.append(me)
        return await plain(ref, body, **kw)

    kube.apply = slow_apply
    await database.reconcile_database(
        make_ctx(kube, events, new_caches(mariadb("mariadb"))), upgrade_flow=_no_upgrade
    )
    widest = {
        kind: max(sum(1 for k, _ in b if k == kind) for b in batches)
        for kind in ("databases", "users", "grants")
    }
    assert widest == {"databases": 3, "users": 2, "grants": 3}
    for batch in batches:  # never two kinds in flight at once: a layer waits for the one before
        assert len({kind for kind, _ in batch}) == 1
    assert [k for k, _ in answered] == ["databases"] * 3 + ["users"] * 2 + ["grants"] * 3


async def test_a_new_novas_objects_are_created_first_with_no_read(kube: Any, events: Any) -> None:
    """The children's caches are label-filtered, so an object they lack may be someone else's; a new
    Nova's eight objects are nonetheless absent, and each is created in one request (``apply.create``)
    rather than read first: eight requests, in layer order."""
    await database.reconcile_database(
        make_ctx(kube, events, new_caches(mariadb("mariadb"))), upgrade_flow=_no_upgrade
    )
    verbs = [verb for verb, ref, _ in kube.calls if ref.split(".")[0] in ("databases", "users", "grants")]
    assert verbs == ["apply"] * 8
    assert applied(kube) == ORDER


async def test_an_object_already_under_a_new_novas_name_is_read_once_and_judged(
    kube: Any, events: Any
) -> None:
    """Another Nova's cell0 Database under this one's name: the create is refused, the object is read,
    and it is neither changed nor adopted; the other seven are created."""
    from nova_operator import ownership

    theirs = {
        "apiVersion": DATABASES.api_version,
        "kind": "Database",
        "metadata": {
            "name": ORDER[1][1],
            "namespace": NS,
            "ownerReferences": [{"kind": "Nova", "name": "x", "uid": "x-uid", "controller": True}],
        },
        "spec": {"name": "theirs"},
    }
    kube.put(DATABASES, theirs)
    kept = dict(kube.store[(str(DATABASES), NS, ORDER[1][1])])
    with pytest.raises(ownership.ChildOwnedByAnother):
        await database.reconcile_database(
            make_ctx(kube, events, new_caches(mariadb("mariadb"))), upgrade_flow=_no_upgrade
        )
    assert kube.store[(str(DATABASES), NS, ORDER[1][1])] == kept
    reads = [name for verb, ref, name in kube.calls if verb == "get" and ref.startswith("databases")]
    assert reads == [ORDER[1][1]]


async def test_with_the_databases_ready_the_wait_names_the_users_and_grants_and_nothing_is_rewritten(
    kube: Any, events: Any
) -> None:
    caches = new_caches(mariadb("mariadb"))
    await database.reconcile_database(make_ctx(kube, events, caches), upgrade_flow=_no_upgrade)
    watch_back(kube, caches, ready_kinds=("databases",))
    kube.calls.clear()
    ctx = make_ctx(kube, events, caches)
    result = await database.reconcile_database(ctx, upgrade_flow=_no_upgrade)
    assert kube.writes() == []
    assert result.requeue_after == 30.0
    assert reason_and_message(ctx) == (
        "WaitingForDatabase",
        "User or Grant not ready: User nova-api, Grant nova-api, User nova, Grant nova, "
        "Grant nova-nova-cell0",
    )


async def test_everything_ready_goes_on_to_the_next_gate(kube: Any, events: Any) -> None:
    caches = new_caches(mariadb("mariadb"))
    await database.reconcile_database(make_ctx(kube, events, caches), upgrade_flow=_no_upgrade)
    watch_back(kube, caches, ready_kinds=("databases", "users", "grants"))
    kube.calls.clear()
    ctx = make_ctx(kube, events, caches)
    await database.reconcile_database(ctx, upgrade_flow=_no_upgrade)  # no config ConfigMap in this pass
    assert kube.writes() == []
    assert reason_and_message(ctx)[0] == "WaitingForConfig"


async def test_a_cluster_not_ready_stops_before_its_block_and_keeps_the_earlier_block(
    kube: Any, events: Any
) -> None:
    caches = new_caches(mariadb("api-db"), mariadb("cell-db", is_ready=False))
    ctx = make_ctx(kube, events, caches, api_cluster="api-db", cell_cluster="cell-db")
    result = await database.reconcile_database(ctx, upgrade_flow=_no_upgrade)
    assert applied(kube) == API_BLOCK
    assert result.requeue_after == 30.0
    assert reason_and_message(ctx) == ("ClusterNotReady", "MariaDB ns/cell-db is not Ready")


async def test_a_missing_first_cluster_applies_nothing(kube: Any, events: Any) -> None:
    ctx = make_ctx(kube, events, new_caches())
    result = await database.reconcile_database(ctx, upgrade_flow=_no_upgrade)
    assert kube.writes() == []
    assert result.requeue_after == 30.0
    assert reason_and_message(ctx) == ("ClusterNotReady", "MariaDB ns/mariadb is not Ready")


async def _no_upgrade(ctx: PassContext, installed: str, target: str) -> Any:
    raise AssertionError("no upgrade in these tests")
