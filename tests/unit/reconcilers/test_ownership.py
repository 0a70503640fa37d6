"""Issue 26 item 4: a child of another owner is neither written nor deleted, and the step says why."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from nova_operator import naming, ownership
from nova_operator.kube.resources import SECRETS, SERVICES
from nova_operator.reconcilers.nova.context import NovaOptions, PassContext
from nova_operator.runtime.cache import Cache
from tests.unit.reconcilers.fakes import FakeEvents, FakeKube
from tests.unit.reconcilers.nova.passes import NS, UID, make_ctx

MARKS = naming.common_labels("nova")


def _obj(name: str, *, owner_uid: str | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "labels": labels or {}}
    if owner_uid is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Nova", "name": "other", "uid": owner_uid, "controller": True}
        ]
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {"ports": [{"port": 80}]}}


def test_a_child_controlled_by_this_cr_is_its_own() -> None:
    assert ownership.holder(_obj("nova", owner_uid=UID), UID, MARKS) is None


def test_a_child_controlled_by_another_cr_is_held_in_fixed_words() -> None:
    """Issue 36: the other owner's kind, name and uid are not the CR author's to learn."""
    who = ownership.holder(_obj("nova", owner_uid="x-uid", labels=MARKS), UID, MARKS)
    assert who == "another owner controls it"


def test_an_orphan_with_this_crs_labels_is_adopted_one_without_is_not() -> None:
    assert ownership.holder(_obj("nova", labels=MARKS), UID, MARKS) is None
    assert ownership.holder(_obj("nova", labels={**MARKS, naming.INSTANCE_LABEL: "nova-a"}), UID, MARKS)
    assert ownership.holder(_obj("web"), UID, MARKS) is not None


def test_a_non_controller_reference_does_not_make_an_object_ours() -> None:
    obj = _obj("nova")
    obj["metadata"]["ownerReferences"] = [{"kind": "Nova", "name": "nova", "uid": UID, "controller": False}]
    assert ownership.holder(obj, UID, MARKS) is not None


def test_the_refusal_names_the_object_and_its_holder() -> None:
    owner = {"kind": "Nova", "metadata": {"name": "x-a", "uid": UID}}
    with pytest.raises(ownership.ChildOwnedByAnother) as caught:
        ownership.refuse_unless_ours(_obj("x-a-nova-cell0", owner_uid="x-uid"), owner, MARKS, kind="Database")
    message = str(caught.value)
    assert message.startswith(f"Database {NS}/x-a-nova-cell0 exists and is not this Nova's: another owner")
    assert "x-uid" not in message  # the holder's uid
    assert "Nova other" not in message  # the holder's kind and name
    assert caught.value.reason == "ChildOwnedByAnother"
    assert caught.value.requeue_after is not None


def _ctx(kube: FakeKube, *cached: dict[str, Any]) -> PassContext:
    ctx = make_ctx(kube, FakeEvents(), options=NovaOptions())
    services = Cache(str(SERVICES))
    for obj in cached:
        services.upsert(obj)
    ctx.caches = {**ctx.caches, SERVICES: services}
    return ctx


def _service(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": NS, "labels": dict(MARKS)},
        "spec": {"ports": [{"port": 8774}]},
    }


async def test_ensure_writes_nothing_over_an_object_the_cache_does_not_hold() -> None:
    """The children's caches hold only managed-by objects: a user's Service refuses the create-first
    write, is then found by GET, and is not taken."""
    kube = FakeKube()
    theirs = kube.put(SERVICES, _obj("nova"))
    ctx = _ctx(kube)
    with pytest.raises(ownership.ChildOwnedByAnother):
        await ctx.ensure(_service("nova"), ref=SERVICES)
    assert kube.writes() == []
    assert kube.store[(str(SERVICES), NS, "nova")] == theirs


async def test_ensure_writes_nothing_over_another_novas_cached_child() -> None:
    kube = FakeKube()
    theirs = _obj("nova", owner_uid="x-uid", labels=MARKS)
    ctx = _ctx(kube, theirs)
    with pytest.raises(ownership.ChildOwnedByAnother):
        await ctx.ensure(_service("nova"), ref=SERVICES)
    assert kube.calls == []  # judged from the cache: no read, no write


async def test_ensure_adopts_its_own_orphan_and_creates_what_is_absent() -> None:
    kube = FakeKube()
    kube.put(SERVICES, _obj("nova", labels=MARKS))
    ctx = _ctx(kube)
    live = await ctx.ensure(_service("nova"), ref=SERVICES)
    assert [r["uid"] for r in live["metadata"]["ownerReferences"]] == [UID]
    created = await ctx.ensure(_service("nova-metadata"), ref=SERVICES)
    assert created["metadata"]["ownerReferences"][0]["uid"] == UID
    # the orphan: created first, refused, read, adopted; the absent one: created, with no read
    assert [c for c in kube.calls if c[2] == "nova"] == [
        ("refused apply", str(SERVICES), "nova"),
        ("get", str(SERVICES), "nova"),
        ("apply", str(SERVICES), "nova"),
    ]
    assert [c for c in kube.calls if c[2] == "nova-metadata"] == [("apply", str(SERVICES), "nova-metadata")]


async def test_a_converged_child_costs_no_request() -> None:
    kube = FakeKube()
    ctx = _ctx(kube)
    live = await ctx.ensure(_service("nova"), ref=SERVICES)
    kube.calls.clear()
    ctx = _ctx(kube, live)
    await ctx.ensure(_service("nova"), ref=SERVICES)
    assert kube.calls == []


async def test_the_digest_key_of_a_stranger_is_never_used() -> None:
    from nova_operator.reconcilers.nova import secrets

    kube = FakeKube()
    stranger = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "nova-digest-key", "namespace": NS},
        "data": {"key": "a25vd24ta2V5"},
    }
    ctx = make_ctx(kube, FakeEvents(), stranger)
    with pytest.raises(ownership.ChildOwnedByAnother):
        await secrets.digest_key(ctx)
    assert kube.writes() == []
    assert ctx.caches[SECRETS].get("nova-digest-key", NS) is not None


async def test_the_finalizer_deletes_only_the_mariadb_objects_it_holds() -> None:
    """Nova x-a (database nova) is deleted: Nova x's cell0 Database and Grant x-a-nova-cell0 stay."""
    from nova_operator.kube.resources import DATABASES, GRANTS, NOVAS, USERS
    from nova_operator.reconcilers.nova.reconciler import FINALIZER, NovaReconciler

    kube = FakeKube()
    x_a = {
        "apiVersion": NOVAS.api_version,
        "kind": "Nova",
        "metadata": {
            "name": "x-a",
            "namespace": NS,
            "uid": "x-a-uid",
            "resourceVersion": "1",
            "finalizers": [FINALIZER],
            "deletionTimestamp": "2026-12-01T00:00:00Z",
        },
        "spec": {
            "apiDatabase": {"clusterRef": {"name": "db"}, "database": "nova_api"},
            "database": {"clusterRef": {"name": "db"}, "database": "nova"},
        },
    }
    kube.put(NOVAS, x_a)
    mine = {"x-a-uid": naming.common_labels("x-a")}
    for ref, name, uid in (
        (DATABASES, "x-a", "x-a-uid"),
        (USERS, "x-a", "x-a-uid"),
        (DATABASES, "x-a-nova-cell0", "x-uid"),
        (GRANTS, "x-a-nova-cell0", "x-uid"),
    ):
        obj = _obj(name, owner_uid=uid, labels=mine.get(uid, naming.common_labels("x")))
        kube.put(ref, {**obj, "kind": ref.kind, "apiVersion": ref.api_version})
    events = FakeEvents()
    reconciler = NovaReconciler(kube, {}, events=events)  # type: ignore[arg-type]
    await reconciler.finalize(kube.store[(str(NOVAS), NS, "x-a")])
    deleted = [(r, n) for verb, r, n in kube.calls if verb == "delete"]
    assert deleted == [(str(DATABASES), "x-a"), (str(USERS), "x-a")]
    for ref in (DATABASES, GRANTS):
        assert (str(ref), NS, "x-a-nova-cell0") in kube.store
    # the pass after: nothing of its own left, the finalizer goes; x's objects are still there
    kube.calls.clear()
    await reconciler.finalize(kube.store[(str(NOVAS), NS, "x-a")])
    assert [c for c in kube.calls if c[0] == "delete"] == []
    assert kube.store[(str(NOVAS), NS, "x-a")]["metadata"]["finalizers"] == []
    assert (str(DATABASES), NS, "x-a-nova-cell0") in kube.store


async def test_a_new_digest_key_is_read_once_before_it_is_written() -> None:
    """The Secrets cache has not listed the namespace yet: one GET says the key is absent, and the
    write goes out on that read (no second GET of the same name in the pass)."""
    from nova_operator.reconcilers.nova import secrets

    kube = FakeKube()
    ctx = make_ctx(kube, FakeEvents())
    ctx.caches[SECRETS].cover(set())  # a scoped cache that does not cover the namespace yet
    key = await secrets.digest_key(ctx)
    assert kube.calls == [
        ("get", str(SECRETS), "nova-digest-key"),
        ("apply", str(SECRETS), "nova-digest-key"),
    ]
    assert kube.store[(str(SECRETS), NS, "nova-digest-key")]["data"]["key"]
    assert len(key) == 64


async def test_a_new_digest_key_is_created_first_with_no_read() -> None:
    """The covering cache does not hold the key: it is created in one request, and that key is used."""
    from nova_operator.reconcilers.nova import secrets

    kube = FakeKube()
    ctx = make_ctx(kube, FakeEvents())
    key = await secrets.digest_key(ctx)
    assert kube.calls == [("apply", str(SECRETS), "nova-digest-key")]
    stored = kube.store[(str(SECRETS), NS, "nova-digest-key")]
    assert base64.b64decode(stored["data"]["key"]) == key


async def test_a_digest_key_the_cache_has_not_seen_yet_is_kept_not_replaced() -> None:
    """The key's Secret exists (a pass wrote it, the cache lags): the create is refused, the Secret is
    read, and its key is the one used; a new key would change every credential digest."""
    from nova_operator.reconcilers.nova import secrets

    kube = FakeKube()
    first = await secrets.digest_key(make_ctx(kube, FakeEvents()))
    before = dict(kube.store[(str(SECRETS), NS, "nova-digest-key")])
    kube.calls.clear()
    again = await secrets.digest_key(make_ctx(kube, FakeEvents()))  # a fresh cache without it
    assert again == first
    assert kube.calls == [
        ("refused apply", str(SECRETS), "nova-digest-key"),
        ("get", str(SECRETS), "nova-digest-key"),
    ]
    assert kube.store[(str(SECRETS), NS, "nova-digest-key")] == before


async def test_a_strangers_secret_under_the_digest_keys_name_refuses_the_create_and_is_not_used() -> None:
    from nova_operator.reconcilers.nova import secrets

    kube = FakeKube()
    stranger = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "nova-digest-key", "namespace": NS},
        "data": {"key": "a25vd24ta2V5"},
    }
    kube.put(SECRETS, stranger)
    kept = dict(kube.store[(str(SECRETS), NS, "nova-digest-key")])
    with pytest.raises(ownership.ChildOwnedByAnother):
        await secrets.digest_key(make_ctx(kube, FakeEvents()))
    assert kube.writes() == []
    assert kube.store[(str(SECRETS), NS, "nova-digest-key")] == kept


async def test_a_name_found_taken_is_read_first_on_later_passes_and_written_once_free() -> None:
    """A stranger's Service under a child's name is polled: the first pass's create is refused, the
    later passes only read it (no refused create per poll); once it is gone the child is made."""
    kube = FakeKube()
    kube.put(SERVICES, _obj("nova"))
    options = NovaOptions()

    def ctx() -> PassContext:
        made = make_ctx(kube, FakeEvents(), options=options)
        made.caches = {**made.caches, SERVICES: Cache(str(SERVICES))}
        return made

    with pytest.raises(ownership.ChildOwnedByAnother):
        await ctx().ensure(_service("nova"), ref=SERVICES)
    assert kube.calls == [("refused apply", str(SERVICES), "nova"), ("get", str(SERVICES), "nova")]
    for _ in range(2):
        kube.calls.clear()
        with pytest.raises(ownership.ChildOwnedByAnother):
            await ctx().ensure(_service("nova"), ref=SERVICES)
        assert kube.calls == [("get", str(SERVICES), "nova")]
    del kube.store[(str(SERVICES), NS, "nova")]
    kube.calls.clear()
    live = await ctx().ensure(_service("nova"), ref=SERVICES)
    assert kube.calls == [("get", str(SERVICES), "nova"), ("apply", str(SERVICES), "nova")]
    assert live["metadata"]["ownerReferences"][0]["uid"] == UID
    assert len(options.taken) == 0  # free again: the next child of that name is created first


def test_taken_keeps_at_most_its_size() -> None:
    taken = ownership.Taken(size=2)
    for name in ("a", "b", "c"):
        taken.add("services", NS, name)
    assert ("services", NS, "a") not in taken
    assert ("services", NS, "c") in taken
    assert len(taken) == 2
