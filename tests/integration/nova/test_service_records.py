"""The ServiceRecords step on the real API server with the fake compute API (issue 24, item 7).

The test plays what a bare control plane lacks: the kube-controller-manager (``Simulator``: a
Deployment's status; here also its pods, created and deleted as the ReplicaSets would) and each
scheduler and conductor process (a service record in the fake Nova under the pod's name, ``up``
while the pod runs, ``down`` once Nova would call it so). A rollout (an image tag change) and a
scale-down then leave the list with exactly the live pods' records; a nova-compute record and a
record of a host that is no pod of this Nova stay whatever their state.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from simcluster import FakeOpenStack

from nova_operator import conditions, intervals
from nova_operator.kube import Kube
from nova_operator.kube.errors import Invalid
from nova_operator.kube.resources import DEPLOYMENTS, NOVAS, PODS
from nova_operator.kube.types import Object
from tests.integration.nova import fake_openstack
from tests.integration.nova.inputs import (
    cond,
    create_inputs,
    events_of,
    is_ready,
    nova_body,
)

from .conftest import Operator, Simulator, wait_for  # type: ignore[import-not-found]

pytestmark = pytest.mark.parametrize("operator", [fake_openstack.STALE_SERVICES], indirect=True)


@pytest.fixture
async def fake(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeOpenStack]:
    # Nova calls a record down 60 s after its last heartbeat; the test says when, and the step's
    # 30 s looks at records still up are shortened to match
    monkeypatch.setattr(intervals, "SERVICE_RECORDS_WAIT", 0.5)
    async with fake_openstack.running() as f:
        yield f


class Pods:
    """The ReplicaSets' pods of one Nova and the service record each one's process registers."""

    def __init__(self, admin: Kube, fake: FakeOpenStack, ns: str) -> None:
        self.admin, self.fake, self.ns = admin, fake, ns
        self.running: dict[str, str] = {}  # pod name -> binary

    async def start(self, role: str, template_hash: str, *suffixes: str) -> list[str]:
        names = []
        for suffix in suffixes:
            name = f"nova-{role}-{template_hash}-{suffix}"
            labels = {
                "app.kubernetes.io/name": "nova",
                "app.kubernetes.io/instance": "nova",
                "app.kubernetes.io/managed-by": "nova-operator",
                "app.kubernetes.io/component": role,
                "pod-template-hash": template_hash,
            }
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "labels": labels},
                "spec": {"containers": [{"name": role, "image": "nova"}]},
            }
            await self.admin.create(PODS, pod, self.ns)
            self.fake.add_service(name, f"nova-{role}")
            self.running[name] = f"nova-{role}"
            names.append(name)
        return names

    async def stop(self, *names: str, down: bool) -> None:
        """Delete the pods (unscheduled: gone at once); ``down``: Nova already calls their records down."""
        for name in names:
            await self.admin.delete(PODS, name, self.ns)
            del self.running[name]
            if down:
                self.fake.set_service_state(name, "down")

    async def deployment_noticed(self, role: str) -> None:
        """What kcm writes when a pod goes: the Deployment's ready count drops (the Simulator then
        writes it back up, as when the replacement is ready)."""
        for _ in range(10):
            dep = await self.admin.get(DEPLOYMENTS, f"nova-{role}", self.ns)
            status = dep.get("status") or {}
            ready = int(status.get("readyReplicas") or 1)
            # the operator may have scaled the Deployment down already (status.replicas follows the
            # spec first): a ready count above it is refused, so it drops below the lower of both
            count = max(0, min(ready, int(status.get("replicas") or ready)) - 1)
            fewer = {"readyReplicas": count, "availableReplicas": count}
            try:
                await self.admin.patch_status(DEPLOYMENTS, f"nova-{role}", {"status": fewer}, self.ns)
                return
            except Invalid:  # the replicas changed between the read and the write: read again
                await asyncio.sleep(0.1)
        raise AssertionError(f"nova-{role}'s status kept changing under the test's write")

    def records(self, binary: str) -> list[str]:
        return sorted(s.host for s in self.fake.services_of(binary))

    def live(self, binary: str) -> list[str]:
        return sorted(n for n, b in self.running.items() if b == binary)


async def records_condition(admin: Kube, ns: str) -> Object:
    return cond(await admin.get(NOVAS, "nova", ns), conditions.SERVICE_RECORDS_HEALTHY)


def deleted_count(operator: Operator, ns: str, binary: str) -> float:
    value = operator.metrics.registry.get_sample_value(
        "nova_operator_stale_services_deleted_total", {"nova": "nova", "namespace": ns, "binary": binary}
    )
    return float(value or 0.0)


async def ready_nova(admin: Kube, fake: FakeOpenStack, ns: str, **spec: Any) -> Object:
    await create_inputs(admin, ns)
    await admin.create(NOVAS, nova_body(keystoneEndpoint=fake.keystone_url, **spec), ns)
    return await wait_for(lambda: admin.get(NOVAS, "nova", ns), is_ready, within=60)


async def until_records_are(pods: Pods, binary: str, hosts: list[str], within: float = 20) -> None:
    await wait_for(lambda: _records(pods, binary), lambda found: found == sorted(hosts), within=within)


async def _records(pods: Pods, binary: str) -> list[str]:
    return pods.records(binary)


async def test_a_rollout_leaves_exactly_the_live_pods_records(
    fake: FakeOpenStack, admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    pods = Pods(admin, fake, ns)
    old_schedulers = await pods.start("scheduler", "7d9f8c6b5d", "x2x4z", "k7m9p")
    old_conductors = await pods.start("conductor", "6b8d9f7c4", "zt5kq", "w4n8r")
    fake.add_compute("node-1", state="down")  # a pool's record: never the Nova's
    fake.add_service("ctl1", "nova-scheduler", state="down")  # a scheduler run by hand
    spec = {"scheduler": {"deployment": {"replicas": 2}}, "conductor": {"deployment": {"replicas": 2}}}
    await ready_nova(admin, fake, ns, **spec)
    clean = await wait_for(lambda: records_condition(admin, ns), lambda c: c.get("status") == "True")
    assert clean["reason"] == "NoStaleServiceRecords"
    assert pods.records("nova-scheduler") == sorted([*old_schedulers, "ctl1"])
    assert fake.calls("DELETE") == []

    # the rollout: new pods start and register, the old ones go; their records are still up
    await admin.patch(NOVAS, "nova", {"spec": {"image": {"tag": "2025.2-20260101"}}}, ns)
    new_schedulers = await pods.start("scheduler", "5c4b7f9d8", "q8w2m", "b2c4d")
    new_conductors = await pods.start("conductor", "8f7d6c5b4", "mm2nn", "h6j8k")
    await pods.stop(*old_schedulers, *old_conductors, down=False)
    await pods.deployment_noticed("scheduler")
    await pods.deployment_noticed("conductor")
    waiting = await wait_for(
        lambda: records_condition(admin, ns), lambda c: c.get("reason") == "WaitingForServicesDown"
    )
    assert waiting["status"] == "False"
    assert old_schedulers[0] in waiting["message"]
    # informational: once the Deployments are available again the Nova is Ready while records wait
    nova = await wait_for(lambda: admin.get(NOVAS, "nova", ns), is_ready)
    assert cond(nova, conditions.SERVICE_RECORDS_HEALTHY)["reason"] == "WaitingForServicesDown"
    assert fake.calls("DELETE") == []  # never a record Nova still calls up

    # Nova calls them down service_down_time after their last heartbeat: the next look deletes them
    for name in (*old_schedulers, *old_conductors):
        fake.set_service_state(name, "down")
    await until_records_are(pods, "nova-scheduler", [*new_schedulers, "ctl1"])
    await until_records_are(pods, "nova-conductor", new_conductors)
    assert pods.records("nova-compute") == ["node-1"]
    clean = await wait_for(lambda: records_condition(admin, ns), lambda c: c.get("status") == "True")
    assert clean["reason"] == "NoStaleServiceRecords"

    deleted = [e for e in await events_of(admin, ns) if e[1] == "StaleServiceDeleted"]
    assert len(deleted) == 4
    assert {e[0] for e in deleted} == {"Normal"}
    for name in (*old_schedulers, *old_conductors):
        assert sum(name in e[2] for e in deleted) == 1, name
    assert deleted_count(operator, ns, "nova-scheduler") == 2
    assert deleted_count(operator, ns, "nova-conductor") == 2

    # steady state: a pass over the converged Nova asks the compute API nothing and writes nothing
    await asyncio.sleep(1.0)
    calls, writes = len(fake.calls()), operator.writes()
    await operator.force_pass("nova")
    assert len(fake.calls()) == calls
    assert operator.writes() == writes


async def test_a_scale_down_deletes_the_gone_pods_records_and_keeps_the_rest(
    fake: FakeOpenStack, admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    pods = Pods(admin, fake, ns)
    schedulers = await pods.start("scheduler", "7d9f8c6b5d", "x2x4z")
    conductors = await pods.start("conductor", "6b8d9f7c4", "zt5kq", "w4n8r", "p2q4s")
    fake.add_compute("nova-conductor-6b8d9f7c4-c2d4f", state="down")  # a compute named like a pod
    spec = {"scheduler": {"deployment": {"replicas": 1}}, "conductor": {"deployment": {"replicas": 3}}}
    await ready_nova(admin, fake, ns, **spec)
    await wait_for(lambda: records_condition(admin, ns), lambda c: c.get("reason") == "NoStaleServiceRecords")

    await admin.patch(NOVAS, "nova", {"spec": {"conductor": {"deployment": {"replicas": 1}}}}, ns)
    await pods.stop(*conductors[1:], down=True)
    await pods.deployment_noticed("conductor")

    await until_records_are(pods, "nova-conductor", conductors[:1])
    assert pods.records("nova-scheduler") == schedulers
    assert pods.records("nova-compute") == ["nova-conductor-6b8d9f7c4-c2d4f"]
    assert pods.live("nova-conductor") == conductors[:1]

    async def counted() -> float:  # a record is gone before the pass that deleted it has counted it
        return deleted_count(operator, ns, "nova-conductor")

    assert await wait_for(counted, lambda n: n >= 2, within=10) == 2


async def test_an_unreachable_compute_api_is_reported_and_does_not_hold_up_ready(
    fake: FakeOpenStack, admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    pods = Pods(admin, fake, ns)
    await pods.start("scheduler", "7d9f8c6b5d", "x2x4z")
    gone = await pods.start("scheduler", "7d9f8c6b5d", "k7m9p")
    await pods.stop(*gone, down=True)
    await fake.go_offline("keystone")
    nova = await ready_nova(admin, fake, ns)
    failed = await wait_for(
        lambda: records_condition(admin, ns), lambda c: c.get("reason") == "ComputeAPIError"
    )
    assert failed["status"] == "False"
    assert "POST /v3/auth/tokens" in failed["message"]
    assert is_ready(nova)

    await fake.go_online("keystone")  # the backoff's next look (0.5 s here, then doubling) deletes it
    await until_records_are(pods, "nova-scheduler", ["nova-scheduler-7d9f8c6b5d-x2x4z"])
    await wait_for(lambda: records_condition(admin, ns), lambda c: c.get("reason") == "NoStaleServiceRecords")
