"""The apply helper: owner references, the write-free skip, and conflict retries."""

from __future__ import annotations

from typing import Any

import pytest

from nova_operator import apply
from nova_operator.kube.errors import Conflict, NotFound
from nova_operator.kube.resources import CONFIGMAPS, ResourceRef

OWNER = {
    "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
    "kind": "Nova",
    "metadata": {"name": "nova", "namespace": "ns", "uid": "u-1"},
}


def desired() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "ns", "labels": {"a": "1"}},
        "data": {"k": "v"},
    }


class FakeKube:
    def __init__(self, *fail: Exception) -> None:
        self.fail = list(fail)
        self.live: dict[str, Any] = {}
        self.applied: list[tuple[ResourceRef, dict[str, Any], str, bool]] = []
        self.subresources: list[str | None] = []
        self.deleted: list[tuple[ResourceRef, str, str | None]] = []
        self.patched: list[tuple[ResourceRef, str, dict[str, Any], str | None]] = []

    async def patch(
        self, ref: ResourceRef, name: str, patch: dict[str, Any], namespace: str | None = None, **kw: Any
    ) -> dict[str, Any]:
        self.patched.append((ref, name, patch, kw.get("field_manager")))
        live = dict(self.live)
        for field, keys in patch.items():
            if field != "metadata":  # a resourceVersion precondition
                live[field] = {k: v for k, v in live[field].items() if k not in keys}
        return live

    async def delete(self, ref: ResourceRef, name: str, namespace: str | None = None, **_: Any) -> None:
        self.deleted.append((ref, name, namespace))
        if self.fail:
            raise self.fail.pop(0)

    async def apply(
        self,
        ref: ResourceRef,
        body: dict[str, Any],
        *,
        field_manager: str,
        namespace: str | None,
        force: bool = True,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        self.applied.append((ref, body, field_manager, force))
        self.subresources.append(subresource)
        if self.fail:
            raise self.fail.pop(0)
        return {**body, "metadata": {**body["metadata"], "resourceVersion": "7"}}


def test_carries_is_a_subset_check_that_ignores_server_added_fields() -> None:
    live = {
        "metadata": {"name": "c", "labels": {"a": "1", "extra": "x"}, "uid": "u"},
        "spec": {"replicas": 2, "template": {"containers": [{"name": "x", "image": "i", "tty": False}]}},
    }
    assert apply.carries(live, {"metadata": {"labels": {"a": "1"}}, "spec": {"replicas": 2}})
    assert apply.carries(live, {"spec": {"template": {"containers": [{"name": "x"}]}}})
    assert not apply.carries(live, {"spec": {"replicas": 3}})
    assert not apply.carries(live, {"spec": {"template": {"containers": [{"name": "x"}, {"name": "y"}]}}})
    assert not apply.carries(live, {"metadata": {"annotations": {"a": "1"}}})
    assert not apply.carries({"v": 1}, {"v": True})  # JSON true is not 1
    assert not apply.carries({"v": "1"}, {"v": 1})
    # The server drops empty maps and lists: an empty desired field is carried by its absence.
    assert apply.carries({"metadata": {"name": "c"}}, {"metadata": {"name": "c", "annotations": {}}, "x": []})
    assert not apply.carries({"x": [1]}, {"x": []})


def test_with_owner_sets_one_controller_reference_without_touching_the_input() -> None:
    d = desired()
    out = apply.with_owner(apply.with_owner(d, OWNER), OWNER)
    assert out["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
            "kind": "Nova",
            "name": "nova",
            "uid": "u-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert "ownerReferences" not in d["metadata"]


async def test_apply_sends_one_server_side_apply_with_the_field_manager() -> None:
    kube = FakeKube()
    live = await apply.apply(kube, desired(), owner=OWNER)  # type: ignore[arg-type]
    ref, body, manager, force = kube.applied[0]
    assert (ref, manager, force) == (CONFIGMAPS, "nova-operator", True)
    assert body["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert live["metadata"]["resourceVersion"] == "7"


def converged(body: dict[str, Any], key: bytes | None = None) -> dict[str, Any]:
    """What the server holds after applying ``body`` for the operator (plus server fields)."""
    live = apply.stamped(apply.with_owner(body, OWNER), key)
    live["metadata"].update(uid="c-1", resourceVersion="5")
    return live


async def test_apply_skips_the_write_when_the_cached_object_carries_the_desired_fields() -> None:
    kube = FakeKube()
    cached = converged(desired())
    assert await apply.apply(kube, desired(), owner=OWNER, cached=cached) == cached  # type: ignore[arg-type]
    assert kube.applied == []
    cached["data"]["k"] = "old"  # someone changed an operator-owned value: it is put back
    await apply.apply(kube, desired(), owner=OWNER, cached=cached)  # type: ignore[arg-type]
    assert len(kube.applied) == 1


async def test_a_field_the_operator_stops_rendering_is_applied_away() -> None:
    before = desired()
    before["metadata"]["annotations"] = {"gateway.example.org/class": "public"}
    before["data"]["gone"] = "x"
    cached = converged(before)
    kube = FakeKube()
    await apply.apply(kube, desired(), owner=OWNER, cached=cached)  # type: ignore[arg-type]
    # the live object still carries every desired field (a subset check would skip) ...
    assert apply.carries(cached, apply.with_owner(desired(), OWNER))
    # ... but its recorded digest is not the desired one: the apply goes out, without the fields
    [(_, body, manager, force)] = kube.applied
    assert (manager, force) == ("nova-operator", True)
    assert body["data"] == {"k": "v"}
    assert set(body["metadata"]["annotations"]) == {apply.APPLIED_DIGEST}
    assert (
        body["metadata"]["annotations"][apply.APPLIED_DIGEST]
        != cached["metadata"]["annotations"][apply.APPLIED_DIGEST]
    )


async def test_fields_of_other_managers_do_not_cause_a_write() -> None:
    cached = converged(desired())
    cached["metadata"]["annotations"]["example.org/owner"] = "team-a"  # a user's annotation
    cached["metadata"]["labels"]["hpa"] = "x"
    cached["spec"] = {"replicas": 4}  # e.g. set by an HPA; the operator renders no replicas
    kube = FakeKube()
    await apply.apply(kube, desired(), owner=OWNER, cached=cached)  # type: ignore[arg-type]
    assert kube.applied == []
    assert kube.patched == []


def test_the_digest_ignores_its_own_annotation_and_key_order() -> None:
    d = desired()
    assert apply.digest(d) == apply.digest(apply.stamped(d))
    reordered = {"data": d["data"], "metadata": d["metadata"], "kind": "ConfigMap", "apiVersion": "v1"}
    assert apply.digest(reordered) == apply.digest(d)
    assert apply.digest({**d, "data": {"k": "w"}}) != apply.digest(d)


def secret(data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "nova-transport-url", "namespace": "ns"},
        "type": "Opaque",
        "data": data,
    }


async def test_a_derived_secret_loses_keys_someone_else_added() -> None:
    kube = FakeKube()
    cached = converged(secret({"transport_url": "dXJs"}), b"k")
    cached["data"]["extra"] = "eA=="
    cached["metadata"]["annotations"]["example.org/note"] = "kept"
    kube.live = cached
    live = await apply.apply(
        kube, secret({"transport_url": "dXJs"}), owner=OWNER, cached=cached, digest_key=b"k"
    )  # type: ignore[arg-type]
    from nova_operator.kube.resources import SECRETS

    patch = {"data": {"extra": None}, "metadata": {"resourceVersion": "5"}}  # on the cached basis
    assert kube.patched == [(SECRETS, "nova-transport-url", patch, "nova-operator")]
    assert live["data"] == {"transport_url": "dXJs"}
    assert live["metadata"]["annotations"]["example.org/note"] == "kept"  # only the data map is exclusive
    assert kube.applied == []  # nothing else drifted: no apply after the patch
    # a ConfigMap's data is not exclusive: an extra key there is another manager's business
    cm = converged(desired())
    cm["data"]["extra"] = "x"
    await apply.apply(kube, desired(), owner=OWNER, cached=cm)  # type: ignore[arg-type]
    assert len(kube.patched) == 1
    assert kube.applied == []


async def test_apply_retries_a_conflict_and_gives_up_after_a_few() -> None:
    kube = FakeKube(Conflict("race"))
    await apply.apply(kube, desired())  # type: ignore[arg-type]
    assert len(kube.applied) == 2
    kube = FakeKube(*[Conflict("race")] * 10)
    with pytest.raises(Conflict):
        await apply.apply(kube, desired())  # type: ignore[arg-type]
    assert len(kube.applied) == apply.CONFLICT_RETRIES + 1


async def test_create_sends_one_apply_that_only_a_create_can_satisfy() -> None:
    """``create``: the body ``apply`` would send (owner, digest), plus a resourceVersion precondition
    no object carries, so the API server creates an absent object and refuses an existing one."""
    kube = FakeKube()
    owned: list[dict[str, Any]] = []
    live = await apply.create(kube, desired(), owner=OWNER, own=owned.append)  # type: ignore[arg-type]
    ref, body, manager, _ = kube.applied[0]
    assert (ref, manager) == (CONFIGMAPS, "nova-operator")
    assert body["metadata"]["resourceVersion"] == apply.NO_VERSION
    assert int(apply.NO_VERSION) == 2**63 - 1  # beyond any etcd revision (an int64)
    assert body["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert body["metadata"]["annotations"][apply.APPLIED_DIGEST] == apply.digest(
        apply.with_owner(desired(), OWNER)
    )
    assert live is not None
    assert owned == [live]


async def test_create_answers_none_and_retries_nothing_when_the_name_is_taken() -> None:
    kube = FakeKube(Conflict("the object has been modified"))
    owned: list[dict[str, Any]] = []
    assert await apply.create(kube, desired(), own=owned.append) is None  # type: ignore[arg-type]
    assert len(kube.applied) == 1
    assert owned == []


async def test_create_keys_a_secrets_digest_or_refuses() -> None:
    body = secret({"password": "cGFzcw=="})
    with pytest.raises(ValueError, match="keyed"):
        await apply.create(FakeKube(), body)  # type: ignore[arg-type]
    kube = FakeKube()
    await apply.create(kube, body, digest_key=b"k")  # type: ignore[arg-type]
    sent = kube.applied[0][1]["metadata"]["annotations"][apply.APPLIED_DIGEST]
    assert sent == apply.digest(body, b"k") != apply.digest(body)


async def test_apply_status_writes_only_a_changed_status_to_the_subresource() -> None:
    kube = FakeKube()
    live = {**OWNER, "status": {"phase": "Ready", "observedGeneration": 2}}
    assert await apply.apply_status(kube, live, {"phase": "Ready"}) is None  # type: ignore[arg-type]
    assert kube.applied == []
    await apply.apply_status(kube, live, {"phase": "Failed"})  # type: ignore[arg-type]
    ref, body, manager, _ = kube.applied[0]
    assert (ref.kind, manager, kube.subresources) == ("Nova", "nova-operator", ["status"])
    assert body == {
        "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
        "kind": "Nova",
        "metadata": {"name": "nova", "namespace": "ns"},
        "status": {"phase": "Failed"},
    }


async def test_delete_if_present_treats_not_found_as_done() -> None:
    kube = FakeKube(NotFound("gone"))
    assert await apply.delete_if_present(kube, CONFIGMAPS, "c", "ns") is False  # type: ignore[arg-type]
    assert await apply.delete_if_present(kube, CONFIGMAPS, "c", "ns") is True  # type: ignore[arg-type]
    assert kube.deleted == [(CONFIGMAPS, "c", "ns")] * 2


async def test_a_retained_field_the_operator_stops_sending_is_handed_over_at_its_live_value() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "nova", "namespace": "ns"},
        "spec": {"replicas": 3, "template": {"spec": {}}},
    }
    cached = converged(deployment)
    without = {**deployment, "spec": {"template": {"spec": {"priorityClassName": "x"}}}}
    kube = FakeKube()
    await apply.apply(kube, without, owner=OWNER, cached=cached, retain=(("spec", "replicas"),))  # type: ignore[arg-type]
    (_, handover, manager, force), (_, body, main, _) = kube.applied
    assert (manager, force, main) == (apply.RETAIN_MANAGER, False, apply.FIELD_MANAGER)
    assert handover == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "nova", "namespace": "ns"},
        "spec": {"replicas": 3},
    }
    assert "replicas" not in body["spec"]
    # another manager owning the field already (409 on the hand-over) is fine; a sent field is not retained
    kube = FakeKube(Conflict("owned by horizontal-pod-autoscaler"))
    await apply.apply(kube, without, owner=OWNER, cached=cached, retain=(("spec", "replicas"),))  # type: ignore[arg-type]
    assert [m for _, _, m, _ in kube.applied] == [apply.RETAIN_MANAGER, apply.FIELD_MANAGER]
    kube = FakeKube()
    await apply.apply(
        kube,
        {**deployment, "spec": {"replicas": 2}},
        owner=OWNER,
        cached=cached,
        retain=(("spec", "replicas"),),
    )  # type: ignore[arg-type]
    assert [m for _, _, m, _ in kube.applied] == [apply.FIELD_MANAGER]


async def test_a_version_found_to_carry_a_digest_is_checked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[str] = []
    subset = apply.carries

    def counting(live: Any, want: Any) -> bool:
        if isinstance(want, dict) and "metadata" in want:  # a whole object, not a part of one
            checked.append(str(live["metadata"].get("resourceVersion")))
        return subset(live, want)

    monkeypatch.setattr(apply, "carries", counting)
    memo = apply.Carried()
    kube = FakeKube()
    cached = {**converged(desired()), "metadata": {**converged(desired())["metadata"], "uid": "c-1"}}
    cached["metadata"]["resourceVersion"] = "5"
    for _ in range(3):  # converged passes: one deep check, then the memo answers
        await apply.apply(kube, desired(), owner=OWNER, cached=cached, carried=memo)  # type: ignore[arg-type]
    assert (checked, kube.applied, len(memo)) == (["5"], [], 1)
    changed = {**cached, "data": {"k": "old"}, "metadata": {**cached["metadata"], "resourceVersion": "6"}}
    await apply.apply(kube, desired(), owner=OWNER, cached=changed, carried=memo)  # type: ignore[arg-type]
    assert checked == ["5", "6"]  # a new version is checked again, and someone's change is put back
    assert len(kube.applied) == 1
    other = desired()
    other["data"]["k"] = "new"
    await apply.apply(kube, other, owner=OWNER, cached=cached, carried=memo)  # type: ignore[arg-type]
    assert len(kube.applied) == 2  # a new desired body (digest) is never answered from the memo


def test_the_carried_memo_keeps_at_most_its_size() -> None:
    memo = apply.Carried(size=2)
    for uid in ("a", "b", "c"):
        body = apply.stamped(desired())
        live = {**body, "metadata": {**body["metadata"], "uid": uid, "resourceVersion": "1"}}
        assert memo.check(live, body)
    assert len(memo) == 2
