"""The node plan over its cases (novacompute-crd.md §7.2, §13)."""

from __future__ import annotations

from typing import Any

from nova_operator.decisions.nodeplan import Pool, plan

POOL_LABELS = {"pool": "a"}
B_LABELS = {"pool": "b"}


def labels(pool: dict[str, str], zone: str | None = "az1") -> dict[str, str]:
    return {**pool, **({"topology.kubernetes.io/zone": zone} if zone else {})}


def pool(
    name: str = "a",
    *,
    created: str = "2026-11-01T00:00:00Z",
    nodes: tuple[dict[str, Any], ...] = (),
    deleting: bool = False,
    selector: dict[str, str] | None = None,
) -> Pool:
    return Pool(
        name=name,
        created=created,
        deleting=deleting,
        selector=POOL_LABELS if selector is None else selector,
        nodes=nodes,
    )


def test_new_node_is_pending_with_its_zone() -> None:
    p = plan(pool(), selected={"n1": labels(POOL_LABELS)}, held_nodes={}, rivals=[])
    assert p.nodes == [{"name": "n1", "phase": "Pending", "zone": "az1"}]
    assert p.excluded == p.keep_pods == p.handover == frozenset()


def test_leaving_node_drains_and_keeps_its_pod_and_service_fields() -> None:
    held = {"name": "n1", "phase": "Active", "serviceID": "u1", "serviceStatus": "enabled", "zone": "az1"}
    p = plan(pool(nodes=(held,)), selected={}, held_nodes={"n1": labels({}, "az2")}, rivals=[])
    assert p.nodes == [{**held, "phase": "Draining", "zone": "az2"}]
    assert p.keep_pods == {"n1"}
    assert p.handover == frozenset()


def test_node_deleted_from_the_cluster_drains_with_its_last_zone() -> None:
    held = {"name": "n1", "phase": "Pending", "zone": "az1"}
    p = plan(pool(nodes=(held,)), selected={}, held_nodes={"n1": None}, rivals=[])
    assert p.nodes == [{"name": "n1", "phase": "Draining", "zone": "az1"}]


def test_releasing_stays_releasing_when_it_leaves() -> None:
    held = {"name": "n1", "phase": "Releasing", "serviceID": "u1"}
    p = plan(pool(nodes=(held,)), selected={}, held_nodes={"n1": labels({})}, rivals=[])
    assert p.nodes[0]["phase"] == "Releasing"
    assert p.keep_pods == frozenset()


def test_pool_deleted_every_held_node_leaves_and_conflicts_are_dropped() -> None:
    nodes = (
        {"name": "n1", "phase": "Active", "serviceID": "u1"},
        {"name": "n2", "phase": "Conflict", "conflictsWith": "b"},
    )
    p = plan(pool(nodes=nodes, deleting=True), selected={}, held_nodes={"n1": labels(POOL_LABELS)}, rivals=[])
    assert [(e["name"], e["phase"]) for e in p.nodes] == [("n1", "Draining")]


def test_node_claimed_by_two_pools_the_holder_keeps_it() -> None:
    rival = pool("b", created="2026-12-01T00:00:00Z", nodes=({"name": "n1", "phase": "Active"},))
    p = plan(pool(), selected={"n1": labels(POOL_LABELS)}, held_nodes={}, rivals=[rival])
    assert p.nodes == [{"name": "n1", "phase": "Conflict", "conflictsWith": "b", "zone": "az1"}]
    assert p.excluded == {"n1"}
    assert p.new_conflicts == (("n1", "b"),)


def test_an_existing_conflict_with_the_same_holder_is_not_reported_again() -> None:
    rival = pool("b", nodes=({"name": "n1", "phase": "Active"},))
    me = pool(
        created="2026-12-01T00:00:00Z", nodes=({"name": "n1", "phase": "Conflict", "conflictsWith": "b"},)
    )
    p = plan(me, selected={"n1": labels(POOL_LABELS)}, held_nodes={}, rivals=[rival])
    assert p.nodes[0]["phase"] == "Conflict"
    assert p.new_conflicts == ()


def test_of_two_rival_holders_the_older_one_is_named() -> None:
    young = pool("y", created="2026-12-02T00:00:00Z", nodes=({"name": "n1", "phase": "Active"},))
    old = pool("o", created="2026-10-01T00:00:00Z", nodes=({"name": "n1", "phase": "Pending"},))
    p = plan(pool(), selected={"n1": labels(POOL_LABELS)}, held_nodes={}, rivals=[young, old])
    assert p.nodes[0]["conflictsWith"] == "o"


def test_unheld_node_selected_by_an_older_live_rival_is_a_conflict() -> None:
    older = pool("b", created="2026-10-01T00:00:00Z", selector=POOL_LABELS)
    p = plan(pool(), selected={"n1": labels(POOL_LABELS)}, held_nodes={}, rivals=[older])
    assert p.nodes[0] == {"name": "n1", "phase": "Conflict", "conflictsWith": "b", "zone": "az1"}


def test_a_younger_or_deleting_rival_selector_does_not_outrank() -> None:
    younger = pool("b", created="2026-12-01T00:00:00Z", selector=POOL_LABELS)
    deleting = pool("c", created="2026-10-01T00:00:00Z", selector=POOL_LABELS, deleting=True)
    p = plan(pool(), selected={"n1": labels(POOL_LABELS)}, held_nodes={}, rivals=[younger, deleting])
    assert p.nodes[0]["phase"] == "Pending"


def test_race_repair_yields_to_an_older_live_rival_holding_pending_or_active() -> None:
    mine = {"name": "n1", "phase": "Active", "serviceID": "u1"}
    older = pool("b", created="2026-10-01T00:00:00Z", nodes=({"name": "n1", "phase": "Pending"},))
    p = plan(pool(nodes=(mine,)), selected={"n1": labels(POOL_LABELS)}, held_nodes={}, rivals=[older])
    assert p.nodes[0] == {"name": "n1", "phase": "Conflict", "conflictsWith": "b", "zone": "az1"}


def test_no_yield_to_a_younger_or_draining_rival_holder() -> None:
    mine = {"name": "n1", "phase": "Active", "serviceID": "u1"}
    younger = pool("b", created="2026-12-01T00:00:00Z", nodes=({"name": "n1", "phase": "Active"},))
    draining = pool("c", created="2026-10-01T00:00:00Z", nodes=({"name": "n1", "phase": "Draining"},))
    for rival in (younger, draining):
        p = plan(pool(nodes=(mine,)), selected={"n1": labels(POOL_LABELS)}, held_nodes={}, rivals=[rival])
        assert p.nodes[0]["phase"] == "Active"


def test_handover_to_a_rival_that_now_selects_the_node_skips_the_drain() -> None:
    mine = {"name": "n1", "phase": "Active", "serviceID": "u1", "instances": 3}
    rival = pool("b", created="2026-12-01T00:00:00Z", selector=B_LABELS)
    p = plan(pool(nodes=(mine,)), selected={}, held_nodes={"n1": labels(B_LABELS)}, rivals=[rival])
    assert p.nodes == [{"name": "n1", "phase": "Releasing", "serviceID": "u1", "zone": "az1"}]
    assert p.handover == {"n1"}
    assert p.keep_pods == frozenset()


def test_reselected_draining_node_settles_and_its_service_stays_disabled() -> None:
    draining = {
        "name": "n1",
        "phase": "Draining",
        "serviceID": "u1",
        "serviceStatus": "disabled",
        "disabledReason": "leaving pool a",
        "instances": 2,
    }
    p = plan(pool(nodes=(draining,)), selected={"n1": labels(POOL_LABELS)}, held_nodes={}, rivals=[])
    assert p.nodes == [
        {
            "name": "n1",
            "phase": "Active",
            "serviceID": "u1",
            "serviceStatus": "disabled",
            "disabledReason": "leaving pool a",
            "zone": "az1",
        }
    ]
    no_service = plan(
        pool(nodes=({"name": "n1", "phase": "Releasing"},)),
        selected={"n1": labels(POOL_LABELS)},
        held_nodes={},
        rivals=[],
    )
    assert no_service.nodes[0]["phase"] == "Pending"


def test_conflict_returns_to_pending_once_the_rival_dropped_it() -> None:
    me = pool(nodes=({"name": "n1", "phase": "Conflict", "conflictsWith": "b"},))
    rival = pool("b", created="2026-12-01T00:00:00Z", selector=B_LABELS)
    p = plan(me, selected={"n1": labels(POOL_LABELS, None)}, held_nodes={}, rivals=[rival])
    assert p.nodes == [{"name": "n1", "phase": "Pending"}]


def test_result_is_sorted_and_the_input_is_not_mutated() -> None:
    held = ({"name": "z", "phase": "Active", "serviceID": "u"}, {"name": "b", "phase": "Pending"})
    me = pool(nodes=held)
    snapshot = [dict(e) for e in held]
    p = plan(
        me,
        selected={"m": labels(POOL_LABELS), "b": labels(POOL_LABELS)},
        held_nodes={"z": labels({})},
        rivals=[me],
    )
    assert [e["name"] for e in p.nodes] == ["b", "m", "z"]
    assert [dict(e) for e in held] == snapshot
