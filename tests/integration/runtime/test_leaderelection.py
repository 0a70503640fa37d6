"""Two managers with leader election: exactly one reconciles; the other takes over when it stops."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import pytest
from simcluster import ControlPlane

from nova_operator.kube import Kube
from nova_operator.kube.resources import CONFIGMAPS, LEASES
from nova_operator.metrics import Metrics
from nova_operator.runtime import Request, Result
from nova_operator.runtime.leaderelection import LeaderElectionLost
from nova_operator.runtime.manager import Manager
from nova_operator.settings import Settings

pytestmark = pytest.mark.integration

LEASE = {"enabled": True, "lease_duration": 2.0, "renew_deadline": 1.5, "retry_period": 0.25}
SYNC_ALLOWANCE = 1.5  # the new leader's caches are warm; this covers starting its workers on a busy machine


class Log:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Request, float]] = []
        self.changed = asyncio.Event()

    def reconciler(self, identity: str) -> Recording:
        return Recording(self, identity)

    def by(self, identity: str) -> list[Request]:
        return [r for who, r, _ in self.calls if who == identity]

    async def until(self, condition: Callable[[], bool], within: float = 15) -> None:
        async with asyncio.timeout(within):
            while not condition():
                self.changed.clear()
                await self.changed.wait()


class Recording:
    def __init__(self, log: Log, identity: str) -> None:
        self.log, self.identity = log, identity

    async def reconcile(self, request: Request) -> Result:
        self.log.calls.append((self.identity, request, time.monotonic()))
        self.log.changed.set()
        return Result()


async def start(
    plane: ControlPlane, settings: Settings, log: Log, identity: str
) -> tuple[Manager, asyncio.Task[None]]:
    kube = await Kube.connect(kubeconfig=str(plane.kubeconfig), context="admin", metrics=Metrics())
    manager = Manager(kube, settings)
    manager.controller("cm", log.reconciler(identity)).watch_primary(manager.informer(CONFIGMAPS))
    return manager, asyncio.create_task(manager.run(), name=f"manager {identity}")


async def shut(manager: Manager, task: asyncio.Task[None]) -> None:
    manager.stop()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)
    await manager.kube.close()


def make_settings(fast_settings: Callable[..., Settings], identity: str, **extra: object) -> Settings:
    return fast_settings(**LEASE, identity=identity, name="test-leader", **extra)


@pytest.mark.parametrize("crash", [False, True], ids=["graceful-stop", "crash"])
async def test_exactly_one_manager_reconciles_and_the_other_takes_over(
    control_plane: ControlPlane,
    kube: Kube,
    namespace: str,
    fast_settings: Callable[..., Settings],
    crash: bool,
) -> None:
    for i in range(5):
        await kube.create(CONFIGMAPS, {"metadata": {"name": f"cm{i}"}}, namespace)
    log = Log()
    a = await start(control_plane, make_settings(fast_settings, "a", release_on_cancel=not crash), log, "a")
    b = await start(control_plane, make_settings(fast_settings, "b", release_on_cancel=not crash), log, "b")
    managers = {"a": a, "b": b}
    try:
        await log.until(lambda: len({r for _, r, _ in log.calls}) == 5)
        leader = log.calls[0][0]
        follower = "b" if leader == "a" else "a"
        assert managers[leader][0].leading
        assert not managers[follower][0].leading
        assert log.by(follower) == []
        assert sorted(r.name for r in log.by(leader)) == [f"cm{i}" for i in range(5)]

        manager, task = managers[leader]
        stopped_at = time.monotonic()
        if crash:  # gone without releasing the Lease: the follower must wait for it to expire
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await manager.kube.close()
        else:
            await shut(manager, task)
        del managers[leader]

        await log.until(lambda: len(log.by(follower)) >= 5)
        first = min(t for who, _, t in log.calls if who == follower)
        took = first - stopped_at
        bound = LEASE["lease_duration"] + LEASE["retry_period"] * 1.2 + SYNC_ALLOWANCE
        assert took < bound, f"takeover took {took:.2f} s"
        if not crash:
            assert took < LEASE["lease_duration"], "a released Lease is taken without waiting for expiry"
        lease = await kube.get(LEASES, "test-leader", namespace)
        assert lease["spec"]["holderIdentity"] == follower
        assert lease["spec"]["leaseTransitions"] >= 1
        print(f"{'crash' if crash else 'graceful'} takeover in {took:.2f} s")
    finally:
        for manager, task in managers.values():
            await shut(manager, task)


async def test_a_lost_lease_stops_the_controllers_and_fails_the_manager(
    control_plane: ControlPlane, kube: Kube, namespace: str, fast_settings: Callable[..., Settings]
) -> None:
    log = Log()
    manager, task = await start(control_plane, make_settings(fast_settings, "a"), log, "a")
    try:
        await kube.create(CONFIGMAPS, {"metadata": {"name": "wake"}}, namespace)
        await log.until(lambda: len(log.by("a")) == 1)  # reconciling: it leads
        assert manager.leading
        # Someone else takes the Lease behind our back (a partition would look the same to us).
        lease = await kube.get(LEASES, "test-leader", namespace)
        lease["spec"]["holderIdentity"] = "intruder"
        lease["spec"]["leaseDurationSeconds"] = 60
        await kube.replace(LEASES, lease, namespace)
        lost_at = time.monotonic()
        with pytest.raises(LeaderElectionLost):
            await asyncio.wait_for(task, 10)
        took = time.monotonic() - lost_at
        assert took < LEASE["renew_deadline"] + LEASE["retry_period"] * 2 + 1.0
        assert not manager.leading
        assert all(c.queue.shutting_down for c in manager.controllers)
        gauge = manager.metrics.registry.get_sample_value(
            "nova_operator_leader_election_master_status", {"name": "test-leader"}
        )
        assert gauge == 0
        assert (await kube.get(LEASES, "test-leader", namespace))["spec"]["holderIdentity"] == "intruder"
    finally:
        if not task.done():
            task.cancel()
        await manager.kube.close()
