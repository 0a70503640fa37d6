"""A failed compute API call still looks again soon for a join whose pod turned Ready (issue 41).

§19 requeues every failed Keystone or Nova call after 30 s. A pool whose node's nova-compute pod has
just turned Ready waits on that node's service, which registers whatever the failed call was (the
API not answering yet beside a bring-up): the pass keeps the pod's recheck (``pool_pods.recheck``)
when it is sooner. Without such a pod the requeue stays the spec's.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

import pytest

from nova_operator.kube.resources import PODS, ResourceRef
from nova_operator.kube.types import Object
from nova_operator.models.novacompute import NovaCompute
from nova_operator.openstack import ComputeAPIError
from nova_operator.reconcilers.compute.aggregates import reconcile_aggregates
from nova_operator.reconcilers.compute.context import ComputePass, ComputeSettings
from nova_operator.reconcilers.compute.services import reconcile_services
from nova_operator.renderers import compute_pool

from .test_pool_pods import NOW, _stamp, pod

CR: Object = {
    "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
    "kind": "NovaCompute",
    "metadata": {"name": "pool-a", "namespace": "ns", "uid": "uid-a", "generation": 1},
    "spec": {"novaRef": {"name": "nova"}, "nodeSelector": {"pool": "a"}},
}
ACTIVE: Object = {"name": "n2", "phase": "Active", "zone": "az1", "serviceID": "s2", "serviceState": "up"}


class Unanswered:
    """The compute API not answering: every call fails."""

    def __init__(self) -> None:
        self.calls = 0

    async def _fail(self) -> None:
        self.calls += 1
        raise ComputeAPIError("GET /os-services: HTTP 0 no answer")

    async def list_services(self) -> object:
        await self._fail()
        return None

    async def list_aggregates(self) -> object:
        await self._fail()
        return None


def make_pass(
    ledger: list[Object], pods: list[Object], nova: Object | None = None
) -> tuple[ComputePass, Unanswered]:
    def listed(ref: ResourceRef, namespace: str, labels: Mapping[str, str]) -> list[Object] | None:
        assert (ref, namespace, dict(labels)) == (PODS, "ns", compute_pool.selector_labels("pool-a"))
        return pods

    p = ComputePass(
        kube=None,  # type: ignore[arg-type]
        events=None,  # type: ignore[arg-type]
        settings=ComputeSettings(),
        cr=CR,
        pool=NovaCompute.model_validate(CR),
        status={"nodes": [dict(e) for e in ledger]},
        pools=lambda ns, nova: [],
        listed=listed,
        now=NOW,
    )
    p.nova = nova
    api = Unanswered()
    p._client = api  # type: ignore[assignment]
    return p, api


def _reason(p: ComputePass, cond: str) -> str:
    return next(str(c["reason"]) for c in p.conditions if c["type"] == cond)


JOINING: Object = {"name": "n1", "phase": "Pending", "zone": "az1"}
READY_8S_AGO = [pod("n1", since=NOW - timedelta(seconds=8))]


@pytest.mark.parametrize(
    ("step", "cond"), [(reconcile_services, "ServicesReady"), (reconcile_aggregates, "AggregatesReady")]
)
async def test_a_failed_call_beside_a_join_with_a_ready_pod_looks_again_at_the_pods_recheck(
    step: object, cond: str
) -> None:
    p, api = make_pass([JOINING, ACTIVE], READY_8S_AGO)
    result = await step(p)  # type: ignore[operator]
    assert api.calls == 1
    assert _reason(p, cond) == "ComputeAPIError"
    assert result.requeue_after == 2.0  # a quarter of the pod's 8 s since Ready, not 30 s


@pytest.mark.parametrize("step", [reconcile_services, reconcile_aggregates])
@pytest.mark.parametrize(
    ("ledger", "pods"),
    [
        ([ACTIVE], READY_8S_AGO),  # no join: a settled pool keeps the spec's 30 s
        ([JOINING, ACTIVE], []),  # a join whose pod is not there yet
        ([JOINING, ACTIVE], [pod("n1", ready=False)]),  # nor Ready
        ([{**JOINING, "serviceID": "s1"}, ACTIVE], READY_8S_AGO),  # registered: waits on its mapping
        ([JOINING, ACTIVE], [pod("n1", since=NOW - timedelta(seconds=600))]),  # Ready long ago
    ],
)
async def test_a_failed_call_without_a_fresh_join_keeps_the_specs_30_s(
    step: object, ledger: list[Object], pods: list[Object]
) -> None:
    p, _ = make_pass(ledger, pods)
    result = await step(p)  # type: ignore[operator]
    assert result.requeue_after == 30.0


@pytest.mark.parametrize("step", [reconcile_services, reconcile_aggregates])
async def test_a_pod_ready_before_the_nova_counts_from_the_novas_ready(step: object) -> None:
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": _stamp(NOW - timedelta(seconds=8))}
    nova: Object = {"status": {"conditions": [ready]}}
    long_ago = [pod("n1", since=NOW - timedelta(seconds=600))]
    p, _ = make_pass([JOINING, ACTIVE], long_ago, nova)
    result = await step(p)  # type: ignore[operator]
    assert result.requeue_after == 2.0
