"""Step DaemonSet (condition DaemonSetReady): the per-pool workload (§9).

Readiness is judged from the server's copy (the apply answer, or the cached object when
the apply was skipped), never from the rendered manifest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nova_operator import apply, conditions, ownership
from nova_operator.decisions import pod_start
from nova_operator.kube import errors
from nova_operator.kube.owners import controlled_by
from nova_operator.kube.resources import DAEMONSETS, PODS
from nova_operator.ownership import CHILD_OWNED_BY_ANOTHER
from nova_operator.reconcilers import stuck_pods
from nova_operator.reconcilers.compute.context import ComputePass
from nova_operator.renderers import compute_pool
from nova_operator.runtime.request import Result

COND = conditions.DAEMONSET_READY


def rolled_out(ds: Mapping[str, Any]) -> bool:
    """Observed, every scheduled pod updated and ready; nothing scheduled counts as ready."""
    status = ds.get("status") or {}
    generation = int((ds.get("metadata") or {}).get("generation") or 0)
    desired = int(status.get("desiredNumberScheduled") or 0)
    updated = int(status.get("updatedNumberScheduled") or 0)
    ready = int(status.get("numberReady") or 0)
    if int(status.get("observedGeneration") or 0) != generation:
        return False
    return desired == 0 or (ready == updated and updated == desired)


def _marks(p: ComputePass) -> dict[str, str]:
    """The labels of every DaemonSet a pool renders (an orphan carrying them is the pool's)."""
    labels = compute_pool.labels(p.name)
    return {k: v for k, v in labels.items() if k != compute_pool.COMPONENT_LABEL}


async def _current(p: ComputePass, name: str) -> dict[str, Any] | None:
    """The DaemonSet of ``name`` whoever holds it: the cache keeps only managed ones, so one GET on a miss."""
    cached = p.cached(DAEMONSETS, p.namespace, name)
    if cached is not None:
        return cached
    try:
        return await p.kube.get(DAEMONSETS, name, p.namespace)
    except errors.NotFound:
        return None


async def reconcile_daemon_set(p: ComputePass) -> Result:
    plan = p.plan
    inputs = compute_pool.PoolInputs(
        image=p.image,
        config_map=p.config_map,
        contract_secret=p.contract_secret,
        contract_hash=p.contract_hash,
        secret_config_secret=p.secret_config_secret,
        secret_config_keys=p.secret_config_keys,
        secret_config_hash=p.secret_config_hash,
        https_ca_hash=p.https_ca_hash,
        checked=p.settings.secret_refs is not None,  # the pool's copy of its spec.tls bundle
        excluded=plan.excluded if plan else frozenset(),
        keep_pods=plan.keep_pods if plan else frozenset(),
        deleting=p.deleting,
        release=str(((p.nova or {}).get("status") or {}).get("installedRelease") or ""),
        pull_policy=compute_pool.pull_policy(
            p.image,
            policy=p.pool.spec.image.pull_policy if p.pool.spec.image is not None else None,
            operator_default=p.settings.default_pull_policy,
        ),
    )
    desired = compute_pool.daemonset(p.pool, inputs)
    name = compute_pool.daemonset_name(p.name)
    try:
        if desired is None:
            await _remove(p, name)
            return Result()
        cached = await _current(p, name)
        try:  # a DaemonSet of that name the pool does not hold is neither taken over nor changed
            ownership.refuse_unless_ours(cached, p.cr, _marks(p), kind="DaemonSet")
        except ownership.ChildOwnedByAnother as exc:
            p.set(COND, False, CHILD_OWNED_BY_ANOTHER, str(exc))
            return Result(requeue_after=exc.requeue_after)
        live = await apply.apply(p.kube, desired, owner=p.cr, cached=cached, ref=DAEMONSETS)
    except errors.KubeError as exc:
        p.set(COND, False, "DaemonSetError", f"DaemonSet {p.namespace}/{name}: {exc}")
        raise
    p.daemonset_rendered = True
    status = live.get("status") or {}
    desired_count = int(status.get("desiredNumberScheduled") or 0)
    ready_count = int(status.get("numberReady") or 0)
    p.status["desiredNumberScheduled"] = desired_count
    p.status["numberReady"] = ready_count
    if not rolled_out(live):
        waiting = (
            f"Waiting for the nova-compute DaemonSet: {ready_count} of {desired_count} nodes run a ready pod"
        )
        # a pod of this DaemonSet the kubelet cannot start is named (``decisions.pod_start``)
        listed = p.listed(PODS, p.namespace, compute_pool.selector_labels(p.name)) or []
        pods = stuck_pods.owned_by(listed, (live.get("metadata") or {}).get("uid"))
        p.set(COND, False, "DaemonSetProgressing", pod_start.annotate(waiting, pods))
        return Result()  # not a wait on an input: aggregates and the drain go on
    p.status["installedImage"] = p.image
    p.set(
        COND, True, "DaemonSetReady", f"The nova-compute DaemonSet runs a ready pod on {desired_count} nodes"
    )
    return Result()


async def _remove(p: ComputePass, name: str) -> None:
    """Deleting, and no Draining node left to hold: remove the DaemonSet if this CR owns it."""
    try:
        live = await p.kube.get(DAEMONSETS, name, p.namespace)
    except errors.NotFound:
        live = None
    if live is not None and controlled_by(live, p.cr["metadata"]["uid"]):
        await apply.delete_if_present(p.kube, DAEMONSETS, name, p.namespace)
    p.status["desiredNumberScheduled"] = 0
    p.status["numberReady"] = 0
    p.set(COND, True, "DaemonSetReady", "no node is selected or held; the nova-compute DaemonSet was removed")
