"""Which pools the NovaCompute controller wakes: on a Node's label change (issue 41, item 2) and on a
sibling's update (issue 41, item 3: only the siblings the change concerns)."""

from __future__ import annotations

from typing import Any

from nova_operator.kube.types import Object
from nova_operator.reconcilers.compute.controller import (
    SiblingWakes,
    concerned_siblings,
    discovery_changed,
    node_relabelled,
    pools_of_node,
    waiting_pools,
)
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.request import Request


def pool(
    name: str,
    selector: dict[str, str],
    held: tuple[str, ...] = (),
    ns: str = "ns",
    *,
    entries: list[dict[str, str]] | None = None,
    generation: int = 1,
) -> Object:
    return {
        "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
        "kind": "NovaCompute",
        "metadata": {"name": name, "namespace": ns, "resourceVersion": "1", "generation": generation},
        "spec": {"nodeSelector": selector, "novaRef": {"name": "nova"}},
        "status": {
            "nodes": entries if entries is not None else [{"name": n, "phase": "Active"} for n in held]
        },
    }


def node(name: str, **labels: Any) -> Object:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def pools(*objs: Object) -> Cache:
    cache = Cache("novacomputes")
    for obj in objs:
        cache.upsert(obj)
    return cache


def test_a_node_wakes_the_pools_that_select_it_or_hold_it_and_no_other() -> None:
    mapper = pools_of_node(
        pools(
            pool("rack-a", {"rack": "a"}),
            pool("rack-a-gpu", {"rack": "a", "gpu": "yes"}),
            pool("rack-b", {"rack": "b"}, held=("n1",)),
            pool("rack-c", {"rack": "c"}),
            pool("other-ns", {"rack": "a"}, ns="other"),
        )
    )
    assert sorted(mapper(node("n1", rack="a"))) == [
        Request("ns", "rack-a"),
        Request("ns", "rack-b"),  # holds it: the node left it
        Request("other", "other-ns"),
    ]
    assert sorted(mapper(node("n2", rack="a", gpu="yes"))) == [
        Request("ns", "rack-a"),
        Request("ns", "rack-a-gpu"),
        Request("other", "other-ns"),
    ]
    assert list(mapper(node("n3", rack="z"))) == []


def test_a_pool_without_a_selector_is_woken_only_for_nodes_it_holds() -> None:
    mapper = pools_of_node(pools(pool("empty", {}, held=("n1",))))
    assert list(mapper(node("n2", rack="a"))) == []
    assert list(mapper(node("n1", rack="a"))) == [Request("ns", "empty")]


def test_only_a_label_change_passes_the_predicate() -> None:
    before = node("n1", rack="a")
    heartbeat = {**before, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert not node_relabelled.update(before, heartbeat)
    assert node_relabelled.update(before, node("n1", rack="b"))


def entry(name: str, phase: str = "Active", zone: str = "az1") -> dict[str, str]:
    return {"name": name, "phase": phase, "zone": zone}


SIBLINGS = [
    pool("b", {"rack": "b"}, entries=[entry("b1"), entry("a2", "Conflict")]),  # a rival for a2
    pool("c", {"rack": "c"}, entries=[entry("c1")]),
    pool("d", {"rack": "d"}, entries=[]),
]


def names(found: list[Object]) -> list[str]:
    return sorted(p["metadata"]["name"] for p in found)


def no_labels(name: str) -> None:
    return None


def test_a_new_node_in_a_known_zone_wakes_no_sibling() -> None:
    old = pool("a", {"rack": "a"}, entries=[entry("a1")])
    new = pool("a", {"rack": "a"}, entries=[entry("a1"), entry("a3", "Pending")])
    assert concerned_siblings(old, new, SIBLINGS, no_labels) == []


def test_a_changed_entry_wakes_the_siblings_that_hold_the_node() -> None:
    old = pool("a", {"rack": "a"}, entries=[entry("a1"), entry("a2", "Draining")])
    new = pool("a", {"rack": "a"}, entries=[entry("a1"), entry("a2", "Releasing")])
    assert names(concerned_siblings(old, new, SIBLINGS, no_labels)) == ["b"]
    dropped = pool("a", {"rack": "a"}, entries=[entry("a1")])
    assert names(concerned_siblings(new, dropped, SIBLINGS, no_labels)) == ["b"]


def test_a_changed_entry_wakes_the_siblings_whose_selector_the_cached_node_matches() -> None:
    old = pool("a", {"rack": "a"}, entries=[entry("a1")])
    new = pool("a", {"rack": "a"}, entries=[entry("a1"), entry("n9", "Pending")])
    labels = {"n9": {"rack": "d"}}
    assert names(concerned_siblings(old, new, SIBLINGS, labels.get)) == ["d"]


def test_a_new_zone_a_generation_or_a_deletion_wakes_every_sibling() -> None:
    old = pool("a", {"rack": "a"}, entries=[entry("a1")])
    zone = pool("a", {"rack": "a"}, entries=[entry("a1"), entry("a3", "Pending", zone="az9")])
    assert names(concerned_siblings(old, zone, SIBLINGS, no_labels)) == ["b", "c", "d"]
    bumped = pool("a", {"rack": "x"}, entries=[entry("a1")], generation=2)
    assert names(concerned_siblings(old, bumped, SIBLINGS, no_labels)) == ["b", "c", "d"]
    deleting = pool("a", {"rack": "a"}, entries=[entry("a1")])
    deleting["metadata"]["deletionTimestamp"] = "2026-12-06T00:00:00Z"
    assert names(concerned_siblings(old, deleting, SIBLINGS, no_labels)) == ["b", "c", "d"]


def test_a_change_of_instance_counts_or_service_state_wakes_nobody() -> None:
    old = pool("a", {"rack": "a"}, entries=[entry("a1")])
    new = pool("a", {"rack": "a"}, entries=[{**entry("a1"), "instances": "3", "serviceState": "down"}])
    assert concerned_siblings(old, new, SIBLINGS, no_labels) == []


def job(phase: str | None, component: str = "discover-hosts", nova: str = "nova") -> Object:
    conditions = (
        [{"type": phase, "status": "True", "lastTransitionTime": "2026-12-06T00:00:00Z"}] if phase else []
    )
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{nova}-{component}",
            "namespace": "ns",
            "labels": {"app.kubernetes.io/component": component, "app.kubernetes.io/instance": nova},
        },
        "status": {"conditions": conditions},
    }


def test_the_discovery_job_finishing_wakes_the_pools_of_its_nova_that_hold_a_pending_node() -> None:
    waiting = pool("a", {"rack": "a"}, entries=[entry("a1"), entry("a2", "Pending")])
    settled = pool("b", {"rack": "b"}, entries=[entry("b1")])
    lister = {("ns", "nova"): [waiting, settled]}
    mapper = waiting_pools(lambda ns, nova: lister.get((ns, nova), []))
    assert list(mapper(job("Complete"))) == [Request("ns", "a")]
    assert list(mapper(job("Complete", nova="other"))) == []


def test_only_the_discovery_job_turning_complete_or_failed_passes_the_predicate() -> None:
    assert discovery_changed.update(job(None), job("Complete"))
    assert discovery_changed.update(job(None), job("Failed"))
    assert not discovery_changed.update(job("Complete"), job("Complete"))  # a resync, a label change
    assert not discovery_changed.update(job(None), job(None))
    assert not discovery_changed.update(job(None, "db-sync"), job("Complete", "db-sync"))
    assert not discovery_changed.create(job("Complete"))


def test_the_handler_wakes_all_siblings_on_create_and_delete_and_the_concerned_ones_on_update() -> None:
    woken: list[Request] = []
    a_old = pool("a", {"rack": "a"}, entries=[entry("a1"), entry("a2", "Draining")])
    a_new = pool("a", {"rack": "a"}, entries=[entry("a1"), entry("a2", "Releasing")])
    everyone = [a_new, *SIBLINGS]
    wakes = SiblingWakes(woken.append, lambda ns, nova: everyone, no_labels)
    wakes.on_add(a_new)
    assert sorted(r.name for r in woken) == ["b", "c", "d"]
    woken.clear()
    wakes.on_update(a_old, a_new)
    assert [r.name for r in woken] == ["b"]  # b holds a2 as a Conflict entry
    woken.clear()
    wakes.on_update(a_new, {**a_new, "metadata": {**a_new["metadata"], "resourceVersion": "2"}})
    assert woken == []
    wakes.on_delete(a_new)
    assert sorted(r.name for r in woken) == ["b", "c", "d"]
