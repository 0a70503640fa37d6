"""Handlers map events to keys; predicates decide which events count."""

from __future__ import annotations

from typing import Any

from nova_operator.runtime import predicates
from nova_operator.runtime.handlers import enqueue_for_object, enqueue_for_owner, enqueue_mapped
from nova_operator.runtime.request import Request


def obj(name: str = "x", ns: str = "ns", gen: int = 1, **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "generation": gen, **meta}, "status": {"s": 1}}


def owned_by(kind: str, name: str, api_version: str, controller: bool = True) -> dict[str, Any]:
    return obj(
        "child",
        ownerReferences=[
            {"apiVersion": api_version, "kind": kind, "name": name, "uid": "u", "controller": controller}
        ],
    )


def test_enqueue_for_object_uses_the_objects_own_key() -> None:
    keys: list[Request] = []
    h = enqueue_for_object(keys.append)
    h.on_add(obj("a"))
    h.on_update(obj("a"), obj("a", gen=2))
    h.on_delete(obj("a"))
    h.on_add({"metadata": {"name": "node-1"}})
    assert keys == [Request("ns", "a")] * 3 + [Request("", "node-1")]


def test_enqueue_for_owner_follows_only_a_controller_reference_of_the_group_and_kind() -> None:
    keys: list[Request] = []
    h = enqueue_for_owner(keys.append, group="nova.openstack.c5c3.io", kind="Nova")
    h.on_add(owned_by("Nova", "n1", "nova.openstack.c5c3.io/v1alpha1"))
    h.on_add(owned_by("Nova", "n2", "nova.openstack.c5c3.io/v1beta9"))  # any version
    h.on_add(owned_by("Nova", "n3", "other.io/v1"))
    h.on_add(owned_by("Nova", "n4", "nova.openstack.c5c3.io/v1alpha1", controller=False))
    h.on_add(obj("orphan"))
    assert keys == [Request("ns", "n1"), Request("ns", "n2")]


def test_core_group_owner_references_match_the_empty_group() -> None:
    keys: list[Request] = []
    enqueue_for_owner(keys.append, group="", kind="ConfigMap").on_add(owned_by("ConfigMap", "p", "v1"))
    assert keys == [Request("ns", "p")]


def test_mapped_handler_maps_old_and_new_on_update_without_duplicates() -> None:
    keys: list[Request] = []
    h = enqueue_mapped(keys.append, lambda o: [Request("ns", o["metadata"]["labels"]["app"])])
    h.on_update(obj(labels={"app": "a"}), obj(labels={"app": "b"}))
    h.on_update(obj(labels={"app": "a"}), obj(labels={"app": "a"}))
    assert keys == [Request("ns", "a"), Request("ns", "b"), Request("ns", "a")]


def test_ignore_status_only_admits_spec_label_annotation_and_deletion_changes() -> None:
    p = predicates.ignore_status_only
    base = obj()
    status_only = {**obj(), "status": {"s": 2}}
    assert not p.update(base, status_only)
    assert p.update(base, obj(gen=2))
    assert p.update(base, obj(labels={"a": "b"}))
    assert p.update(base, obj(annotations={"a": "b"}))
    assert p.update(base, obj(deletionTimestamp="2026-11-29T00:00:00Z"))
    assert p.create(base)
    assert p.delete(base)


def test_predicates_filter_handler_events() -> None:
    keys: list[Request] = []
    h = enqueue_for_object(keys.append, predicates.generation_changed)
    h.on_update(obj(), obj())
    h.on_update(obj(), obj(gen=2))
    assert keys == [Request("ns", "x")]


def test_label_selector_predicate_and_combinators() -> None:
    sel = predicates.label_selector({"role": "parent"})
    parent, other = obj(labels={"role": "parent"}), obj(labels={"role": "x"})
    assert sel.create(parent)
    assert not sel.create(other)
    assert sel.update(parent, other)  # leaving the selection still counts
    both = predicates.all_of(sel, predicates.generation_changed)
    assert not both.update(parent, parent)
    either = predicates.any_of(sel, predicates.generation_changed)
    assert either.update(other, obj(gen=5, labels={"role": "x"}))


def _versioned(rv: str, *, status: dict[str, Any], **meta: Any) -> dict[str, Any]:
    o = obj(resourceVersion=rv, **meta)
    o["status"] = status
    return o


def test_status_view_changed_admits_a_status_write_only_when_the_view_moved() -> None:
    p = predicates.status_view_changed(lambda o: (o.get("status") or {}).get("ready"))
    old = _versioned("1", status={"ready": 0, "message": "starting"})
    assert not p.update(old, _versioned("2", status={"ready": 0, "message": "still starting"}))
    assert p.update(old, _versioned("2", status={"ready": 1, "message": "starting"}))
    assert p.create(old)
    assert p.delete(old)


def test_status_view_changed_admits_every_change_outside_status_and_a_resync() -> None:
    p = predicates.status_view_changed(lambda _: None)  # a kind whose status is not read at all
    old = _versioned("1", status={"x": 1})
    assert not p.update(old, _versioned("2", status={"x": 2}))
    assert p.update(old, {**_versioned("2", status={"x": 1}), "spec": {"replicas": 3}})
    assert p.update(old, _versioned("2", status={"x": 1}, labels={"a": "b"}))
    assert p.update(old, _versioned("2", status={"x": 1}, annotations={"a": "b"}))
    assert p.update(old, _versioned("2", status={"x": 1}, ownerReferences=[{"uid": "u"}]))
    assert p.update(old, _versioned("2", status={"x": 1}, deletionTimestamp="2026-12-01T00:00:00Z"))
    assert p.update(old, _versioned("2", status={"x": 1}, gen=2))
    # the informer's resync hands the same object (same resourceVersion) as old and new
    assert p.update(old, old)
    assert p.update(old, _versioned("1", status={"x": 2}))


def test_status_view_changed_filters_owner_events_of_a_handler() -> None:
    keys: list[Request] = []
    view = predicates.status_view_changed(lambda o: (o.get("status") or {}).get("ready"))
    h = enqueue_for_owner(keys.append, group="g.io", kind="Parent", predicates=[view])
    ref = [{"apiVersion": "g.io/v1", "kind": "Parent", "name": "p", "uid": "u", "controller": True}]
    h.on_update(
        _versioned("1", status={"ready": 0}, ownerReferences=ref),
        _versioned("2", status={"ready": 0, "observed": 1}, ownerReferences=ref),
    )
    assert keys == []
    h.on_update(
        _versioned("2", status={"ready": 0}, ownerReferences=ref),
        _versioned("3", status={"ready": 1}, ownerReferences=ref),
    )
    assert keys == [Request("ns", "p")]
