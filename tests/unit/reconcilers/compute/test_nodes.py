"""The Nodes step around the pure plan: reads, errors and NodesReady (novacompute-crd.md §7)."""

from __future__ import annotations

from typing import Any

import pytest

from nova_operator.kube import errors
from nova_operator.reconcilers.compute.nodes import reconcile_nodes
from tests.unit.reconcilers.compute.fakes import FakeCompute, make_pass


class NodeKube:
    def __init__(self, nodes: dict[str, dict[str, str]], fail: Exception | None = None) -> None:
        self.nodes, self.fail, self.selectors = nodes, fail, []  # type: ignore[var-annotated]

    def _node(self, name: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "labels": self.nodes[name]}}

    async def list(self, ref: Any, namespace: str | None = None, *, label_selector: str | None = None) -> Any:
        if self.fail:
            raise self.fail
        self.selectors.append(label_selector)
        want = dict(kv.split("=") for kv in (label_selector or "").split(","))
        return {
            "items": [
                self._node(n)
                for n, lab in self.nodes.items()
                if all(lab.get(k) == v for k, v in want.items())
            ]
        }

    async def get(self, ref: Any, name: str, namespace: str | None = None) -> Any:
        if name not in self.nodes:
            raise errors.NotFound("gone", status=404)
        return self._node(name)


def run(nodes: list[dict[str, Any]], kube: NodeKube, **kw: Any):  # type: ignore[no-untyped-def]
    p, events = make_pass(nodes, compute=FakeCompute(), kube=kube, **kw)  # type: ignore[arg-type]
    return p, events


async def test_selected_nodes_become_pending_and_the_leaving_drain() -> None:
    kube = NodeKube({"n1": {"pool": "a", "topology.kubernetes.io/zone": "z1"}, "n2": {}})
    p, _ = run([{"name": "n2", "phase": "Active", "serviceID": "s"}], kube)
    assert (await reconcile_nodes(p)).requeue_after is None
    assert kube.selectors == ["pool=a"]
    assert p.nodes == [
        {"name": "n1", "phase": "Pending", "zone": "z1"},
        {"name": "n2", "phase": "Draining", "serviceID": "s"},
    ]
    assert p.plan is not None
    assert p.plan.keep_pods == {"n2"}
    c = p.condition("NodesReady")
    assert (c["status"], c["reason"], c["message"]) == (
        "True",
        "NodesResolved",
        "1 nodes selected, 1 leaving",
    )


async def test_nothing_selected_or_held_is_no_matching_nodes_and_not_a_wait() -> None:
    p, _ = run([], NodeKube({"n1": {}}))
    assert (await reconcile_nodes(p)).requeue_after is None
    assert p.condition("NodesReady")["reason"] == "NoMatchingNodes"


async def test_a_node_held_by_a_rival_is_a_conflict_with_one_event() -> None:
    rival = {
        "metadata": {"name": "older", "creationTimestamp": "2020-01-01T00:00:00Z"},
        "spec": {"nodeSelector": {"pool": "a"}},
        "status": {"nodes": [{"name": "n1", "phase": "Active"}]},
    }
    p, events = run([], NodeKube({"n1": {"pool": "a"}}), siblings=[rival])
    await reconcile_nodes(p)
    assert p.nodes == [{"name": "n1", "phase": "Conflict", "conflictsWith": "older"}]
    assert p.condition("NodesReady")["reason"] == "NodeConflict"
    assert events.reasons() == ["NodeConflict"]
    assert p.siblings == [rival]


async def test_a_deleting_pool_lists_nothing_and_every_held_node_leaves() -> None:
    kube = NodeKube({"n1": {"pool": "a"}})
    p, _ = run([{"name": "n1", "phase": "Active", "serviceID": "s"}], kube, deleting=True)
    await reconcile_nodes(p)
    assert kube.selectors == []
    assert p.nodes[0]["phase"] == "Draining"


async def test_forbidden_is_nodes_forbidden_and_waits_15s() -> None:
    p, _ = run([], NodeKube({}, fail=errors.Forbidden("nodes is forbidden", status=403)))
    assert (await reconcile_nodes(p)).requeue_after == 15
    assert p.condition("NodesReady")["reason"] == "NodesForbidden"


async def test_other_read_errors_are_node_list_error_and_raise() -> None:
    p, _ = run([{"name": "n1", "phase": "Active"}], NodeKube({}, fail=errors.Unreachable("down")))
    with pytest.raises(errors.Unreachable):
        await reconcile_nodes(p)
    assert p.condition("NodesReady")["reason"] == "NodeListError"
    assert p.nodes == [{"name": "n1", "phase": "Active"}]  # the ledger is untouched
