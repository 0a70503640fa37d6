"""The Database step's provisioning (reconciler.md §5.1) on the real API server: every MariaDB object
in one pass, one wait.

The step runs in a ``make_ctx`` pass over a Nova stored by kube-apiserver; the Databases, Users and
Grants it writes are stored there (the mariadb-operator CRDs), the test plays that operator by
writing their Ready status through the status subresource, and the caches hold what the server
then holds (the watch). Requests are recorded by a wrapper around the real client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from nova_operator import conditions, ownership
from nova_operator.kube import Kube
from nova_operator.kube.resources import DATABASES, GRANTS, JOBS, MARIADBS, NOVAS, USERS, ResourceRef
from nova_operator.kube.types import Object
from nova_operator.metrics import WRITE_VERBS
from nova_operator.reconcilers.nova import database
from nova_operator.reconcilers.nova.context import PassContext
from nova_operator.runtime.cache import Cache
from tests.integration.nova.passes import make_ctx, stored_nova
from tests.integration.nova.requests import Recorder

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


def ready_status(is_ready: bool = True) -> Object:
    cond = {
        "type": "Ready",
        "status": "True" if is_ready else "False",
        "reason": "Created",
        "message": "created" if is_ready else "not yet",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    return {"status": {"conditions": [cond]}}


async def mariadb(admin: Kube, ns: str, name: str, is_ready: bool = True) -> Object:
    body = {"apiVersion": MARIADBS.api_version, "kind": "MariaDB", "metadata": {"name": name}, "spec": {}}
    await admin.create(MARIADBS, body, ns)
    return await admin.patch_status(MARIADBS, name, ready_status(is_ready), ns)


async def managed_nova(
    admin: Kube, ns: str, api_cluster: str = "mariadb", cell_cluster: str = "mariadb"
) -> Object:
    return await stored_nova(
        admin,
        ns,
        apiDatabase={
            "clusterRef": {"name": api_cluster},
            "database": "nova_api",
            "secretRef": {"name": "api-db"},
        },
        database={"clusterRef": {"name": cell_cluster}, "database": "nova", "secretRef": {"name": "cell-db"}},
    )


def new_caches(*servers: Object) -> dict[ResourceRef, Cache]:
    caches = {ref: Cache(str(ref)) for ref in (MARIADBS, *CHILDREN, JOBS)}
    for server in servers:
        caches[MARIADBS].upsert(server)
    return caches


def ctx_of(kube: Kube, nova: Object, caches: Mapping[ResourceRef, Cache]) -> PassContext:
    return make_ctx(kube, nova, caches=caches)


def applied(kube: Recorder) -> list[tuple[str, str]]:
    return [(r.split(".")[0], n) for v, r, n, _ in kube.calls if v == "apply"]


def written(kube: Recorder) -> list[tuple[str, str, str]]:
    return [(v, r, n) for v, r, n, _ in kube.calls if v in WRITE_VERBS]


async def watch_back(
    admin: Kube, ns: str, caches: Mapping[ResourceRef, Cache], *, ready_kinds: tuple[str, ...]
) -> None:
    """The MariaDB operator turns the given kinds Ready; the informers then hold what the server holds."""
    for ref in CHILDREN:
        for obj in (await admin.list(ref, ns))["items"]:
            name = obj["metadata"]["name"]
            caches[ref].upsert(
                await admin.patch_status(ref, name, ready_status(ref.plural in ready_kinds), ns)
            )


def reason_and_message(ctx: PassContext) -> tuple[str, str]:
    c = ctx.condition(conditions.DATABASE_READY)
    assert c is not None
    assert c["status"] == "False"
    return str(c["reason"]), str(c["message"])


async def _no_upgrade(ctx: PassContext, installed: str, target: str) -> Any:
    raise AssertionError("no upgrade in these tests")


async def test_one_pass_applies_every_mariadb_object_in_creation_order_and_waits_once(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await managed_nova(admin, namespace)
    ctx = ctx_of(ours, nova, new_caches(await mariadb(admin, namespace, "mariadb")))
    result = await database.reconcile_database(ctx, upgrade_flow=_no_upgrade)
    assert applied(ours) == ORDER
    assert result.requeue_after == 30.0
    assert reason_and_message(ctx) == (
        "WaitingForDatabase",
        "Database CR not ready: Database nova-api, Database nova, Database nova-nova-cell0",
    )
    stored = [o for ref in CHILDREN for o in (await admin.list(ref, namespace))["items"]]
    assert sorted((o["kind"].lower() + "s", o["metadata"]["name"]) for o in stored) == sorted(ORDER)
    assert {o["metadata"]["ownerReferences"][0]["uid"] for o in stored} == {nova["metadata"]["uid"]}


async def test_each_layer_is_sent_at_once_and_only_after_the_layer_before_it_was_answered(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    in_flight: list[tuple[str, str]] = []
    batches: list[list[tuple[str, str]]] = []  # who was in flight together
    answered: list[tuple[str, str]] = []
    plain = ours.apply

    async def timed_apply(ref: Any, body: Any, **kw: Any) -> Any:
        me = (str(ref).split(".")[0], body["metadata"]["name"])
        in_flight.append(me)
        batches.append(list(in_flight))
        try:
            return await plain(ref, body, **kw)
        finally:
            in_flight.remove(me)
            answered.append(me)

    ours.apply = timed_apply  # type: ignore[method-assign]
    nova = await managed_nova(admin, namespace)
    ctx = ctx_of(ours, nova, new_caches(await mariadb(admin, namespace, "mariadb")))
    await database.reconcile_database(ctx, upgrade_flow=_no_upgrade)
    widest = {
        kind: max(sum(1 for k, _ in b if k == kind) for b in batches)
        for kind in ("databases", "users", "grants")
    }
    assert widest == {"databases": 3, "users": 2, "grants": 3}
    for batch in batches:  # never two kinds in flight at once: a layer waits for the one before
        assert len({kind for kind, _ in batch}) == 1
    assert [k for k, _ in answered] == ["databases"] * 3 + ["users"] * 2 + ["grants"] * 3


async def test_a_new_novas_objects_are_created_first_with_no_read(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    """The children's caches are label-filtered, so an object they lack may be someone else's; a new
    Nova's eight objects are nonetheless absent, and each is created in one request (``apply.create``)
    rather than read first: eight requests, in layer order, each answered 201 Created."""
    nova = await managed_nova(admin, namespace)
    ctx = ctx_of(ours, nova, new_caches(await mariadb(admin, namespace, "mariadb")))
    await database.reconcile_database(ctx, upgrade_flow=_no_upgrade)
    sent = [(v, c) for v, r, _, c in ours.calls if r.split(".")[0] in ("databases", "users", "grants")]
    assert sent == [("apply", "201")] * 8
    assert applied(ours) == ORDER


async def test_an_object_already_under_a_new_novas_name_is_read_once_and_judged(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    """Another Nova's cell0 Database under this one's name: the create is refused, the object is read,
    and it is neither changed nor adopted."""
    other = await stored_nova(admin, namespace, "x")
    owner = {"apiVersion": NOVAS.api_version, "kind": "Nova", "name": "x", "uid": other["metadata"]["uid"]}
    theirs = {
        "apiVersion": DATABASES.api_version,
        "kind": "Database",
        "metadata": {"name": ORDER[1][1], "ownerReferences": [{**owner, "controller": True}]},
        "spec": {"name": "theirs", "mariaDbRef": {"name": "mariadb"}},
    }
    kept = await admin.create(DATABASES, theirs, namespace)
    nova = await managed_nova(admin, namespace)
    ctx = ctx_of(ours, nova, new_caches(await mariadb(admin, namespace, "mariadb")))
    with pytest.raises(ownership.ChildOwnedByAnother):
        await database.reconcile_database(ctx, upgrade_flow=_no_upgrade)
    after = await admin.get(DATABASES, ORDER[1][1], namespace)
    assert after["metadata"]["resourceVersion"] == kept["metadata"]["resourceVersion"]
    reads = [n for v, r, n, _ in ours.calls if v == "get" and r.startswith("databases")]
    assert reads == [ORDER[1][1]]
    refused = [n for v, r, n, c in ours.calls if v == "apply" and c == "409"]
    assert refused == [ORDER[1][1]]


async def test_with_the_databases_ready_the_wait_names_the_users_and_grants_and_nothing_is_rewritten(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await managed_nova(admin, namespace)
    caches = new_caches(await mariadb(admin, namespace, "mariadb"))
    await database.reconcile_database(ctx_of(ours, nova, caches), upgrade_flow=_no_upgrade)
    await watch_back(admin, namespace, caches, ready_kinds=("databases",))
    ours.calls.clear()
    ctx = ctx_of(ours, nova, caches)
    result = await database.reconcile_database(ctx, upgrade_flow=_no_upgrade)
    assert written(ours) == []
    assert result.requeue_after == 30.0
    assert reason_and_message(ctx) == (
        "WaitingForDatabase",
        "User or Grant not ready: User nova-api, Grant nova-api, User nova, Grant nova, "
        "Grant nova-nova-cell0",
    )


async def test_everything_ready_goes_on_to_the_next_gate(admin: Kube, ours: Recorder, namespace: str) -> None:
    nova = await managed_nova(admin, namespace)
    caches = new_caches(await mariadb(admin, namespace, "mariadb"))
    await database.reconcile_database(ctx_of(ours, nova, caches), upgrade_flow=_no_upgrade)
    await watch_back(admin, namespace, caches, ready_kinds=("databases", "users", "grants"))
    ours.calls.clear()
    ctx = ctx_of(ours, nova, caches)
    await database.reconcile_database(ctx, upgrade_flow=_no_upgrade)  # no config ConfigMap in this pass
    assert written(ours) == []
    assert reason_and_message(ctx)[0] == "WaitingForConfig"


async def test_a_cluster_not_ready_stops_before_its_block_and_keeps_the_earlier_block(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    servers = (await mariadb(admin, namespace, "api-db"), await mariadb(admin, namespace, "cell-db", False))
    nova = await managed_nova(admin, namespace, api_cluster="api-db", cell_cluster="cell-db")
    ctx = ctx_of(ours, nova, new_caches(*servers))
    result = await database.reconcile_database(ctx, upgrade_flow=_no_upgrade)
    assert applied(ours) == API_BLOCK
    assert result.requeue_after == 30.0
    assert reason_and_message(ctx) == ("ClusterNotReady", f"MariaDB {namespace}/cell-db is not Ready")


async def test_a_missing_first_cluster_applies_nothing(admin: Kube, ours: Recorder, namespace: str) -> None:
    ctx = ctx_of(ours, await managed_nova(admin, namespace), new_caches())
    result = await database.reconcile_database(ctx, upgrade_flow=_no_upgrade)
    assert written(ours) == []
    assert result.requeue_after == 30.0
    assert reason_and_message(ctx) == ("ClusterNotReady", f"MariaDB {namespace}/mariadb is not Ready")
