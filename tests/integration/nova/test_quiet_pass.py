"""A pass over a converged Nova sends no request of any verb (issue 15): reads come from the caches.

Counted by the operator's Kube seam (``nova_operator_api_requests_total`` by verb and resource),
which sees every request the operator sends; leader election is off in this tier, so there is
no Lease traffic to set aside. The Nova uses a managed bus (``messaging.clusterRef``), so the
RabbitmqCluster and its default-user Secret are read on every pass too.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from nova_operator.kube import Kube
from nova_operator.kube.errors import NotFound
from nova_operator.kube.resources import NOVAS, SERVICES
from nova_operator.reconcilers.nova.context import NovaOptions
from nova_operator.reconcilers.nova.controller import probe_namespaces, watches_rabbitmq
from tests.integration.nova.inputs import (
    create_bus,
    create_inputs,
    grown,
    is_ready,
    nova_body,
    requests_by_verb,
    settled,
)

from .conftest import Operator, Simulator, wait_for  # type: ignore[import-not-found]


def passes(operator: Operator) -> float:
    value = 0.0
    for metric in operator.metrics.registry.collect():
        for s in metric.samples:
            if s.name == "nova_operator_controller_reconcile_total" and s.labels.get("controller") == "nova":
                value += s.value
    return value


async def assert_quiet(admin: Kube, operator: Operator, simulator: Simulator, namespace: str) -> None:
    """Converge a managed-bus Nova, then 5 forced passes and one watch wake-up send no request at all."""
    ns = namespace
    await create_inputs(admin, ns, skip=("bus",))
    await create_bus(admin, ns)
    await admin.create(NOVAS, nova_body(messaging={"clusterRef": {"name": "rabbitmq"}}), ns)
    await wait_for(lambda: admin.get(NOVAS, "nova", ns), is_ready, within=60)
    simulator.hold_jobs = True
    await settled(operator)

    before = requests_by_verb(operator.metrics)
    for _ in range(5):  # passes the way a requeue or a child's event runs them
        await operator.force_pass("nova")
    forced = grown(before, requests_by_verb(operator.metrics))

    # a wake-up through the watch: the user touches an annotation; the controller's own worker runs it
    started = passes(operator)
    patch = {"metadata": {"annotations": {"example.org/touched": "yes"}}}
    await admin.patch(NOVAS, "nova", patch, ns)
    await wait_for(lambda: asyncio.sleep(0, passes(operator)), lambda n: n > started, within=10)
    await settled(operator)
    woken = grown(before, requests_by_verb(operator.metrics))

    assert forced == {}, f"forced passes over a converged Nova sent requests: {forced}"
    assert woken == {}, f"a wake-up over a converged Nova sent requests: {woken}"
    nova = await admin.get(NOVAS, "nova", ns)
    assert is_ready(nova)
    print(f"requests in 5 forced passes and one wake-up: {sum(woken.values()):.0f}")


async def test_a_pass_over_a_converged_nova_sends_no_request(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    await assert_quiet(admin, operator, simulator, namespace)


@pytest.mark.parametrize("operator", [{"namespaced": True, "rabbitmq_in_namespaces": True}], indirect=True)
async def test_with_namespace_a_converged_pass_sends_no_request_once_the_namespace_probe_allows_watching(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    # the start-up probe of a --namespace install, against this API server with the operator's token
    probed = await probe_namespaces(operator.kube, NovaOptions(namespaced=True), [namespace])
    assert watches_rabbitmq(probed)
    await assert_quiet(admin, operator, simulator, namespace)


async def test_a_child_the_pass_recreates_wakes_no_second_pass_with_its_echo(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    """A deleted Service wakes its Nova; the pass recreates it, and the Added event of that very write
    (the watch's echo of what the pass already knows) starts no pass of its own (``runtime.echoes``)."""
    ns = namespace
    await create_inputs(admin, ns)
    await admin.create(NOVAS, nova_body(), ns)
    await wait_for(lambda: admin.get(NOVAS, "nova", ns), is_ready, within=60)
    simulator.hold_jobs = True
    await settled(operator)
    old = await admin.get(SERVICES, "nova-metadata", ns)
    started = passes(operator)

    async def service() -> dict[str, Any] | None:
        try:
            return await admin.get(SERVICES, "nova-metadata", ns)
        except NotFound:
            return None

    await admin.delete(SERVICES, "nova-metadata", ns)
    new = await wait_for(
        service, lambda s: s is not None and s["metadata"]["uid"] != old["metadata"]["uid"], within=20
    )
    await settled(operator)
    await asyncio.sleep(1.0)  # an echo pass would have come by now

    assert passes(operator) - started == 1, "the recreated Service's own Added event started a second pass"
    cached = operator.controller.reconciler.caches[SERVICES].get("nova-metadata", ns)  # type: ignore[attr-defined]
    assert cached is not None
    assert (
        cached["metadata"]["uid"] == new["metadata"]["uid"]
    )  # the event did arrive: only the pass was left out
    assert is_ready(await admin.get(NOVAS, "nova", ns))
