"""The ServiceRecords step against the fake Keystone + Nova on loopback and the real API server's pod
list (issue 24).

What it deletes is ``service_records.judge``'s (tested on its own in ``tests/unit/test_service_records.py``);
here: the calls it makes and when it makes none, its condition, events, metric, waits and backoff.
The step runs in ``make_ctx`` passes over a Nova stored by kube-apiserver, the pods are stored there
(the selector is the server's), the role Deployments are what the cache shows (a test rolls one by
giving it a new resourceVersion), and the requests are recorded by a wrapper around the real client.
The whole operator against the same fake API, with its rollouts: ``test_service_records.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from simcluster import FakeOpenStack

from nova_operator import conditions, naming
from nova_operator.kube import Kube
from nova_operator.kube.errors import Forbidden
from nova_operator.kube.resources import DEPLOYMENTS, PODS
from nova_operator.kube.types import Object
from nova_operator.reconcilers.nova import service_records
from nova_operator.reconcilers.nova.context import NovaOptions, PassContext
from nova_operator.runtime.cache import Cache
from tests.integration.nova import fake_openstack
from tests.integration.nova.passes import Emitted, make_ctx, stored_nova
from tests.integration.nova.requests import Recorder

PASSWORD = "service-user-pw"
OLD_SCHEDULER = "nova-scheduler-7d9f8c6b5d-x2x4z"
NEW_SCHEDULER = "nova-scheduler-5c4b7f9d8-q8w2m"
OLD_CONDUCTOR = "nova-conductor-6b8d9f7c4-zt5kq"
NEW_CONDUCTOR = "nova-conductor-8f7d6c5b4-mm2nn"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenStack]:
    async with fake_openstack.running(PASSWORD) as f:
        yield f


def deployment(name: str, ns: str, rv: str) -> Object:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "resourceVersion": rv},
    }


def pod(name: str, component: str) -> Object:
    """A pod of the Nova's role Deployment: the pod template's labels (the step's selector is
    name + instance + managed-by; a pod without managed-by is not listed)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": naming.labels("nova", component)},
        "spec": {"containers": [{"name": component, "image": "nova"}]},
    }


class Setup:
    def __init__(self, admin: Kube, ns: str, nova: Object, fake: FakeOpenStack) -> None:
        self.admin, self.ns, self.nova, self.fake = admin, ns, nova, fake
        self.kube = Recorder.of(admin)
        self.events = Emitted()
        self.clock = Clock()
        self.options = NovaOptions(nova_api_url=lambda _name, _ns: fake.nova_url, monotonic=self.clock)
        self.deployments = Cache(str(DEPLOYMENTS))
        self.status: dict[str, Any] = {}
        for name in ("nova", "nova-metadata", "nova-scheduler", "nova-conductor"):
            self.deployments.upsert(deployment(name, ns, "1"))

    def ctx(self) -> PassContext:
        ctx = make_ctx(
            self.kube,
            self.nova,
            events=self.events,
            options=self.options,
            caches={DEPLOYMENTS: self.deployments},
            status=self.status,
        )
        ctx.state.service_user_password = PASSWORD
        return ctx

    async def run(self) -> tuple[float | None, dict[str, Any]]:
        result = await service_records.reconcile_service_records(self.ctx())
        cond = conditions.find(self.status.get("conditions") or [], conditions.SERVICE_RECORDS_HEALTHY)
        assert cond is not None
        return result.requeue_after, dict(cond)

    def roll(self, name: str) -> None:
        """A role's Deployment changed (a rollout, a scale, a pod that went)."""
        old = self.deployments.get(name, self.ns)
        assert old is not None
        self.deployments.upsert(deployment(name, self.ns, str(int(old["metadata"]["resourceVersion"]) + 1)))

    async def pods(self, *pods: Object) -> None:
        """Exactly ``pods`` run in the namespace (created, then Running as the kubelet reports)."""
        for p in pods:
            name = p["metadata"]["name"]
            await self.admin.create(PODS, p, self.ns)
            await self.admin.patch_status(PODS, name, {"status": {"phase": "Running"}}, self.ns)

    def hosts(self, binary: str) -> list[str]:
        return sorted(s.host for s in self.fake.services_of(binary))

    def deleted_metric(self, binary: str) -> float:
        value = self.kube.metrics.registry.get_sample_value(
            "nova_operator_stale_services_deleted_total",
            {"nova": "nova", "namespace": self.ns, "binary": binary},
        )
        return float(value or 0)


@pytest.fixture
async def setup(admin: Kube, namespace: str, fake: FakeOpenStack) -> Setup:
    nova = await stored_nova(
        admin,
        namespace,
        openStackRelease="2026.1",
        image={"repository": "ghcr.io/c5c3/nova", "tag": "2026.1"},
        keystoneEndpoint=fake.keystone_url,
    )
    return Setup(admin, namespace, nova, fake)


async def test_a_rollouts_down_records_are_deleted_and_live_and_compute_records_kept(setup: Setup) -> None:
    fake = setup.fake
    fake.add_service(OLD_SCHEDULER, "nova-scheduler", state="down")
    fake.add_service(NEW_SCHEDULER, "nova-scheduler")
    fake.add_service(OLD_CONDUCTOR, "nova-conductor", state="down")
    fake.add_service(NEW_CONDUCTOR, "nova-conductor")
    fake.add_service("nova-6b8d9f7c4-zt5kq", "nova-osapi_compute", state="down")  # hidden by Nova's list
    fake.add_compute("nova-scheduler-9d8c7b6f5-bb2cc", state="down")  # a pool's: never the Nova's
    fake.add_service("ctl1", "nova-scheduler", state="down")  # not a pod of this Nova: never touched
    await setup.pods(pod(NEW_SCHEDULER, "scheduler"), pod(NEW_CONDUCTOR, "conductor"))

    requeue, cond = await setup.run()

    assert (requeue, cond["status"], cond["reason"]) == (None, "True", "NoStaleServiceRecords")
    assert setup.hosts("nova-scheduler") == ["ctl1", NEW_SCHEDULER]
    assert setup.hosts("nova-conductor") == [NEW_CONDUCTOR]
    assert setup.hosts("nova-compute") == ["nova-scheduler-9d8c7b6f5-bb2cc"]
    assert setup.hosts("nova-osapi_compute") == ["nova-6b8d9f7c4-zt5kq"]
    deletes = fake.calls("DELETE", "/v2.1/os-services/")
    assert [c.microversion for c in deletes] == ["2.53", "2.53"]
    assert [r for _t, r, _m in setup.events.emitted] == ["StaleServiceDeleted", "StaleServiceDeleted"]
    assert all(t == "Normal" for t, _r, _m in setup.events.emitted)
    assert any(OLD_SCHEDULER in m and "nova-scheduler" in m for _t, _r, m in setup.events.emitted)
    assert PASSWORD not in " ".join(m for _t, _r, m in setup.events.emitted) + cond["message"]
    assert setup.deleted_metric("nova-scheduler") == 1
    assert setup.deleted_metric("nova-conductor") == 1


async def test_a_converged_nova_is_not_asked_again_until_a_role_deployment_changes(setup: Setup) -> None:
    setup.fake.add_service(NEW_SCHEDULER, "nova-scheduler")
    await setup.pods(pod(NEW_SCHEDULER, "scheduler"))
    await setup.run()
    assert len(setup.fake.calls("GET", "/v2.1/os-services")) == 1
    setup.fake.clear_calls()
    setup.kube.calls.clear()
    setup.clock.now += 3600

    requeue, cond = await setup.run()

    assert (requeue, cond["reason"]) == (None, "NoStaleServiceRecords")
    assert setup.fake.calls() == []  # no token, no list
    assert setup.kube.calls == []

    setup.roll("nova-scheduler")
    await setup.run()
    assert len(setup.fake.calls("GET", "/v2.1/os-services")) == 1


async def test_no_pod_is_listed_without_a_record_of_this_novas_roles(setup: Setup) -> None:
    setup.fake.add_service("other-scheduler-7d9f8c6b5d-x2x4z", "nova-scheduler", state="down")
    setup.fake.add_compute("node-1", state="down")
    requeue, cond = await setup.run()
    assert (requeue, cond["reason"]) == (None, "NoStaleServiceRecords")
    assert [c for c in setup.kube.calls if c[1] == "pods"] == []
    assert setup.fake.calls("DELETE") == []


async def test_records_still_up_wait_and_are_deleted_once_down(setup: Setup) -> None:
    setup.fake.add_service(OLD_SCHEDULER, "nova-scheduler")  # its pod just went: still up
    setup.fake.add_service(NEW_SCHEDULER, "nova-scheduler")
    await setup.pods(pod(NEW_SCHEDULER, "scheduler"))

    requeue, cond = await setup.run()
    assert (requeue, cond["status"], cond["reason"]) == (30.0, "False", "WaitingForServicesDown")
    assert f"nova-scheduler on {OLD_SCHEDULER}" in cond["message"]
    assert setup.fake.calls("DELETE") == []

    setup.fake.clear_calls()
    setup.clock.now += 10  # another wake-up before it is due, Deployments unchanged: no call
    requeue, _ = await setup.run()
    assert requeue == pytest.approx(20.0)
    assert setup.fake.calls() == []

    setup.fake.set_service_state(OLD_SCHEDULER, "down")
    setup.clock.now += 20
    requeue, cond = await setup.run()
    assert (requeue, cond["reason"]) == (None, "NoStaleServiceRecords")
    assert setup.hosts("nova-scheduler") == [NEW_SCHEDULER]
    assert [r for _t, r, _m in setup.events.emitted] == ["StaleServiceDeleted"]


async def test_an_unreachable_compute_api_is_reported_and_retried_with_backoff_never_raised(
    setup: Setup,
) -> None:
    await setup.fake.go_offline("keystone")
    requeue, cond = await setup.run()
    assert (requeue, cond["status"], cond["reason"]) == (30.0, "False", "ComputeAPIError")
    assert "POST /v3/auth/tokens" in cond["message"]
    assert conditions.SERVICE_RECORDS_HEALTHY not in conditions.NOVA_READY_INPUTS

    setup.fake.clear_calls()
    setup.roll("nova-conductor")  # a wake-up from a rollout does not ask the failing API again
    setup.clock.now += 5
    requeue, _ = await setup.run()
    assert requeue == pytest.approx(25.0)
    assert setup.fake.calls() == []

    delays = []
    for _ in range(6):
        setup.clock.now += 1000
        requeue, _ = await setup.run()
        delays.append(requeue)
    assert delays == [60.0, 120.0, 240.0, 480.0, 600.0, 600.0]

    await setup.fake.go_online("keystone")
    setup.clock.now += 1000
    requeue, cond = await setup.run()
    assert (requeue, cond["status"], cond["reason"]) == (None, "True", "NoStaleServiceRecords")


async def test_a_rollout_after_a_grown_backoff_looks_again_once_30_s_have_passed(setup: Setup) -> None:
    """An outage grew the backoff to minutes; the rollout that ends it (a password rotation) is
    followed by a look as soon as 30 s have passed since the failed one, not by the rest of the wait."""
    await setup.fake.go_offline("keystone")
    delays = []
    for _ in range(4):
        setup.clock.now += 1000
        requeue, _ = await setup.run()
        delays.append(requeue)
    assert delays == [30.0, 60.0, 120.0, 240.0]

    await setup.fake.go_online("keystone")
    setup.fake.add_service(OLD_SCHEDULER, "nova-scheduler", state="down")
    setup.fake.clear_calls()
    setup.clock.now += 10
    setup.roll("nova-scheduler")
    requeue, cond = await setup.run()  # 10 s after the failed look: the rollout waits for the 30 s
    assert requeue == pytest.approx(20.0)
    assert (cond["reason"], setup.fake.calls()) == ("ComputeAPIError", [])

    setup.clock.now += 20
    requeue, cond = await setup.run()  # 30 s after it: a wake-up of the changed Deployments looks
    assert (requeue, cond["status"], cond["reason"]) == (None, "True", "NoStaleServiceRecords")
    assert OLD_SCHEDULER not in setup.hosts("nova-scheduler")
    assert [r for _t, r, _m in setup.events.emitted] == ["StaleServiceDeleted"]

    setup.fake.clear_calls()
    await setup.fake.go_offline("keystone")
    setup.roll("nova-conductor")
    requeue, _ = await setup.run()  # the backoff starts over after a look that worked
    assert requeue == 30.0


async def test_a_look_that_takes_too_long_is_a_compute_api_error(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service_records, "DEADLINE", 0.0)
    requeue, cond = await setup.run()
    assert (requeue, cond["reason"]) == (30.0, "ComputeAPIError")
    assert "did not answer within" in cond["message"]


async def test_a_refused_pod_list_deletes_nothing(setup: Setup) -> None:
    setup.fake.add_service(OLD_SCHEDULER, "nova-scheduler", state="down")

    setup.kube.refuse["list"] = Forbidden("pods is forbidden")
    requeue, cond = await setup.run()
    assert (requeue, cond["status"], cond["reason"]) == (30.0, "False", "PodListError")
    assert setup.hosts("nova-scheduler") == [OLD_SCHEDULER]


async def test_the_step_can_be_turned_off(setup: Setup) -> None:
    setup.fake.add_service(OLD_SCHEDULER, "nova-scheduler", state="down")
    from dataclasses import replace

    setup.options = replace(setup.options, stale_services=False)
    result = await service_records.reconcile_service_records(setup.ctx())
    assert result.requeue_after is None
    assert setup.status == {}
    assert setup.fake.calls() == []


async def test_one_look_deletes_a_bounded_number_of_records_and_the_next_comes_promptly(setup: Setup) -> None:
    """Issue 36 §5: a tenant's nova-api listing thousands of stale records made one DELETE and one
    Event each in one look, every 30 s. One look deletes ``DELETES_PER_PASS``; the next follows
    after ``MORE_AFTER`` seconds (the Deployments unchanged) until none is left."""
    alphabet = "bcdfghjklmnpqrstvwxz"
    stale = 2 * service_records.DELETES_PER_PASS + 5
    for index in range(stale):
        host = f"nova-scheduler-7d9f8c6b5d-{alphabet[index // 20]}{alphabet[index % 20]}x4z"
        setup.fake.add_service(host, "nova-scheduler", state="down")
    setup.fake.add_service(NEW_SCHEDULER, "nova-scheduler")
    await setup.pods(pod(NEW_SCHEDULER, "scheduler"))

    requeue, cond = await setup.run()
    assert len(setup.fake.calls("DELETE", "/v2.1/os-services/")) == service_records.DELETES_PER_PASS
    assert (requeue, cond["status"], cond["reason"]) == (
        service_records.MORE_AFTER,
        "False",
        "DeletingStaleServiceRecords",
    )
    assert f"deleted {service_records.DELETES_PER_PASS} " in cond["message"]
    assert f"{stale - service_records.DELETES_PER_PASS} more" in cond["message"]
    assert len(setup.events.emitted) == service_records.DELETES_PER_PASS

    looks = 1
    while requeue == service_records.MORE_AFTER:
        setup.clock.now += service_records.MORE_AFTER
        requeue, cond = await setup.run()
        looks += 1
    assert looks == 3
    assert (requeue, cond["reason"]) == (None, "NoStaleServiceRecords")
    assert setup.hosts("nova-scheduler") == [NEW_SCHEDULER]
    assert len(setup.fake.calls("DELETE", "/v2.1/os-services/")) == stale
    assert setup.deleted_metric("nova-scheduler") == stale
