"""Issue 26 item 4: who holds a child, and the words of the refusal (pure judgement).

That such a child is neither written nor deleted runs on kube-apiserver:
``tests/integration/nova/test_ownership.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from nova_operator import naming, ownership

NS, UID = "ns", "nova-uid"
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


def test_taken_keeps_at_most_its_size() -> None:
    taken = ownership.Taken(size=2)
    for name in ("a", "b", "c"):
        taken.add("services", NS, name)
    assert ("services", NS, "a") not in taken
    assert ("services", NS, "c") in taken
    assert len(taken) == 2
