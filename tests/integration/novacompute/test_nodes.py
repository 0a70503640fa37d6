"""The Nodes step on the real API server around the pure plan: reads, errors and NodesReady
(novacompute-crd.md §7). Nodes are cluster-scoped: each test's are named after its namespace, and
its pool selects ``pool=<namespace>``, so no other test's Node is listed."""

from __future__ import annotations

import pytest

from nova_operator.kube import errors
from nova_operator.kube.resources import NODES, NOVACOMPUTES
from nova_operator.reconcilers.compute.nodes import reconcile_nodes
from tests.integration.novacompute.passes import Stage

pytestmark = pytest.mark.integration
ZONE = "topology.kubernetes.io/zone"


async def test_selected_nodes_become_pending_and_the_leaving_drain(stage: Stage) -> None:
    n1 = await stage.node("n1", {"pool": stage.ns, ZONE: "z1"})
    n2 = await stage.node("n2")
    cr = await stage.pool(selector=stage.ns, nodes=[{"name": n2, "phase": "Active", "serviceID": "s"}])
    p, _ = stage.pass_over(cr)
    assert (await reconcile_nodes(p)).requeue_after is None
    assert [c[3] for c in stage.kube.of_verb("list", NODES.plural)] == [f"pool={stage.ns}"]
    assert p.nodes == [
        {"name": n1, "phase": "Pending", "zone": "z1"},
        {"name": n2, "phase": "Draining", "serviceID": "s"},
    ]
    assert p.plan is not None
    assert p.plan.keep_pods == {n2}
    c = p.condition("NodesReady")
    assert c is not None
    assert (c["status"], c["reason"], c["message"]) == (
        "True",
        "NodesResolved",
        "1 nodes selected, 1 leaving",
    )


async def test_nothing_selected_or_held_is_no_matching_nodes_and_not_a_wait(stage: Stage) -> None:
    await stage.node("n1")
    p, _ = stage.pass_over(await stage.pool(selector=stage.ns))
    assert (await reconcile_nodes(p)).requeue_after is None
    c = p.condition("NodesReady")
    assert c is not None
    assert c["reason"] == "NoMatchingNodes"


async def test_a_node_held_by_a_rival_is_a_conflict_with_one_event(stage: Stage) -> None:
    n1 = await stage.node("n1", {"pool": stage.ns})
    rival = await stage.pool("older", selector=stage.ns, nodes=[{"name": n1, "phase": "Active"}])
    # created after the rival: the younger pool (the server stamps whole seconds; a tie goes by name,
    # and "older" sorts first too)
    cr = await stage.pool(selector=stage.ns)
    p, events = stage.pass_over(cr, siblings=[rival, cr])
    await reconcile_nodes(p)
    assert p.nodes == [{"name": n1, "phase": "Conflict", "conflictsWith": "older"}]
    c = p.condition("NodesReady")
    assert c is not None
    assert c["reason"] == "NodeConflict"
    assert events.reasons() == ["NodeConflict"]
    assert p.siblings == [rival]


async def test_a_deleting_pool_lists_nothing_and_every_held_node_leaves(stage: Stage) -> None:
    n1 = await stage.node("n1", {"pool": stage.ns})
    cr = await stage.pool(
        selector=stage.ns, deleting=True, nodes=[{"name": n1, "phase": "Active", "serviceID": "s"}]
    )
    p, _ = stage.pass_over(cr)
    await reconcile_nodes(p)
    assert stage.kube.of_verb("list", NODES.plural) == []
    assert [c[2] for c in stage.kube.of_verb("get", NODES.plural)] == [n1]  # the held node is read
    assert p.nodes[0]["phase"] == "Draining"
    assert (await stage.admin.get(NOVACOMPUTES, "pool", stage.ns))["metadata"]["deletionTimestamp"]


async def test_forbidden_is_nodes_forbidden_and_waits_15s(stage: Stage) -> None:
    p, _ = stage.pass_over(await stage.pool(selector=stage.ns))
    stage.kube.refuse[("list", NODES.plural)] = errors.Forbidden("nodes is forbidden", status=403)
    assert (await reconcile_nodes(p)).requeue_after == 15
    c = p.condition("NodesReady")
    assert c is not None
    assert c["reason"] == "NodesForbidden"


async def test_other_read_errors_are_node_list_error_and_raise(stage: Stage) -> None:
    p, _ = stage.pass_over(await stage.pool(selector=stage.ns, nodes=[{"name": "n1", "phase": "Active"}]))
    stage.kube.refuse[("list", NODES.plural)] = errors.Unreachable("down")
    with pytest.raises(errors.Unreachable):
        await reconcile_nodes(p)
    c = p.condition("NodesReady")
    assert c is not None
    assert c["reason"] == "NodeListError"
    assert p.nodes == [{"name": "n1", "phase": "Active"}]  # the ledger is untouched
