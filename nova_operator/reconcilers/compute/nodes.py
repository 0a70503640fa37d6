"""Step Nodes (condition NodesReady): read which nodes the pool selects and plan its ledger (§7).

Nodes are read from the controller's optional Node informer once it has synced (issue 41: no
Kubernetes request in a converged pass), else straight from the API server: that informer never
syncs where the install may not list and watch Nodes, and the operator works on without it. A held
node the synced cache does not show is read from the API server all the same, so only the API
server's NotFound takes a node for gone (never a watch that lags).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nova_operator import conditions
from nova_operator.decisions import nodeplan
from nova_operator.kube import errors
from nova_operator.kube.resources import NODES
from nova_operator.kube.types import Object
from nova_operator.reconcilers.compute.context import ComputePass
from nova_operator.runtime.request import Result

COND = conditions.NODES_READY


def as_pool(obj: Mapping[str, Any]) -> nodeplan.Pool:
    """A NovaCompute (plain dict) as the node plan sees it."""
    meta = obj.get("metadata") or {}
    return nodeplan.Pool(
        name=str(meta.get("name", "")),
        created=str(meta.get("creationTimestamp") or ""),
        deleting=bool(meta.get("deletionTimestamp")),
        selector=dict((obj.get("spec") or {}).get("nodeSelector") or {}),
        nodes=tuple((obj.get("status") or {}).get("nodes") or ()),
    )


def label_selector(selector: Mapping[str, str]) -> str:
    return ",".join(f"{k}={selector[k]}" for k in sorted(selector))


def _labels(node: Mapping[str, Any]) -> dict[str, str]:
    return dict((node.get("metadata") or {}).get("labels") or {})


async def reconcile_nodes(p: ComputePass) -> Result:
    selected: dict[str, dict[str, str]] = {}
    held: dict[str, dict[str, str] | None] = {}
    cache = p.node_cache if p.node_cache is not None and p.node_cache.has_synced else None
    try:
        if not p.deleting:
            if cache is not None:
                items = cache.list(None, p.pool.spec.node_selector)
            else:
                listed = await p.kube.list(NODES, label_selector=label_selector(p.pool.spec.node_selector))
                items = listed.get("items") or []
            selected = {n["metadata"]["name"]: _labels(n) for n in items}
        for entry in p.nodes:
            name = entry["name"]
            if entry.get("phase") == nodeplan.CONFLICT or name in selected:
                continue
            known = cache.get(name) if cache is not None else None
            if known is not None:
                held[name] = _labels(known)
                continue
            try:
                held[name] = _labels(await p.kube.get(NODES, name))
            except errors.NotFound:
                held[name] = None  # gone from the cluster
    except errors.Forbidden as exc:
        p.set(COND, False, "NodesForbidden", f"the operator may not read Nodes: {exc}")
        return Result(requeue_after=p.settings.intervals.wait)
    except errors.KubeError as exc:
        p.set(COND, False, "NodeListError", f"reading Nodes: {exc}")
        raise
    siblings = [s for s in p.pools(p.namespace, p.nova_name) if s["metadata"]["name"] != p.name]
    p.siblings = siblings
    own = nodeplan.Pool(
        name=p.name,
        created=str(p.cr["metadata"].get("creationTimestamp") or ""),
        deleting=p.deleting,
        selector=p.pool.spec.node_selector,
        nodes=tuple(p.nodes),
    )
    # Every sibling is a rival: pools on target clusters are out of scope, so all share this cluster.
    plan = nodeplan.plan(own, selected=selected, held_nodes=held, rivals=[as_pool(s) for s in siblings])
    p.plan = plan
    p.status["nodes"] = plan.nodes
    for node, holder in plan.new_conflicts:
        await p.emit(
            "Warning",
            "NodeConflict",
            f"node {node} is held by NovaCompute {p.namespace}/{holder}; this pool runs no pod there",
        )
    _condition(p, selected, plan)
    return Result()


def _condition(p: ComputePass, selected: Mapping[str, Object], plan: nodeplan.Plan) -> None:
    if not selected and not plan.nodes:
        p.set(
            COND, False, "NoMatchingNodes", "no node matches the pool's nodeSelector and the pool holds none"
        )
        return
    conflicts = [e for e in plan.nodes if e["phase"] == nodeplan.CONFLICT]
    if conflicts:
        held_by = ", ".join(f"{e['name']} (held by {e.get('conflictsWith', '')})" for e in conflicts)
        p.set(COND, False, "NodeConflict", f"nodes held by another pool of this Nova: {held_by}")
        return
    leaving = sum(1 for e in plan.nodes if e["phase"] in (nodeplan.DRAINING, nodeplan.RELEASING))
    p.set(COND, True, "NodesResolved", f"{len(selected)} nodes selected, {leaving} leaving")
