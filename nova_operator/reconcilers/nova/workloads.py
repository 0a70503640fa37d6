"""Steps 7-10, the four non-API workloads (reconciler.md §4.7): Conductor, Scheduler, Metadata, ConsoleProxy.

One function shape for all four: apply the Deployment (and the Service of metadata and the
console proxy), then set the role's condition True when the Deployment is available, else
False ``WaitingFor<Role>`` with a **zero result**: the owned-Deployment watch wakes the CR as
the rollout progresses, and only the API step requeues. During an upgrade's
``RollingUpdate`` phase each role requeues 10 s until it is fully rolled out onto the new
image, which serialises the roll. The console proxy, while disabled, deletes its Deployment
and Service and reports ``ConsoleProxyDisabled``.
"""

from __future__ import annotations

from typing import Final

from nova_operator import conditions, intervals, naming
from nova_operator.decisions import pod_start
from nova_operator.decisions.readiness import (
    deployment_available,
    deployment_rolled_out,
    first_container_image,
)
from nova_operator.kube.resources import DEPLOYMENTS, PODS, SERVICES
from nova_operator.naming import Component
from nova_operator.pipeline import all_in_order
from nova_operator.reconcilers import stuck_pods
from nova_operator.reconcilers.nova.context import PassContext
from nova_operator.reconcilers.priority import missing_priority_class
from nova_operator.renderers import service, workload
from nova_operator.runtime.request import Result

CONSOLE_PROXY_DISABLED: Final = "ConsoleProxyDisabled"

_ROLES: Final = {
    Component.CONDUCTOR: (conditions.CONDUCTOR_READY, "ConductorReady", "WaitingForConductor"),
    Component.SCHEDULER: (conditions.SCHEDULER_READY, "SchedulerReady", "WaitingForScheduler"),
    Component.METADATA: (conditions.METADATA_READY, "MetadataReady", "WaitingForMetadata"),
    Component.NOVNCPROXY: (conditions.CONSOLE_PROXY_READY, "ConsoleProxyReady", "WaitingForConsoleProxy"),
}
_WITH_SERVICE: Final = (Component.METADATA, Component.NOVNCPROXY)
_SPEC_FIELDS: Final = {
    Component.CONDUCTOR: "conductor",
    Component.SCHEDULER: "scheduler",
    Component.METADATA: "metadata",
    Component.NOVNCPROXY: "consoleProxy",
}


async def reconcile_role(ctx: PassContext, component: Component) -> Result:
    condition, ready, waiting = _ROLES[component]
    desired = workload.deployment(ctx.nova, component, ctx.workload_inputs())
    if (
        missing := await missing_priority_class(
            ctx.kube,
            ctx.cached(DEPLOYMENTS, desired["metadata"]["name"]),
            desired,
            f"spec.{_SPEC_FIELDS[component]}.deployment.priorityClassName",
        )
    ) is not None:
        ctx.set(condition, False, waiting, missing)
        return Result(requeue_after=intervals.DEPLOYMENT_POLL)  # PriorityClasses are not watched: poll
    applies = [ctx.ensure(desired)]
    if component in _WITH_SERVICE:
        applies.append(ctx.ensure(service.service(ctx.nova, component)))
    live = (await all_in_order(*applies))[0]  # the Service needs nothing of the Deployment: sent at once
    name = live["metadata"]["name"]
    pods = stuck_pods.of_deployment(ctx.caches.get(PODS), live)  # one that cannot start is named
    if ctx.status.get("upgradePhase") == "RollingUpdate" and not (
        deployment_rolled_out(live) and first_container_image(live) == workload.image_ref(ctx.nova)
    ):
        message = pod_start.annotate(f"Deployment {name} is rolling out the upgraded image", pods)
        ctx.set(condition, False, waiting, message)
        return Result(requeue_after=intervals.DEPLOYMENT_POLL)
    if not deployment_available(live):
        message = pod_start.annotate(f"Deployment {name} is not available yet", pods)
        ctx.set(condition, False, waiting, message)
        return Result()
    ctx.set(condition, True, ready, f"Deployment {name} is available")
    return Result()


async def reconcile_conductor(ctx: PassContext) -> Result:
    return await reconcile_role(ctx, Component.CONDUCTOR)


async def reconcile_scheduler(ctx: PassContext) -> Result:
    return await reconcile_role(ctx, Component.SCHEDULER)


async def reconcile_metadata(ctx: PassContext) -> Result:
    return await reconcile_role(ctx, Component.METADATA)


async def reconcile_console_proxy(ctx: PassContext) -> Result:
    if ctx.nova.spec.console_proxy.enabled:
        return await reconcile_role(ctx, Component.NOVNCPROXY)
    name = naming.deployment_name(ctx.name, Component.NOVNCPROXY)
    await ctx.remove(DEPLOYMENTS, name)
    await ctx.remove(SERVICES, name)
    ctx.set(conditions.CONSOLE_PROXY_READY, True, CONSOLE_PROXY_DISABLED, "The console proxy is disabled")
    return Result()
