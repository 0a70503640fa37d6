"""The manager's lifecycle without a cluster: bounded graceful drain, and SIGTERM."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import time
from typing import Any, cast

import pytest
import structlog

from nova_operator.kube import Kube
from nova_operator.kube.resources import CONFIGMAPS
from nova_operator.manager import ControllerStopped, Manager
from nova_operator.metrics import Metrics
from nova_operator.runtime import Request, Result
from nova_operator.settings import (
    LeaderElectionSettings,
    QueueSettings,
    ServerSettings,
    Settings,
    WatchSettings,
)


class NoKube:
    """Enough of ``Kube`` for a manager without informers or leader election."""

    def __init__(self) -> None:
        self.metrics = Metrics()


def settings(shutdown_timeout: float = 5) -> Settings:
    return Settings(
        leader_election=LeaderElectionSettings(enabled=False),
        servers=ServerSettings(metrics_bind_address="0", health_probe_bind_address="0"),
        shutdown_timeout=shutdown_timeout,
    )


class Blocking:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started = asyncio.Event()
        self.finished = 0
        self.cancelled = 0

    async def reconcile(self, request: Request) -> Result:
        self.started.set()
        try:
            await asyncio.sleep(self.seconds)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        self.finished += 1
        return Result()


def make(rec: Blocking, shutdown_timeout: float) -> Manager:
    manager = Manager(cast(Kube, NoKube()), settings(shutdown_timeout))
    ctl = manager.controller("blocking", rec)
    ctl.enqueue(Request("ns", "a"))
    ctl.enqueue(Request("ns", "b"))
    return manager


async def test_stop_lets_in_flight_reconciles_finish_and_takes_no_new_work() -> None:
    rec = Blocking(0.05)
    manager = make(rec, shutdown_timeout=5)
    manager.controllers[0].workers = 1
    task = asyncio.create_task(manager.run())
    await asyncio.wait_for(rec.started.wait(), 1)
    manager.stop()
    await asyncio.wait_for(task, 2)
    assert rec.finished == 1  # "a" finished; "b" was never started
    assert rec.cancelled == 0


async def test_a_reconcile_that_outlives_the_shutdown_timeout_is_cancelled() -> None:
    rec = Blocking(3600)
    manager = make(rec, shutdown_timeout=0.1)
    task = asyncio.create_task(manager.run())
    await asyncio.wait_for(rec.started.wait(), 1)
    stopped = time.monotonic()
    manager.stop()
    await asyncio.wait_for(task, 2)
    assert time.monotonic() - stopped < 1
    assert rec.cancelled == 2


async def test_sigterm_stops_the_manager_gracefully() -> None:
    rec = Blocking(0.01)
    manager = make(rec, shutdown_timeout=5)
    task = asyncio.create_task(manager.run(handle_signals=True))
    await asyncio.wait_for(rec.started.wait(), 1)
    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.wait_for(task, 2)
    assert rec.cancelled == 0
    # The handlers are removed again: the default dispositions are back.
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


async def test_a_controller_factory_registers_through_the_manager() -> None:
    manager = Manager(cast(Kube, NoKube()), settings())

    def factory(m: Manager) -> Any:
        return m.controller("c", Blocking(0))

    ctl = factory(manager)
    manager.add_controller(ctl)  # what manager.run(settings, controllers=[factory]) does
    assert [c.name for c in manager.controllers] == ["c"]
    assert manager.ready()  # no informers: nothing to wait for


async def test_a_controller_that_ends_on_its_own_fails_the_manager_loudly() -> None:
    manager = Manager(cast(Kube, NoKube()), settings())
    ctl = manager.controller("broken", Blocking(0))
    ctl.queue.shutdown()  # its workers end at once, though nobody stopped the manager
    with structlog.testing.capture_logs() as logs, pytest.raises(ControllerStopped, match="broken"):
        await asyncio.wait_for(manager.run(), 2)
    assert any(e["event"].startswith("controller stopped without being asked") for e in logs)


async def test_health_problems_name_a_stuck_worker() -> None:
    rec = Blocking(3600)
    s = dataclasses.replace(settings(0.1), queue=QueueSettings(stuck_after=0.05))
    manager = Manager(cast(Kube, NoKube()), s)
    manager.controller("slow", rec).enqueue(Request("ns", "a"))
    task = asyncio.create_task(manager.run())
    await asyncio.wait_for(rec.started.wait(), 1)
    assert manager.health_problems() == []
    await asyncio.sleep(0.1)
    assert manager.health_problems() == ["worker stuck: slow ns/a reconciling for over 0.05 s"]
    manager.stop()
    await asyncio.wait_for(task, 2)


async def test_health_problems_name_a_stale_reflector() -> None:
    class Hanging:
        async def list(self, *a: Any, **kw: Any) -> dict[str, Any]:
            await asyncio.Event().wait()
            return {}

    kube = NoKube()
    s = dataclasses.replace(settings(), watch=WatchSettings(inactivity_timeout=0.02, namespaces=("n1", "n2")))
    manager = Manager(cast(Kube, kube), s)
    inf = manager.informer(CONFIGMAPS)
    inf._lw = cast(Any, Hanging())
    task = asyncio.create_task(inf.run())
    await asyncio.sleep(0.1)
    try:
        assert manager.health_problems() == [
            "watch stale: configmaps in n1 heard nothing from the API server for over 0.06 s",
            "watch stale: configmaps in n2 heard nothing from the API server for over 0.06 s",
        ]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_the_default_drain_timeout_is_well_inside_the_default_grace_period() -> None:
    assert Settings().shutdown_timeout == 10.0
