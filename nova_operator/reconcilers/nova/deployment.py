"""Step 11, ``Deployment`` (``DeploymentReady``): API Deployment, Service, PDB; ``status.endpoint`` (§4.8).

The only workload step that requeues (10 s) on a Deployment that is not available yet, so
the concurrent group runs only once the API serves. During ``RollingUpdate`` it also waits for
every role to be fully rolled out onto the new image, then flips the phase to
``Contracting`` (requeue 1 s, endpoint not stamped on that pass).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from nova_operator import conditions, intervals, naming
from nova_operator.decisions import pod_start
from nova_operator.decisions.readiness import (
    deployment_available,
    deployment_rolled_out,
    first_container_image,
)
from nova_operator.kube.resources import DEPLOYMENTS, PODS
from nova_operator.kube.types import Object
from nova_operator.naming import Component
from nova_operator.pipeline import all_in_order
from nova_operator.reconcilers import stuck_pods
from nova_operator.reconcilers.nova.context import PassContext
from nova_operator.reconcilers.priority import missing_priority_class
from nova_operator.renderers import pdb, service, workload
from nova_operator.runtime.request import Result

CONDITION: Final = conditions.DEPLOYMENT_READY
READY: Final = "DeploymentReady"
WAITING: Final = "WaitingForDeployment"
ROLLOUT_COMPLETE_EVENT: Final = "DeploymentRolloutComplete"


def endpoint(ctx: PassContext) -> str:
    gateway = ctx.nova.spec.gateway
    if gateway is not None:
        return f"https://{gateway.hostname}/"
    return f"http://{ctx.name}.{ctx.namespace}.svc.cluster.local:8774"


def _roles(ctx: PassContext) -> list[Component]:
    roles = [Component.CONDUCTOR, Component.SCHEDULER, Component.METADATA]
    if ctx.nova.spec.console_proxy.enabled:
        roles.append(Component.NOVNCPROXY)
    return roles


def _roles_rolled_out(ctx: PassContext) -> bool:
    image = workload.image_ref(ctx.nova)
    for role in _roles(ctx):
        live = ctx.cached(DEPLOYMENTS, naming.deployment_name(ctx.name, role))
        if live is None or not deployment_rolled_out(live) or first_container_image(live) != image:
            return False
    return True


def _pods(ctx: PassContext, api: Mapping[str, Any], *, roles: bool = False) -> list[Object]:
    """The cached pods of the API Deployment (and, with ``roles``, of every role's): one that cannot
    start is named in the condition (``decisions.pod_start``)."""
    cache = ctx.caches.get(PODS)
    found = stuck_pods.of_deployment(cache, api)
    for role in _roles(ctx) if roles else ():
        found += stuck_pods.of_deployment(
            cache, ctx.cached(DEPLOYMENTS, naming.deployment_name(ctx.name, role))
        )
    return found


async def reconcile_deployment(ctx: PassContext) -> Result:
    desired = workload.deployment(ctx.nova, Component.API, ctx.workload_inputs())
    if (
        missing := await missing_priority_class(
            ctx.kube,
            ctx.cached(DEPLOYMENTS, desired["metadata"]["name"]),
            desired,
            "spec.api.deployment.priorityClassName",
        )
    ) is not None:
        ctx.set(CONDITION, False, WAITING, missing)
        return Result(requeue_after=intervals.DEPLOYMENT_POLL)
    # while autoscaling is set the HPA owns the count: hand the running one over, never reset it
    live, _, _ = await all_in_order(  # independent objects: sent at once
        ctx.ensure(desired, retain=(("spec", "replicas"),)),
        ctx.ensure(service.service(ctx.nova, Component.API)),
        ctx.ensure(pdb.pdb(ctx.nova)),
    )
    name = live["metadata"]["name"]
    if not deployment_available(live):
        message = pod_start.annotate(f"Deployment {name} is not available yet", _pods(ctx, live))
        ctx.set(CONDITION, False, WAITING, message)
        return Result(requeue_after=intervals.DEPLOYMENT_POLL)
    if ctx.status.get("upgradePhase") == "RollingUpdate":
        if not (deployment_rolled_out(live) and _roles_rolled_out(ctx)):
            message = "waiting for every role to roll out before contracting"
            ctx.set(CONDITION, False, WAITING, pod_start.annotate(message, _pods(ctx, live, roles=True)))
            return Result(requeue_after=intervals.DEPLOYMENT_POLL)
        ctx.status["upgradePhase"] = "Contracting"
        installed, target = ctx.status.get("installedRelease", ""), ctx.status.get("targetRelease", "")
        await ctx.emit(
            "Normal", ROLLOUT_COMPLETE_EVENT, f"rollout complete during upgrade {installed} → {target}"
        )
        ctx.set(CONDITION, True, READY, f"Deployment {name} is available")
        return Result(requeue_after=intervals.NEXT_PASS)
    ctx.status["endpoint"] = endpoint(ctx)
    ctx.set(CONDITION, True, READY, f"Deployment {name} is available")
    return Result()
