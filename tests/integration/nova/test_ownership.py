"""Issue 26 item 4 on the real API server: a child of another owner is neither written nor deleted.

``PassContext.ensure``, the digest key's Secret and the finalizer's MariaDB clean-up act on objects
kube-apiserver stores: the create-first write is refused by the server's own precondition when a
name is taken, the finalizer's deletes carry uid preconditions the server checks, and every request
is recorded by a wrapper around the real client (``Recorder``). The pure judgement
(``ownership.holder``, the refusal's words, ``Taken``) stays in ``tests/unit/reconcilers/test_ownership.py``.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from nova_operator import naming, ownership
from nova_operator.kube import Kube
from nova_operator.kube.errors import NotFound
from nova_operator.kube.resources import DATABASES, GRANTS, NOVAS, SECRETS, SERVICES, USERS
from nova_operator.kube.types import Object
from nova_operator.reconcilers.nova import secrets
from nova_operator.reconcilers.nova.context import NovaOptions, PassContext
from nova_operator.reconcilers.nova.reconciler import FINALIZER, NovaReconciler
from nova_operator.runtime.cache import Cache
from tests.integration.nova.passes import Emitted, make_ctx, put, stored_nova
from tests.integration.nova.requests import Recorder

MARKS = naming.common_labels("nova")
KEY = "nova-digest-key"


def a_service(
    name: str, *, owner_uid: str | None = None, labels: dict[str, str] | None = None, port: int = 80
) -> Object:
    meta: dict[str, Any] = {"name": name, "labels": labels or {}}
    if owner_uid is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": NOVAS.api_version,
                "kind": "Nova",
                "name": "other",
                "uid": owner_uid,
                "controller": True,
            }
        ]
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {"ports": [{"port": port}]}}


def desired_service(name: str, ns: str) -> Object:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": ns, "labels": dict(MARKS)},
        "spec": {"ports": [{"port": 8774}]},
    }


def with_services(
    kube: Kube, nova: Object, *cached: Object, options: NovaOptions | None = None
) -> PassContext:
    services = Cache(str(SERVICES))
    for obj in cached:
        services.upsert(obj)
    return make_ctx(kube, nova, options=options, caches={SERVICES: services})


def version(obj: Object) -> str:
    """The object's resourceVersion: equal means not written since."""
    return str(obj["metadata"]["resourceVersion"])


def stranger_key() -> Object:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": KEY}, "data": {"key": "a25vd24ta2V5"}}


async def test_ensure_writes_nothing_over_an_object_the_cache_does_not_hold(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    """The children's caches hold only managed-by objects: a user's Service refuses the create-first
    write, is then found by GET, and is not taken."""
    nova = await stored_nova(admin, namespace)
    theirs = await put(admin, SERVICES, a_service("nova"), namespace)
    with pytest.raises(ownership.ChildOwnedByAnother):
        await with_services(ours, nova).ensure(desired_service("nova", namespace), ref=SERVICES)
    assert ours.called() == [("apply", "services", "409"), ("get", "services", "200")]
    assert version(await admin.get(SERVICES, "nova", namespace)) == version(theirs)


async def test_ensure_writes_nothing_over_another_novas_cached_child(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await stored_nova(admin, namespace)
    theirs = await put(admin, SERVICES, a_service("nova", owner_uid="x-uid", labels=MARKS), namespace)
    with pytest.raises(ownership.ChildOwnedByAnother):
        await with_services(ours, nova, theirs).ensure(desired_service("nova", namespace), ref=SERVICES)
    assert ours.calls == []  # judged from the cache: no read, no write
    assert version(await admin.get(SERVICES, "nova", namespace)) == version(theirs)


async def test_ensure_adopts_its_own_orphan_and_creates_what_is_absent(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await stored_nova(admin, namespace)
    # an orphan of this Nova's (its labels, no owner yet), as an earlier write of the operator left it
    await put(admin, SERVICES, a_service("nova", labels=MARKS, port=8774), namespace)
    ctx = with_services(ours, nova)
    live = await ctx.ensure(desired_service("nova", namespace), ref=SERVICES)
    assert [r["uid"] for r in live["metadata"]["ownerReferences"]] == [nova["metadata"]["uid"]]
    created = await ctx.ensure(desired_service("nova-metadata", namespace), ref=SERVICES)
    assert created["metadata"]["ownerReferences"][0]["uid"] == nova["metadata"]["uid"]
    # the orphan: created first, refused, read, adopted; the absent one: created, with no read
    assert ours.called("nova") == [
        ("apply", "services", "409"),
        ("get", "services", "200"),
        ("apply", "services", "200"),
    ]
    assert ours.called("nova-metadata") == [("apply", "services", "201")]
    stored = await admin.get(SERVICES, "nova", namespace)
    assert [r["uid"] for r in stored["metadata"]["ownerReferences"]] == [nova["metadata"]["uid"]]


async def test_a_converged_child_costs_no_request(admin: Kube, ours: Recorder, namespace: str) -> None:
    nova = await stored_nova(admin, namespace)
    live = await with_services(ours, nova).ensure(desired_service("nova", namespace), ref=SERVICES)
    ours.calls.clear()
    await with_services(ours, nova, live).ensure(desired_service("nova", namespace), ref=SERVICES)
    assert ours.calls == []


async def test_the_digest_key_of_a_stranger_is_never_used(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await stored_nova(admin, namespace)
    stranger = await put(admin, SECRETS, stranger_key(), namespace)
    ctx = make_ctx(ours, nova, stranger)
    with pytest.raises(ownership.ChildOwnedByAnother):
        await secrets.digest_key(ctx)
    assert ours.calls == []  # judged from the cache
    assert version(await admin.get(SECRETS, KEY, namespace)) == version(stranger)


async def test_the_finalizer_deletes_only_the_mariadb_objects_it_holds(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    """Nova x-a (database nova) is deleted: Nova x's cell0 Database and Grant x-a-nova-cell0 stay."""
    managed = {
        "apiDatabase": {
            "clusterRef": {"name": "db"},
            "database": "nova_api",
            "secretRef": {"name": "api-db"},
        },
        "database": {"clusterRef": {"name": "db"}, "database": "nova", "secretRef": {"name": "cell-db"}},
    }
    x_a = await stored_nova(admin, namespace, "x-a", finalizers=[FINALIZER], **managed)
    mine = {x_a["metadata"]["uid"]: naming.common_labels("x-a")}
    for ref, name, uid in (
        (DATABASES, "x-a", x_a["metadata"]["uid"]),
        (USERS, "x-a", x_a["metadata"]["uid"]),
        (DATABASES, "x-a-nova-cell0", "x-uid"),
        (GRANTS, "x-a-nova-cell0", "x-uid"),
    ):
        labels = mine.get(uid, naming.common_labels("x"))
        obj = a_service(name, owner_uid=uid, labels=labels)
        spec: dict[str, Any] = {"mariaDbRef": {"name": "db"}}
        if ref is GRANTS:
            spec.update(privileges=["ALL PRIVILEGES"], username="x")
        await put(
            admin, ref, {**obj, "kind": ref.kind, "apiVersion": ref.api_version, "spec": spec}, namespace
        )
    await admin.delete(NOVAS, "x-a", namespace)  # held by the finalizer: terminating
    reconciler = NovaReconciler(ours, {}, events=Emitted())
    await reconciler.finalize(await admin.get(NOVAS, "x-a", namespace))
    deleted = [(r, n, c) for v, r, n, c in ours.calls if v == "delete"]
    assert deleted == [(str(DATABASES), "x-a", "200"), (str(USERS), "x-a", "200")]
    for ref in (DATABASES, GRANTS):
        await admin.get(ref, "x-a-nova-cell0", namespace)  # still there
    # the pass after: nothing of its own left, the finalizer goes, and with it the Nova
    ours.calls.clear()
    await reconciler.finalize(await admin.get(NOVAS, "x-a", namespace))
    assert [c for c in ours.calls if c[0] == "delete"] == []
    with pytest.raises(NotFound):
        await admin.get(NOVAS, "x-a", namespace)
    for ref in (DATABASES, GRANTS):
        await admin.get(ref, "x-a-nova-cell0", namespace)


async def test_a_new_digest_key_is_read_once_before_it_is_written(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    """The Secrets cache has not listed the namespace yet: one GET says the key is absent, and the
    write goes out on that read (no second GET of the same name in the pass)."""
    nova = await stored_nova(admin, namespace)
    ctx = make_ctx(ours, nova)
    ctx.caches[SECRETS].cover(set())  # a scoped cache that does not cover the namespace yet
    key = await secrets.digest_key(ctx)
    assert ours.called() == [("get", "secrets", "404"), ("apply", "secrets", "201")]
    stored = await admin.get(SECRETS, KEY, namespace)
    assert base64.b64decode(stored["data"]["key"]) == key
    assert len(key) == 64


async def test_a_new_digest_key_is_created_first_with_no_read(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    """The covering cache does not hold the key: it is created in one request, and that key is used."""
    nova = await stored_nova(admin, namespace)
    key = await secrets.digest_key(make_ctx(ours, nova))
    assert ours.called() == [("apply", "secrets", "201")]
    stored = await admin.get(SECRETS, KEY, namespace)
    assert base64.b64decode(stored["data"]["key"]) == key
    assert stored["metadata"]["ownerReferences"][0]["uid"] == nova["metadata"]["uid"]


async def test_a_digest_key_the_cache_has_not_seen_yet_is_kept_not_replaced(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    """The key's Secret exists (a pass wrote it, the cache lags): the create is refused, the Secret is
    read, and its key is the one used; a new key would change every credential digest."""
    nova = await stored_nova(admin, namespace)
    first = await secrets.digest_key(make_ctx(ours, nova))
    before = await admin.get(SECRETS, KEY, namespace)
    ours.calls.clear()
    again = await secrets.digest_key(make_ctx(ours, nova))  # a fresh cache without it
    assert again == first
    assert ours.called() == [("apply", "secrets", "409"), ("get", "secrets", "200")]
    assert version(await admin.get(SECRETS, KEY, namespace)) == version(before)


async def test_a_strangers_secret_under_the_digest_keys_name_refuses_the_create_and_is_not_used(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await stored_nova(admin, namespace)
    kept = await put(admin, SECRETS, stranger_key(), namespace)
    with pytest.raises(ownership.ChildOwnedByAnother):
        await secrets.digest_key(make_ctx(ours, nova))
    assert ours.called() == [("apply", "secrets", "409"), ("get", "secrets", "200")]
    assert version(await admin.get(SECRETS, KEY, namespace)) == version(kept)


async def test_a_name_found_taken_is_read_first_on_later_passes_and_written_once_free(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    """A stranger's Service under a child's name is polled: the first pass's create is refused, the
    later passes only read it (no refused create per poll); once it is gone the child is made."""
    nova = await stored_nova(admin, namespace)
    await put(admin, SERVICES, a_service("nova"), namespace)
    options = NovaOptions()

    def ctx() -> PassContext:
        return with_services(ours, nova, options=options)

    with pytest.raises(ownership.ChildOwnedByAnother):
        await ctx().ensure(desired_service("nova", namespace), ref=SERVICES)
    assert ours.called() == [("apply", "services", "409"), ("get", "services", "200")]
    for _ in range(2):
        ours.calls.clear()
        with pytest.raises(ownership.ChildOwnedByAnother):
            await ctx().ensure(desired_service("nova", namespace), ref=SERVICES)
        assert ours.called() == [("get", "services", "200")]
    await admin.delete(SERVICES, "nova", namespace)
    ours.calls.clear()
    live = await ctx().ensure(desired_service("nova", namespace), ref=SERVICES)
    assert ours.called() == [("get", "services", "404"), ("apply", "services", "201")]
    assert live["metadata"]["ownerReferences"][0]["uid"] == nova["metadata"]["uid"]
    assert len(options.taken) == 0  # free again: the next child of that name is created first
