"""The Lease algorithm against an in-memory API: acquire, respect a live holder, expiry, release."""

from __future__ import annotations

import asyncio
import copy
import time
from typing import Any, cast

import pytest

from nova_operator.kube import Kube
from nova_operator.kube.errors import Conflict, NotFound
from nova_operator.kube.resources import LEASES, ResourceRef
from nova_operator.metrics import Metrics
from nova_operator.runtime import Request, Result
from nova_operator.runtime.leaderelection import LeaderElectionLost, LeaderElector
from nova_operator.runtime.manager import Manager
from nova_operator.settings import LeaderElectionSettings, ServerSettings, Settings


class LeaseAPI:
    """One namespace of Leases with resourceVersion preconditions, as the API server enforces them."""

    def __init__(self) -> None:
        self.leases: dict[str, dict[str, Any]] = {}
        self.rv = 0
        self.fail_next: Exception | None = None

    def _bump(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        return copy.deepcopy(obj)

    async def get(self, ref: ResourceRef, name: str, namespace: str | None = None) -> dict[str, Any]:
        if self.fail_next is not None:
            exc, self.fail_next = self.fail_next, None
            raise exc
        if name not in self.leases:
            raise NotFound(name)
        return copy.deepcopy(self.leases[name])

    async def create(
        self, ref: ResourceRef, body: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        name = body["metadata"]["name"]
        if name in self.leases:
            raise Conflict("exists")
        self.leases[name] = copy.deepcopy(body)
        return self._bump(self.leases[name])

    async def replace(
        self, ref: ResourceRef, body: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        name = body["metadata"]["name"]
        if self.leases[name]["metadata"]["resourceVersion"] != body["metadata"]["resourceVersion"]:
            raise Conflict("stale")
        self.leases[name] = copy.deepcopy(body)
        return self._bump(self.leases[name])

    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.leases["lease"]["spec"]
        return spec


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def elector(api: LeaseAPI, identity: str, clock: Clock, metrics: Metrics | None = None) -> LeaderElector:
    settings = LeaderElectionSettings(
        namespace="ns", name="lease", identity=identity, lease_duration=15, renew_deadline=10, retry_period=2
    )
    return LeaderElector(cast(Kube, api), settings, metrics=metrics, clock=clock)


async def test_the_first_candidate_creates_the_lease_and_holds_it() -> None:
    api, clock = LeaseAPI(), Clock()
    a = elector(api, "a", clock)
    assert await a.try_acquire_or_renew()
    spec = api.spec()
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"], spec["leaseTransitions"]) == ("a", 15, 0)
    renewed_at = spec["renewTime"]
    await asyncio.sleep(0.001)
    assert await a.try_acquire_or_renew()  # renewal
    assert api.spec()["holderIdentity"] == "a"
    assert api.spec()["renewTime"] >= renewed_at


async def test_a_live_holder_is_respected_until_its_record_stops_changing_for_a_lease_duration() -> None:
    api, clock = LeaseAPI(), Clock()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    clock.now += 14
    assert await a.try_acquire_or_renew()  # a renews: the record changes, b's expiry restarts
    clock.now += 14
    assert not await b.try_acquire_or_renew()
    clock.now += 15.1  # a is silent for longer than the lease duration, on b's own clock
    assert await b.try_acquire_or_renew()
    assert (api.spec()["holderIdentity"], api.spec()["leaseTransitions"]) == ("b", 1)
    assert not await a.try_acquire_or_renew()  # a sees b's fresh record


async def test_a_conflicting_write_loses_the_race() -> None:
    api, clock = LeaseAPI(), Clock()
    a = elector(api, "a", clock)
    assert await a.try_acquire_or_renew()
    original_replace = api.replace

    async def someone_else_first(ref: ResourceRef, body: dict[str, Any], namespace: str | None = None) -> Any:
        api.leases["lease"]["metadata"]["resourceVersion"] = "999"
        return await original_replace(ref, body, namespace)

    api.replace = someone_else_first  # type: ignore[method-assign]
    assert not await a.try_acquire_or_renew()


async def test_run_leads_then_releases_so_a_successor_need_not_wait() -> None:
    api, clock = LeaseAPI(), Clock()
    metrics = Metrics()
    a = elector(api, "a", clock, metrics)
    seen: list[bool] = []

    async def lead() -> None:
        seen.append(a.is_leader)
        assert (
            metrics.registry.get_sample_value(
                "nova_operator_leader_election_master_status", {"name": "lease"}
            )
            == 1
        )

    await a.run(lead)
    assert seen == [True]
    assert not a.is_leader
    assert api.spec()["holderIdentity"] is None
    assert api.spec()["leaseDurationSeconds"] == 1
    b = elector(api, "b", clock)
    assert await b.try_acquire_or_renew()  # no expiry wait after a release


async def test_renewals_failing_past_the_deadline_lose_the_lease_and_cancel_lead() -> None:
    api = LeaseAPI()
    settings = LeaderElectionSettings(
        namespace="ns", name="lease", identity="a", lease_duration=0.5, renew_deadline=0.2, retry_period=0.01
    )
    a = LeaderElector(cast(Kube, api), settings)
    cancelled = asyncio.Event()

    async def lead() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def steal() -> None:
        await asyncio.sleep(0.02)
        api.leases["lease"]["spec"]["holderIdentity"] = "intruder"
        api.leases["lease"]["metadata"]["resourceVersion"] = "x"

    thief = asyncio.create_task(steal())
    with pytest.raises(LeaderElectionLost):
        await asyncio.wait_for(a.run(lead), 5)
    await thief
    assert cancelled.is_set()
    assert api.spec()["holderIdentity"] == "intruder"  # a lost lease is not "released"


def test_renew_deadline_must_be_shorter_than_the_lease() -> None:
    with pytest.raises(ValueError, match="renew deadline"):
        LeaderElector(cast(Kube, LeaseAPI()), LeaderElectionSettings(lease_duration=10, renew_deadline=10))


def test_the_lease_resource_is_coordination_v1() -> None:
    assert (LEASES.group, LEASES.version, LEASES.plural) == ("coordination.k8s.io", "v1", "leases")


class ManagedLeaseAPI(LeaseAPI):
    """The Lease API plus what a ``Manager`` reads of its ``Kube``."""

    def __init__(self) -> None:
        super().__init__()
        self.metrics = Metrics()


def manager_settings(identity: str, drain_timeout: float) -> Settings:
    return Settings(
        leader_election=LeaderElectionSettings(
            namespace="ns",
            name="lease",
            identity=identity,
            lease_duration=15,
            renew_deadline=10,
            retry_period=2,
        ),
        servers=ServerSettings(metrics_bind_address="0", health_probe_bind_address="0"),
        shutdown_timeout=drain_timeout,
    )


async def test_on_stop_the_lease_is_released_after_the_drain_timeout_not_later() -> None:
    api = ManagedLeaseAPI()
    started = asyncio.Event()

    class Stuck:
        async def reconcile(self, request: Request) -> Result:
            started.set()
            await asyncio.sleep(3600)
            return Result()

    manager = Manager(cast(Kube, api), manager_settings("a", drain_timeout=0.3))
    manager.controller("stuck", Stuck()).enqueue(Request("ns", "x"))
    task = asyncio.create_task(manager.run())
    await asyncio.wait_for(started.wait(), 2)
    assert api.spec()["holderIdentity"] == "a"
    stopped = time.monotonic()
    manager.stop()
    while api.spec()["holderIdentity"] is not None:
        await asyncio.sleep(0.01)
        assert time.monotonic() - stopped < 1.5
    released_after = time.monotonic() - stopped
    assert 0.3 <= released_after < 1.0  # the drain timeout, then cancel and release at once
    await asyncio.wait_for(task, 2)


async def test_on_stop_the_lease_is_released_as_soon_as_the_workers_finish() -> None:
    api = ManagedLeaseAPI()
    started = asyncio.Event()

    class Quick:
        async def reconcile(self, request: Request) -> Result:
            started.set()
            await asyncio.sleep(0.05)
            return Result()

    manager = Manager(cast(Kube, api), manager_settings("a", drain_timeout=10))
    manager.controller("quick", Quick()).enqueue(Request("ns", "x"))
    task = asyncio.create_task(manager.run())
    await asyncio.wait_for(started.wait(), 2)
    stopped = time.monotonic()
    manager.stop()
    await asyncio.wait_for(task, 2)
    assert api.spec()["holderIdentity"] is None
    assert time.monotonic() - stopped < 0.5  # not the 10 s drain timeout


async def test_a_standby_takes_a_released_lease_within_a_second_and_stops_trying_at_once() -> None:
    api = ManagedLeaseAPI()
    leader = elector(api, "a", time.monotonic)  # type: ignore[arg-type]
    assert await leader.try_acquire_or_renew()
    standby = Manager(cast(Kube, api), manager_settings("b", drain_timeout=1))
    task = asyncio.create_task(standby.run())
    await asyncio.sleep(2.5)
    assert api.spec()["holderIdentity"] == "a"  # a live holder is respected
    await leader._release()
    released = time.monotonic()
    while api.spec()["holderIdentity"] != "b":
        await asyncio.sleep(0.01)
        assert time.monotonic() - released < 2
    assert time.monotonic() - released <= 1.3  # polls every 0.8-1.2 s: well within the 2 s asked
    standby.stop()
    await asyncio.wait_for(task, 2)

    waiting = Manager(cast(Kube, api), manager_settings("c", drain_timeout=10))
    api.leases["lease"]["spec"]["holderIdentity"] = "someone"  # held: c can only wait for it
    api.leases["lease"]["metadata"]["resourceVersion"] = "y"
    task = asyncio.create_task(waiting.run())
    await asyncio.sleep(0.1)
    stopped = time.monotonic()
    waiting.stop()
    await asyncio.wait_for(task, 1)
    assert time.monotonic() - stopped < 0.2
