"""Issue 13 item 4: a child the API server refuses ends in its step's condition, and the pass goes on.

A toleration with ``tolerationSeconds`` and an effect other than ``NoExecute`` is admitted by
the Nova CRD but refused by the Deployment API. On 3c18ab1 the Scheduler step raised out of
every pass: no condition, and nothing after it (metadata, console proxy, API Deployments, the
archive CronJob, the group) was ever applied.
"""

from __future__ import annotations

import pytest

from nova_operator.kube import Kube
from nova_operator.kube.resources import CRONJOBS, DEPLOYMENTS, NOVAS
from tests.integration.nova.inputs import BAD_TOLERATION, cond, create_inputs, nova_body

from .conftest import Operator, Simulator, wait_for  # type: ignore[import-not-found]

pytestmark = pytest.mark.integration


async def test_a_refused_deployment_is_its_steps_condition_and_the_rest_still_converges(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    await create_inputs(admin, ns)
    body = nova_body(
        scheduler={"deployment": {"replicas": 1, "tolerations": [BAD_TOLERATION]}},
        dbArchive={"schedule": "15 3 * * *"},
    )
    await admin.create(NOVAS, body, ns)

    def settled(nova: dict[str, object]) -> bool:
        later = (
            "ConductorReady",
            "MetadataReady",
            "DeploymentReady",
            "DBArchiveReady",
            "NovaAPIReady",
            "NetworkPolicyReady",
        )
        return cond(nova, "SchedulerReady").get("reason") == "ChildRejected" and all(
            cond(nova, c).get("status") == "True" for c in later
        )

    nova = await wait_for(lambda: admin.get(NOVAS, "nova", ns), settled, within=90)
    scheduler = cond(nova, "SchedulerReady")
    assert scheduler["status"] == "False"
    assert "tolerationSeconds" in scheduler["message"] or "NoExecute" in scheduler["message"], scheduler
    assert scheduler["observedGeneration"] == nova["metadata"]["generation"]
    # what does not depend on the scheduler went on
    for name in ("nova", "nova-metadata", "nova-conductor"):
        await admin.get(DEPLOYMENTS, name, ns)
    await admin.get(CRONJOBS, "nova-db-archive", ns)
    for cond_type in ("ConductorReady", "MetadataReady"):
        assert cond(nova, cond_type).get("status") == "True", (cond_type, nova["status"])
    assert cond(nova, "Ready").get("status") == "False"

    # the user fixes the spec: the scheduler rolls out, no restart needed
    fixed = {**BAD_TOLERATION, "effect": "NoExecute"}
    await admin.patch(NOVAS, "nova", {"spec": {"scheduler": {"deployment": {"tolerations": [fixed]}}}}, ns)
    await wait_for(
        lambda: admin.get(NOVAS, "nova", ns), lambda n: cond(n, "SchedulerReady").get("status") == "True", 90
    )
    await admin.get(DEPLOYMENTS, "nova-scheduler", ns)
