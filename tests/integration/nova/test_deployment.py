"""The Deployment step (the compute API, ``DeploymentReady``) on the real API server: a named
PriorityClass of the API block that does not exist waits the step; a pod of the API Deployment that
cannot start is named in its condition.
"""

from __future__ import annotations

from nova_operator import conditions, intervals
from nova_operator.kube import Kube
from nova_operator.kube.resources import DEPLOYMENTS, PODS
from nova_operator.reconcilers.nova import (
    deployment,
)
from nova_operator.runtime.cache import Cache
from tests.integration.nova.passes import make_ctx, stored_nova
from tests.integration.nova.reasons_kit import (
    reason,
    with_config,
)
from tests.integration.nova.requests import Recorder
from tests.integration.stuck_pod import SECRET, stuck_pod


async def test_a_missing_priority_class_on_the_api_block_waits_its_step(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await stored_nova(
        admin, namespace, api={"deployment": {"replicas": 1, "priorityClassName": "gone"}}
    )
    ctx = await with_config(make_ctx(ours, nova))
    assert (await deployment.reconcile_deployment(ctx)).requeue_after == intervals.DEPLOYMENT_POLL
    status, why, message = reason(ctx, conditions.DEPLOYMENT_READY)
    assert (status, why) == ("False", "WaitingForDeployment")
    assert "spec.api.deployment.priorityClassName: PriorityClass gone does not exist" in message


async def test_an_api_pod_that_cannot_start_is_named_and_a_restated_wait_writes_the_same_text(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    """Issue 37 item 5: "not available yet" names a pod of the API Deployment that cannot start."""
    nova = await stored_nova(admin, namespace)
    ctx = await with_config(make_ctx(ours, nova))
    await deployment.reconcile_deployment(ctx)
    assert reason(ctx, conditions.DEPLOYMENT_READY)[2] == "Deployment nova is not available yet"
    api = await admin.get(DEPLOYMENTS, "nova", namespace)
    labels = api["spec"]["template"]["metadata"]["labels"]
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "nova-6c9b", "uid": "rs-uid"}
    await stuck_pod(
        admin, namespace, "nova-6c9b-zz9q1", labels=labels, owner=owner, reason="ImagePullBackOff"
    )
    messages = []
    for _ in range(2):  # the same pod state, two passes: the same message (no status churn)
        cache = Cache(str(PODS))
        for obj in (await admin.list(PODS, namespace))["items"]:
            cache.upsert(obj)
        ctx = await with_config(make_ctx(ours, nova, caches={PODS: cache}))
        assert (await deployment.reconcile_deployment(ctx)).requeue_after == intervals.DEPLOYMENT_POLL
        status, why, message = reason(ctx, conditions.DEPLOYMENT_READY)
        assert (status, why) == ("False", "WaitingForDeployment")
        messages.append(message)
    assert (
        messages[0]
        == messages[1]
        == (
            "Deployment nova is not available yet: pod nova-6c9b-zz9q1 cannot start: ImagePullBackOff "
            "(image ghcr.io/c5c3/nova:2026.1)"
        )
    )
    assert SECRET not in messages[0]
