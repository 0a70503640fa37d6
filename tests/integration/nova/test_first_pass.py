"""A new Nova's first pass does the work (issue 27): the pass that adds the finalizer goes on.

The Nova's MariaDB is not Ready, so the pipeline stops at the Database step (``ClusterNotReady``,
requeue 30 s) after the Secret, ConfigMap and compute-contract steps have written their children:
within the 30 s nothing else wakes the Nova (the echoes of its own writes do not, nor does the
finalizer patch, nor its status write), so the pass count says whether one pass did it all. With
the specified requeue after the finalizer there were two: the finalizer alone, then the work after
1 s, in the queue's timer lane behind every other key's events.
"""

from __future__ import annotations

from nova_operator.kube import Kube
from nova_operator.kube.resources import CONFIGMAPS, MARIADBS, NOVAS, SECRETS
from nova_operator.reconcilers.nova.reconciler import FINALIZER
from tests.integration.nova.inputs import cond, create_inputs, nova_body

from .conftest import Operator, wait_for  # type: ignore[import-not-found]


def passes_by_result(operator: Operator) -> dict[str, float]:
    found: dict[str, float] = {}
    for metric in operator.metrics.registry.collect():
        for s in metric.samples:
            if s.name == "nova_operator_controller_reconcile_total" and s.labels.get("controller") == "nova":
                found[s.labels["result"]] = found.get(s.labels["result"], 0.0) + s.value
    return {k: v for k, v in found.items() if v}


async def test_the_pass_that_adds_the_finalizer_writes_the_children_and_the_status(
    admin: Kube, operator: Operator, namespace: str
) -> None:
    ns = namespace
    await create_inputs(admin, ns)
    await admin.patch_status(MARIADBS, "mariadb", {"status": {"conditions": []}}, ns)  # not Ready
    await admin.create(NOVAS, nova_body(), ns)

    def waiting_for_the_cluster(nova: dict[str, object]) -> bool:
        return cond(nova, "DatabaseReady").get("reason") == "ClusterNotReady"

    nova = await wait_for(lambda: admin.get(NOVAS, "nova", ns), waiting_for_the_cluster, within=30)
    assert FINALIZER in nova["metadata"]["finalizers"]
    assert cond(nova, "SecretsReady")["status"] == "True"
    assert cond(nova, "ComputeConfigReady")["status"] == "True"
    for name in ("nova-api-db-connection", "nova-db-connection", "nova-transport-url", "nova-compute-config"):
        await admin.get(SECRETS, name, ns)  # NotFound would fail the test
    configs = (await admin.list(CONFIGMAPS, ns, label_selector="cobaltcore.c5c3.io/config-base")).get("items")
    assert configs, "no config ConfigMap written"
    assert passes_by_result(operator) == {"requeue_after": 1.0}  # one pass, ending in the 30 s wait
