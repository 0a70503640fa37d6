"""``apply`` on the real API server (issue 39, item 6): server-side apply with the operator's field
manager, the write-free skip, fields applied away, foreign keys of a derived Secret, conflicts, the
create-first write, the status subresource and the hand-over of a retained field.

Every object is stored by kube-apiserver: a field the operator stops sending is removed by server-side
apply itself (a merging stand-in kept it), another manager's fields stay because the server tracks
who owns what, and a create is refused by the server's own precondition. Requests are counted from
the client's request metrics. The pure parts (``carries``, ``with_owner``, the digest, the memo's
size) are unit tests in ``tests/unit/test_apply.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from nova_operator import apply
from nova_operator.kube import Kube, owners
from nova_operator.kube.errors import Conflict, NotFound
from nova_operator.kube.resources import CONFIGMAPS, DEPLOYMENTS, NOVAS, SECRETS
from nova_operator.kube.types import Object
from tests.integration.nova.inputs import nova_body
from tests.integration.nova.requests import Recorder, managers, sent, since, writes

OPERATOR = (apply.FIELD_MANAGER, "Apply", "")


async def owner_nova(admin: Kube, ns: str) -> Object:
    return await admin.create(NOVAS, nova_body(), ns)


def desired(ns: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": ns, "labels": {"a": "1"}},
        "data": data or {"k": "v"},
    }


def secret(ns: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "nova-transport-url", "namespace": ns},
        "type": "Opaque",
        "data": data,
    }


def deployment(ns: str, replicas: int | None = None, image: str = "nova:1") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"app": "nova"}},
        "template": {
            "metadata": {"labels": {"app": "nova"}},
            "spec": {"containers": [{"name": "api", "image": image}]},
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "nova", "namespace": ns},
        "spec": spec,
    }


async def someone_else(admin: Kube, ref: Any, name: str, ns: str, patch: dict[str, Any]) -> Object:
    """A merge patch by another field manager (a user, another controller)."""
    return await admin.patch(ref, name, patch, ns, field_manager="team-a")


async def test_apply_sends_one_forced_server_side_apply_as_the_operator(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    owner = await owner_nova(admin, namespace)
    # another manager holds data.k at another value: only a forced apply takes it over
    await admin.apply(CONFIGMAPS, desired(namespace, k="theirs"), field_manager="team-a", namespace=namespace)
    before = sent(ours)
    live = await apply.apply(ours, desired(namespace), owner=owner)
    assert since(ours, before) == {("apply", "configmaps", "200"): 1}
    assert live["data"] == {"k": "v"}
    assert [r["uid"] for r in live["metadata"]["ownerReferences"]] == [owner["metadata"]["uid"]]
    assert live["metadata"]["ownerReferences"][0]["controller"] is True
    assert OPERATOR in managers(live)
    assert live == await admin.get(CONFIGMAPS, "c", namespace)


async def test_apply_skips_the_write_when_the_cached_object_carries_the_desired_fields(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    owner = await owner_nova(admin, namespace)
    cached = await apply.apply(ours, desired(namespace), owner=owner)
    before = writes(ours)
    assert await apply.apply(ours, desired(namespace), owner=owner, cached=cached) == cached
    assert writes(ours) == before
    # someone changed an operator-owned value: it is put back
    changed = await someone_else(admin, CONFIGMAPS, "c", namespace, {"data": {"k": "old"}})
    live = await apply.apply(ours, desired(namespace), owner=owner, cached=changed)
    assert writes(ours) == before + 1
    assert (await admin.get(CONFIGMAPS, "c", namespace))["data"] == {"k": "v"} == live["data"]


async def test_a_field_the_operator_stops_rendering_is_applied_away(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    owner = await owner_nova(admin, namespace)
    old = desired(namespace, k="v", gone="x")
    old["metadata"]["annotations"] = {"gateway.example.org/class": "public"}
    cached = await apply.apply(ours, old, owner=owner)
    # the live object still carries every desired field (a subset check would skip) ...
    assert apply.carries(cached, owners.with_owner(desired(namespace), owner))
    before = sent(ours)
    await apply.apply(ours, desired(namespace), owner=owner, cached=cached)
    # ... but its recorded digest is not the desired one: the apply goes out, and the server drops
    # what the operator's manager owned and no longer sends
    assert since(ours, before) == {("apply", "configmaps", "200"): 1}
    stored = await admin.get(CONFIGMAPS, "c", namespace)
    assert stored["data"] == {"k": "v"}
    assert set(stored["metadata"]["annotations"]) == {apply.APPLIED_DIGEST}
    digest = stored["metadata"]["annotations"][apply.APPLIED_DIGEST]
    assert digest == apply.digest(owners.with_owner(desired(namespace), owner))
    assert digest != cached["metadata"]["annotations"][apply.APPLIED_DIGEST]


async def test_fields_of_other_managers_cause_no_write_and_outlive_the_operators_applies(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    owner = await owner_nova(admin, namespace)
    await apply.apply(ours, desired(namespace), owner=owner)
    theirs = {
        "metadata": {"annotations": {"example.org/owner": "team-a"}, "labels": {"hpa": "x"}},
        "data": {"extra": "theirs"},  # a ConfigMap's data is not the operator's alone
    }
    cached = await someone_else(admin, CONFIGMAPS, "c", namespace, theirs)
    before = writes(ours)
    await apply.apply(ours, desired(namespace), owner=owner, cached=cached)
    assert writes(ours) == before
    # a later apply (a changed value) leaves what another manager owns where it is
    live = await apply.apply(ours, desired(namespace, k="w"), owner=owner, cached=cached)
    assert live["data"] == {"k": "w", "extra": "theirs"}
    assert live["metadata"]["labels"] == {"a": "1", "hpa": "x"}
    assert live["metadata"]["annotations"]["example.org/owner"] == "team-a"


async def test_a_derived_secret_loses_keys_someone_else_added(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    owner = await owner_nova(admin, namespace)
    made = await apply.apply(ours, secret(namespace, {"transport_url": "dXJs"}), owner=owner, digest_key=b"k")
    extra = {"data": {"extra": "eA=="}, "metadata": {"annotations": {"example.org/note": "kept"}}}
    cached = await someone_else(admin, SECRETS, "nova-transport-url", namespace, extra)
    assert cached["metadata"]["resourceVersion"] != made["metadata"]["resourceVersion"]
    before = sent(ours)
    live = await apply.apply(
        ours, secret(namespace, {"transport_url": "dXJs"}), owner=owner, cached=cached, digest_key=b"k"
    )
    # one merge patch on the cached basis, and nothing else drifted: no apply after it
    assert since(ours, before) == {("patch", "secrets", "200"): 1}
    stored = await admin.get(SECRETS, "nova-transport-url", namespace)
    assert stored["data"] == {"transport_url": "dXJs"} == live["data"]
    assert stored["metadata"]["annotations"]["example.org/note"] == "kept"  # only data is exclusive
    # a ConfigMap's data is not exclusive: an extra key there is another manager's business
    await apply.apply(ours, desired(namespace), owner=owner)
    cm = await someone_else(admin, CONFIGMAPS, "c", namespace, {"data": {"extra": "x"}})
    before = writes(ours)
    await apply.apply(ours, desired(namespace), owner=owner, cached=cm)
    assert writes(ours) == before
    assert (await admin.get(CONFIGMAPS, "c", namespace))["data"] == {"k": "v", "extra": "x"}


async def test_a_derived_secret_patch_on_a_stale_basis_is_sent_again_without_it(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    """The cache lags: the guarded merge patch is refused by the server, and goes out unguarded."""
    owner = await owner_nova(admin, namespace)
    await apply.apply(ours, secret(namespace, {"transport_url": "dXJs"}), owner=owner, digest_key=b"k")
    cached = await someone_else(admin, SECRETS, "nova-transport-url", namespace, {"data": {"extra": "eA=="}})
    await someone_else(admin, SECRETS, "nova-transport-url", namespace, {"metadata": {"labels": {"b": "1"}}})
    owned: list[Object] = []
    before = sent(ours)
    await apply.apply(
        ours,
        secret(namespace, {"transport_url": "dXJs"}),
        owner=owner,
        cached=cached,
        digest_key=b"k",
        own=owned.append,
    )
    assert since(ours, before) == {("patch", "secrets", "409"): 1, ("patch", "secrets", "200"): 1}
    assert owned == []  # the answer holds another writer's change: not the caller's own
    assert (await admin.get(SECRETS, "nova-transport-url", namespace))["data"] == {"transport_url": "dXJs"}


async def test_apply_retries_a_conflict_and_gives_up_after_a_few(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    ours.conflicts = 1
    await apply.apply(ours, desired(namespace))
    assert ours.applies == [(apply.FIELD_MANAGER, True, "injected 409"), (apply.FIELD_MANAGER, True, "200")]
    assert (await admin.get(CONFIGMAPS, "c", namespace))["data"] == {"k": "v"}
    kube = Recorder.of(admin)
    kube.conflicts = 10
    other = desired(namespace)
    other["metadata"]["name"] = "d"
    with pytest.raises(Conflict):
        await apply.apply(kube, other)
    assert len(kube.applies) == apply.CONFLICT_RETRIES + 1
    with pytest.raises(NotFound):
        await admin.get(CONFIGMAPS, "d", namespace)


async def test_create_makes_an_absent_object_in_one_apply_as_apply_would(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    """``create``: the body ``apply`` would send (owner, digest), created by one request; the object
    is owned by the operator's Apply entry alone, so it is the caller's own write."""
    owner = await owner_nova(admin, namespace)
    owned: list[Object] = []
    before = sent(ours)
    live = await apply.create(ours, desired(namespace), owner=owner, own=owned.append)
    assert since(ours, before) == {("apply", "configmaps", "201"): 1}
    assert live is not None
    assert owned == [live]
    assert live["metadata"]["resourceVersion"] != apply.NO_VERSION
    assert int(apply.NO_VERSION) == 2**63 - 1  # beyond any etcd revision (an int64)
    assert live["metadata"]["ownerReferences"][0]["uid"] == owner["metadata"]["uid"]
    assert live["metadata"]["annotations"][apply.APPLIED_DIGEST] == apply.digest(
        owners.with_owner(desired(namespace), owner)
    )
    assert managers(live) == [OPERATOR]


async def test_create_answers_none_and_retries_nothing_when_the_name_is_taken(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    theirs = await admin.create(CONFIGMAPS, desired(namespace, mine="no"), namespace)
    owned: list[Object] = []
    before = sent(ours)
    assert await apply.create(ours, desired(namespace), own=owned.append) is None
    assert since(ours, before) == {("apply", "configmaps", "409"): 1}
    assert owned == []
    after = await admin.get(CONFIGMAPS, "c", namespace)
    assert after["metadata"]["resourceVersion"] == theirs["metadata"]["resourceVersion"]
    assert after["data"] == {"mine": "no"}


async def test_create_keys_a_secrets_digest_or_refuses(admin: Kube, ours: Recorder, namespace: str) -> None:
    body = secret(namespace, {"password": "cGFzcw=="})
    before = sent(ours)
    with pytest.raises(ValueError, match="keyed"):
        await apply.create(ours, body)
    assert since(ours, before) == {}  # refused before any request
    await apply.create(ours, body, digest_key=b"k")
    stored = await admin.get(SECRETS, "nova-transport-url", namespace)
    assert stored["metadata"]["annotations"][apply.APPLIED_DIGEST] == apply.digest(body, b"k")
    assert apply.digest(body, b"k") != apply.digest(body)


async def test_apply_status_writes_only_a_changed_status_to_the_subresource(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await owner_nova(admin, namespace)
    nova = await admin.patch_status(
        NOVAS, "nova", {"status": {"endpoint": "http://a", "observedGeneration": 1}}, namespace
    )
    before = sent(ours)
    assert await apply.apply_status(ours, nova, {"endpoint": "http://a"}) is None
    assert since(ours, before) == {}
    live = await apply.apply_status(ours, nova, {"endpoint": "http://b"})
    assert since(ours, before) == {("apply", f"{NOVAS}/status", "200"): 1}
    assert live is not None
    stored = await admin.get(NOVAS, "nova", namespace)
    assert stored["status"]["endpoint"] == "http://b"
    assert stored["spec"] == nova["spec"]  # the subresource writes the status alone
    assert stored["metadata"]["generation"] == nova["metadata"]["generation"]
    assert (apply.FIELD_MANAGER, "Apply", "status") in managers(stored)


async def test_delete_if_present_treats_not_found_as_done(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    assert await apply.delete_if_present(ours, CONFIGMAPS, "c", namespace) is False
    await admin.create(CONFIGMAPS, desired(namespace), namespace)
    assert await apply.delete_if_present(ours, CONFIGMAPS, "c", namespace) is True
    with pytest.raises(NotFound):
        await admin.get(CONFIGMAPS, "c", namespace)


async def test_delete_if_present_of_an_object_with_a_finalizer_leaves_it_terminating(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    """The server keeps an object its finalizers hold: deleted means asked, not gone (a stand-in
    that dropped it at once hid the wait)."""
    body = desired(namespace)
    body["metadata"]["finalizers"] = ["example.org/hold"]
    await admin.create(CONFIGMAPS, body, namespace)
    assert await apply.delete_if_present(ours, CONFIGMAPS, "c", namespace) is True
    held = await admin.get(CONFIGMAPS, "c", namespace)
    assert held["metadata"]["deletionTimestamp"]
    assert await apply.delete_if_present(ours, CONFIGMAPS, "c", namespace) is True  # still there
    await admin.patch(CONFIGMAPS, "c", {"metadata": {"finalizers": None}}, namespace)
    assert await apply.delete_if_present(ours, CONFIGMAPS, "c", namespace) is False


async def test_a_retained_field_the_operator_stops_sending_is_handed_over_at_its_live_value(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    owner = await owner_nova(admin, namespace)
    cached = await apply.apply(ours, deployment(namespace, replicas=3), owner=owner)
    ours.applies.clear()
    without = deployment(namespace, image="nova:2")
    live = await apply.apply(ours, without, owner=owner, cached=cached, retain=(("spec", "replicas"),))
    assert ours.applies == [(apply.RETAIN_MANAGER, False, "200"), (apply.FIELD_MANAGER, True, "200")]
    assert live["spec"]["replicas"] == 3  # not reset to the default of 1
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "nova:2"
    assert (apply.RETAIN_MANAGER, "Apply", "") in managers(live)
    # without the hand-over the server resets a field its only manager stops sending
    other = deployment(namespace)
    other["metadata"]["name"] = "plain"
    made = await apply.apply(ours, {**other, "spec": {**other["spec"], "replicas": 3}}, owner=owner)
    assert (await apply.apply(ours, other, owner=owner, cached=made))["spec"]["replicas"] == 1


async def test_a_retained_field_another_manager_holds_is_left_to_it(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    """An HPA owns spec.replicas at another value than the (lagging) cache says: the hand-over is
    refused by the server (409), which is fine, and the HPA's count stays."""
    owner = await owner_nova(admin, namespace)
    cached = await apply.apply(ours, deployment(namespace, replicas=3), owner=owner)
    hpa = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "nova"},
        "spec": {"replicas": 5},
    }
    await admin.apply(DEPLOYMENTS, hpa, field_manager="horizontal-pod-autoscaler", namespace=namespace)
    ours.applies.clear()
    live = await apply.apply(
        ours,
        deployment(namespace, image="nova:2"),
        owner=owner,
        cached=cached,
        retain=(("spec", "replicas"),),
    )
    assert ours.applies[0] == (apply.RETAIN_MANAGER, False, "409")
    assert ours.applies[-1] == (apply.FIELD_MANAGER, True, "200")
    assert live["spec"]["replicas"] == 5
    assert apply.RETAIN_MANAGER not in [m for m, _, _ in managers(live)]


async def test_a_retained_field_the_operator_sends_is_not_handed_over(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    owner = await owner_nova(admin, namespace)
    cached = await apply.apply(ours, deployment(namespace, replicas=3), owner=owner)
    ours.applies.clear()
    live = await apply.apply(
        ours, deployment(namespace, replicas=2), owner=owner, cached=cached, retain=(("spec", "replicas"),)
    )
    assert ours.applies == [(apply.FIELD_MANAGER, True, "200")]
    assert live["spec"]["replicas"] == 2
    assert apply.RETAIN_MANAGER not in [m for m, _, _ in managers(live)]


async def test_a_version_found_to_carry_a_digest_is_checked_once(
    admin: Kube, ours: Recorder, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner = await owner_nova(admin, namespace)
    cached = await apply.apply(ours, desired(namespace), owner=owner)
    checked: list[str] = []
    subset = apply.carries

    def counting(live: Any, want: Any) -> bool:
        if isinstance(want, dict) and "metadata" in want:  # a whole object, not a part of one
            checked.append(str(live["metadata"].get("resourceVersion")))
        return subset(live, want)

    monkeypatch.setattr(apply, "carries", counting)
    memo = apply.Carried()
    first = cached["metadata"]["resourceVersion"]
    before = writes(ours)
    for _ in range(3):  # converged passes: one deep check, then the memo answers
        await apply.apply(ours, desired(namespace), owner=owner, cached=cached, carried=memo)
    assert (checked, writes(ours) - before, len(memo)) == ([first], 0, 1)
    changed = await someone_else(admin, CONFIGMAPS, "c", namespace, {"data": {"k": "old"}})
    repaired = await apply.apply(ours, desired(namespace), owner=owner, cached=changed, carried=memo)
    # a new version is checked again, and someone's change is put back
    assert checked == [first, changed["metadata"]["resourceVersion"]]
    assert writes(ours) - before == 1
    assert repaired["data"] == {"k": "v"}
    await apply.apply(ours, desired(namespace), owner=owner, cached=repaired, carried=memo)
    assert writes(ours) - before == 1  # the repaired version carries it: remembered
    await apply.apply(ours, desired(namespace, k="new"), owner=owner, cached=repaired, carried=memo)
    assert writes(ours) - before == 2  # a new desired body (digest) is never answered from the memo
    assert (await admin.get(CONFIGMAPS, "c", namespace))["data"] == {"k": "new"}
