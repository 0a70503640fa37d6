"""Issue 13 item 5: a requested NetworkPolicy exists before the first pod-creating object, and stays.

On 3c18ab1 the policy was a member of the final group: while the db-sync Job ran (the pass
stopped at the Database step), and whenever any earlier step failed, the Nova ran without it.
"""

from __future__ import annotations

import pytest

from nova_operator.kube import Kube
from nova_operator.kube.resources import JOBS, NETWORK_POLICIES, NOVAS
from tests.integration.nova.inputs import BAD_TOLERATION, cond, create_inputs, nova_body

from .conftest import Operator, Simulator, wait_for  # type: ignore[import-not-found]

pytestmark = pytest.mark.integration

POLICY = {"ingress": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "gateway"}}}]}


async def test_the_policy_precedes_the_first_job_and_survives_later_failures(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    simulator.hold_jobs = True  # the pass stops at the Database step while db-sync runs
    await create_inputs(admin, ns)
    await admin.create(NOVAS, nova_body(networkPolicy=POLICY), ns)
    job = await wait_for(lambda: admin.list(JOBS, ns), lambda jobs: bool(jobs["items"]), within=60)
    first_job = min(int(j["metadata"]["resourceVersion"]) for j in job["items"])
    policy = await admin.get(NETWORK_POLICIES, "nova", ns)
    # etcd revisions are global: the policy was written before the first Job (neither changed since)
    assert int(policy["metadata"]["resourceVersion"]) < first_job
    # reported while db-sync still runs (a progress report may be held a moment: docs/README.md)
    nova = await wait_for(
        lambda: admin.get(NOVAS, "nova", ns),
        lambda n: cond(n, "NetworkPolicyReady").get("status") == "True",
        within=30,
    )
    assert cond(nova, "DatabaseReady").get("status") != "True"

    # a later step's child is refused: the policy stays and stays reported
    simulator.hold_jobs = False
    await admin.patch(
        NOVAS,
        "nova",
        {"spec": {"scheduler": {"deployment": {"replicas": 1, "tolerations": [BAD_TOLERATION]}}}},
        ns,
    )
    nova = await wait_for(
        lambda: admin.get(NOVAS, "nova", ns),
        lambda n: cond(n, "SchedulerReady").get("reason") == "ChildRejected",
        within=90,
    )
    assert cond(nova, "NetworkPolicyReady").get("status") == "True"
    await admin.get(NETWORK_POLICIES, "nova", ns)
    egress = (await admin.get(NETWORK_POLICIES, "nova", ns))["spec"].get("egress") or []
    assert any(p.get("port") == 5672 for rule in egress for p in rule.get("ports") or []), egress
