"""The workload steps (scheduler, conductor, metadata, console proxy) on the real API server: a
named PriorityClass that does not exist is reported and the Deployment is not rolled.
"""

from __future__ import annotations

from nova_operator import conditions, intervals
from nova_operator.kube import Kube
from nova_operator.kube.resources import (
    DEPLOYMENTS,
    PRIORITY_CLASSES,
    ResourceRef,
)
from nova_operator.reconcilers.nova import (
    workloads,
)
from tests.integration.nova.passes import make_ctx, stored_nova
from tests.integration.nova.reasons_kit import (
    make,
    priority_class,
    reason,
    with_config,
    written,
)
from tests.integration.nova.requests import Recorder


async def test_a_missing_priority_class_is_reported_and_the_deployment_is_not_rolled(
    admin: Kube, ours: Recorder, namespace: str, cluster: list[tuple[ResourceRef, str]]
) -> None:
    critical = f"nova-critical-{namespace}"
    spec = {"scheduler": {"deployment": {"replicas": 1, "priorityClassName": critical}}}
    nova = await stored_nova(admin, namespace, **spec)
    ctx = await with_config(make_ctx(ours, nova))
    assert (await workloads.reconcile_scheduler(ctx)).requeue_after == intervals.DEPLOYMENT_POLL
    status, why, message = reason(ctx, conditions.SCHEDULER_READY)
    assert (status, why) == ("False", "WaitingForScheduler")
    assert message.startswith(
        f"spec.scheduler.deployment.priorityClassName: PriorityClass {critical} does not exist"
    )
    assert [c for c in written(ours) if c[1] == str(DEPLOYMENTS)] == []  # nothing rolled
    await make(admin, cluster, PRIORITY_CLASSES, priority_class(critical, 1000))
    await workloads.reconcile_scheduler(ctx)
    applied = await admin.get(DEPLOYMENTS, "nova-scheduler", namespace)
    assert applied["spec"]["template"]["spec"]["priorityClassName"] == critical
    # once the live Deployment runs with the class, a pass does not look it up again
    ctx = await with_config(make_ctx(ours, nova, applied))
    calls = len(ours.calls)
    await workloads.reconcile_scheduler(ctx)
    assert not [c for c in ours.calls[calls:] if c[1] == str(PRIORITY_CLASSES)]
