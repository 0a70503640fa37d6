"""The manager's lifecycle without a cluster: bounded graceful drain, and SIGTERM."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import time
import urllib.error
import urllib.request
from typing import Any, cast

import pytest
import structlog

from nova_operator.kube import Kube
from nova_operator.kube.errors import Unreachable as KubeUnreachable
from nova_operator.kube.resources import CONFIGMAPS
from nova_operator.metrics import Metrics
from nova_operator.runtime import Request, Result
from nova_operator.runtime import manager as manager_module
from nova_operator.runtime.manager import ControllerStopped, Manager
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
    assert not manager.ready()  # not before run() has done its set-up (no informers to wait for after)


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


async def test_a_stale_reflector_is_named_by_readiness_not_by_liveness() -> None:
    """A reflector that hears nothing (the API server is down) is not fixed by a restart: liveness
    stays OK (issue 26 item 11), readiness names it."""

    class Quiet:
        """Lists once, then every watch hangs: nothing is heard after the list."""

        async def list(self, *a: Any, **kw: Any) -> dict[str, Any]:
            return {"metadata": {"resourceVersion": "1"}, "items": []}

        def watch(self, *a: Any, **kw: Any) -> Any:
            return self

        async def __aenter__(self) -> Any:
            await asyncio.Event().wait()

        async def __aexit__(self, *exc: object) -> None:
            return None

    kube = NoKube()
    s = dataclasses.replace(settings(), watch=WatchSettings(inactivity_timeout=0.02, namespaces=("n1", "n2")))
    manager = Manager(cast(Kube, kube), s)
    inf = manager.informer(CONFIGMAPS)
    inf._lw = cast(Any, Quiet())
    manager._running = True  # what run() sets once its set-up is done
    task = asyncio.create_task(inf.run())
    await asyncio.wait_for(inf.wait_for_sync(), 1)
    await asyncio.sleep(0.1)
    try:
        assert manager.health_problems() == []
        assert manager.readiness_problems() == [
            "watch stale: configmaps in n1 heard nothing from the API server for over 0.06 s",
            "watch stale: configmaps in n2 heard nothing from the API server for over 0.06 s",
        ]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


class Unreachable:
    """A ``Kube`` whose API server does not answer ``failures`` times, then does."""

    host = "https://api.test:6443"

    def __init__(self, failures: int) -> None:
        self.metrics = Metrics()
        self.failures = failures
        self.calls = 0
        self.called_twice = asyncio.Event()

    async def version(self) -> dict[str, Any]:
        self.calls += 1
        if self.calls >= 2:
            self.called_twice.set()
        if self.calls <= self.failures:
            raise KubeUnreachable(f"{self.host}: connection refused")
        return {"gitVersion": "v1.37.2"}


async def test_start_up_retries_an_unreachable_api_server_with_backoff_and_logs_each_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(delay: float) -> None:
        slept.append(delay)
        await real_sleep(0)

    monkeypatch.setattr(manager_module.asyncio, "sleep", sleep)
    kube = Unreachable(failures=8)
    with structlog.testing.capture_logs() as logs:
        await manager_module.wait_reachable(cast(Kube, kube))
    assert kube.calls == 9
    assert slept == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    failures = [e for e in logs if e["event"] == "cannot reach the Kubernetes API server; retrying"]
    assert [e["attempt"] for e in failures] == list(range(1, 9))
    assert all(e["log_level"] == "warning" and "connection refused" in e["error"] for e in failures)


async def test_start_up_serves_probes_while_waiting_and_a_stop_ends_the_wait_at_once() -> None:
    """While the API server does not answer: /healthz 200 (a restart would not help), /readyz 503;
    ``stop()`` (SIGTERM) ends the process without waiting for the API server."""
    kube = Unreachable(failures=10**9)
    s = dataclasses.replace(
        settings(), servers=ServerSettings(metrics_bind_address="0", health_probe_bind_address="127.0.0.1:0")
    )
    manager = Manager(cast(Kube, kube), s)
    task = asyncio.create_task(manager.run(setup=lambda: manager_module.wait_reachable(cast(Kube, kube))))
    await asyncio.wait_for(kube.called_twice.wait(), 5)
    assert not task.done()
    assert manager.health_server is not None
    port = manager.health_server.port
    assert await asyncio.to_thread(http_get, port, "/healthz") == (200, "ok\n")
    assert await asyncio.to_thread(http_get, port, "/readyz") == (
        503,
        "not ready:\n- starting: waiting for the API server\n",
    )
    manager.stop()
    await asyncio.wait_for(task, 2)


async def test_start_up_goes_on_once_the_api_server_answers() -> None:
    kube = Unreachable(failures=2)
    built: list[str] = []

    def factory(manager: Manager) -> Any:
        built.append("controller")
        ctl = manager.controller("c", Blocking(0))
        asyncio.get_running_loop().call_later(0.05, manager.stop)
        return ctl

    await asyncio.wait_for(
        manager_module.run(settings(), [factory], kube=cast(Kube, kube), handle_signals=False), 10
    )
    assert kube.calls == 3
    assert built == ["controller"]


def test_the_default_drain_timeout_is_well_inside_the_default_grace_period() -> None:
    assert Settings().shutdown_timeout == 10.0


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
