"""The workload steps (scheduler, conductor, metadata, console proxy) on the real API server: a
named PriorityClass that does not exist is reported and the Deployment is not rolled; a pod of the
Deployment that cannot start is named in the role's condition.
"""

from __future__ import annotations

from nova_operator import conditions, intervals, naming
from nova_operator.kube import Kube
from nova_operator.kube.resources import (
    DEPLOYMENTS,
    PODS,
    PRIORITY_CLASSES,
    ResourceRef,
)
from nova_operator.reconcilers.nova import (
    workloads,
)
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.request import Result
from tests.integration.nova.passes import make_ctx, stored_nova
from tests.integration.nova.reasons_kit import (
    make,
    priority_class,
    reason,
    with_config,
    written,
)
from tests.integration.nova.requests import Recorder
from tests.integration.stuck_pod import SECRET, stuck_pod


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


async def pods_cache(admin: Kube, namespace: str) -> Cache:
    """The pods the server holds in ``namespace``, as the Pod informer would hand them over."""
    cache = Cache(str(PODS))
    for obj in (await admin.list(PODS, namespace))["items"]:
        cache.upsert(obj)
    return cache


async def test_a_role_pod_that_cannot_start_is_named_in_the_roles_condition(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    """Issue 37 item 5: "not available yet" names a pod of the Deployment that cannot start."""
    nova = await stored_nova(admin, namespace)
    ctx = await with_config(make_ctx(ours, nova))
    assert await workloads.reconcile_conductor(ctx) == Result()
    assert reason(ctx, conditions.CONDUCTOR_READY) == (
        "False",
        "WaitingForConductor",
        "Deployment nova-conductor is not available yet",
    )
    deployment = await admin.get(DEPLOYMENTS, "nova-conductor", namespace)
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    replica_set = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "nova-conductor-5d8f",
        "uid": "rs-uid",
    }
    await stuck_pod(
        admin,
        namespace,
        "nova-conductor-5d8f-abcde",
        labels=labels,
        owner=replica_set,
        reason="CreateContainerConfigError",
        image=image,
    )
    # a pod of another Deployment (the scheduler's) that cannot start is not the conductor's
    other = {**labels, naming.COMPONENT_LABEL: "scheduler"}
    await stuck_pod(
        admin, namespace, "nova-conductor-0-other", labels=other, owner=None, reason="ErrImagePull"
    )
    ctx = await with_config(make_ctx(ours, nova, caches={PODS: await pods_cache(admin, namespace)}))
    assert await workloads.reconcile_conductor(ctx) == Result()
    status, why, message = reason(ctx, conditions.CONDUCTOR_READY)
    assert (status, why) == ("False", "WaitingForConductor")
    assert message == (
        "Deployment nova-conductor is not available yet: pod nova-conductor-5d8f-abcde cannot start: "
        f"CreateContainerConfigError (image {image})"
    )
    assert SECRET not in message
