"""The Deployment step (the compute API, ``DeploymentReady``) on the real API server: a named
PriorityClass of the API block that does not exist waits the step.
"""

from __future__ import annotations

from nova_operator import conditions, intervals
from nova_operator.kube import Kube
from nova_operator.reconcilers.nova import (
    deployment,
)
from tests.integration.nova.passes import make_ctx, stored_nova
from tests.integration.nova.reasons_kit import (
    reason,
    with_config,
)
from tests.integration.nova.requests import Recorder


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
