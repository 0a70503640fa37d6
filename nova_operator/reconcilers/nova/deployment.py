"""Step 11, ``Deployment`` (``DeploymentReady``): API Deployment, Service, PDB; ``status.endpoint`` (§4.8).

The only workload step that requeues (10 s) on a Deployment that is not available yet, so
the concurrent group runs only once the API serves. During ``RollingUpdate`` it also waits for
every role to be fully rolled out onto the new image, then flips the phase to
``Contracting`` (requeue 1 s, endpoint not stamped on that pass).
"""

from __future__ import annotations

from typing import Final

from nova_operator import conditions, intervals, naming
from nova_operator.decisions.readiness import (
    deployment_available,
    deployment_rolled_out,
    first_container_image,
)
from nova_operator.kube.resources import DEPLOYMENTS
from nova_operator.naming import Component
from nova_operator.pipeline import all_in_order
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


def _roles_rolled_out(ctx: PassContext) -> bool:
    roles = [Component.CONDUCTOR, Component.SCHEDULER, Component.METADATA]
    if ctx.nova.spec.console_proxy.enabled:
        roles.append(Component.NOVNCPROXY)
    image = workload.image_ref(ctx.nova)
    for role in roles:
        live = ctx.cached(DEPLOYMENTS, naming.deployment_name(ctx.name, role))
        if live is None or not deployment_rolled_out(live) or first_container_image(live) != image:
            return False
    return True


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
        ctx.set(CONDITION, False, WAITING, f"Deployment {name} is not available yet")
        return Result(requeue_after=intervals.DEPLOYMENT_POLL)
    if ctx.status.get("upgradePhase") == "RollingUpdate":
        if not (deployment_rolled_out(live) and _roles_rolled_out(ctx)):
            ctx.set(CONDITION, False, WAITING, "waiting for every role to roll out before contracting")
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
