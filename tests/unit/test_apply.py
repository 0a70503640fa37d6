"""The pure parts of the apply helper: the subset check, owner references, the digest, the memo's size.

What ``apply`` sends and what the server keeps runs on kube-apiserver:
``tests/integration/nova/test_apply.py``.
"""

from __future__ import annotations

from typing import Any

from nova_operator import apply
from nova_operator.kube import owners

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
    out = owners.with_owner(owners.with_owner(d, OWNER), OWNER)
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


def test_the_digest_ignores_its_own_annotation_and_key_order() -> None:
    d = desired()
    assert apply.digest(d) == apply.digest(apply.stamped(d))
    reordered = {"data": d["data"], "metadata": d["metadata"], "kind": "ConfigMap", "apiVersion": "v1"}
    assert apply.digest(reordered) == apply.digest(d)
    assert apply.digest({**d, "data": {"k": "w"}}) != apply.digest(d)


def test_the_carried_memo_keeps_at_most_its_size() -> None:
    memo = apply.Carried(size=2)
    for uid in ("a", "b", "c"):
        body = apply.stamped(desired())
        live = {**body, "metadata": {**body["metadata"], "uid": uid, "resourceVersion": "1"}}
        assert memo.check(live, body)
    assert len(memo) == 2
