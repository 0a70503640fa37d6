"""The operator through an API server outage, on the real API server (issue 26 item 11).

A restart cannot bring an API server back: during an outage liveness stays 200 (readiness names
the silent reflectors) and the operator resumes by itself once the API server is back; a start
with no API server waits for it (retrying with backoff) instead of exiting.
"""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
import structlog
from simcluster import ControlPlane

from nova_operator.kube import Kube
from nova_operator.kube.resources import CONFIGMAPS
from nova_operator.metrics import Metrics
from nova_operator.runtime import Controller, Request, Result
from nova_operator.runtime import manager as manager_module
from nova_operator.runtime.manager import Manager
from nova_operator.settings import LeaderElectionSettings, ServerSettings, Settings, WatchSettings
from tests.integration.runtime.restarts import restart_apiserver_here

pytestmark = pytest.mark.integration

INACTIVITY = 1.0  # stale after 3 s


class Seen:
    """A reconciler that records the ConfigMaps it was asked about."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self._changed = asyncio.Event()

    async def reconcile(self, request: Request) -> Result:
        self.names.add(request.name)
        self._changed.set()
        return Result()

    async def until_seen(self, name: str, within: float = 60) -> None:
        async with asyncio.timeout(within):
            while name not in self.names:
                self._changed.clear()
                await self._changed.wait()


def factory(seen: Seen) -> Callable[[Manager], Controller]:
    def make(manager: Manager) -> Controller:
        ctl = manager.controller("seen", seen)
        ctl.watch_primary(manager.informer(CONFIGMAPS))
        return ctl

    return make


def settings(namespace: str) -> Settings:
    return Settings(
        watch=WatchSettings(
            namespaces=(namespace,),
            backoff_initial=0.05,
            backoff_max=0.5,
            inactivity_timeout=INACTIVITY,
            open_timeout=INACTIVITY,
            resync_period=None,
            sync_timeout=60,
        ),
        leader_election=LeaderElectionSettings(enabled=False),
        servers=ServerSettings(metrics_bind_address="0", health_probe_bind_address="127.0.0.1:0"),
        shutdown_timeout=5,
    )


def probe(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


async def until_probe(port: int, path: str, want: Callable[[tuple[int, str]], bool], within: float) -> None:
    async with asyncio.timeout(within):
        while not want(await asyncio.to_thread(probe, port, path)):  # noqa: ASYNC110 - another thread's HTTP
            await asyncio.sleep(0.2)


def failures(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == "cannot reach the Kubernetes API server; retrying"]


def cm(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}


async def test_an_api_server_outage_keeps_liveness_ok_and_the_operator_resumes(
    control_plane: ControlPlane, kube: Kube, namespace: str
) -> None:
    await kube.create(CONFIGMAPS, cm("before"), namespace)
    seen = Seen()
    async with await Kube.connect(
        kubeconfig=str(control_plane.kubeconfig), context="admin", metrics=Metrics()
    ) as operator:
        manager = Manager(operator, settings(namespace))
        manager.add_controller(factory(seen)(manager))
        run = asyncio.create_task(manager.run())
        down = False
        try:
            await seen.until_seen("before")
            assert manager.health_server is not None
            port = manager.health_server.port
            await until_probe(port, "/readyz", lambda r: r[0] == 200, 30)

            down = True
            await asyncio.to_thread(control_plane.stop_apiserver)
            # Every reflector goes quiet for longer than 3 inactivity timeouts: readiness says so,
            # liveness does not (a restart would not bring the API server back).
            await until_probe(port, "/readyz", lambda r: r[0] == 503 and "watch stale" in r[1], 30)
            assert await asyncio.to_thread(probe, port, "/healthz") == (200, "ok\n")
            await asyncio.sleep(2 * INACTIVITY)  # quiet for longer still: liveness holds
            assert await asyncio.to_thread(probe, port, "/healthz") == (200, "ok\n")
            assert not run.done()

            restart_apiserver_here(control_plane)
            down = False
            await kube.create(CONFIGMAPS, cm("after"), namespace)
            await seen.until_seen("after")  # the same process resumed: watches re-opened
            await until_probe(port, "/readyz", lambda r: r[0] == 200, 30)
            assert await asyncio.to_thread(probe, port, "/healthz") == (200, "ok\n")
        finally:
            if down:  # a failure during the outage: the next tests need the API server
                restart_apiserver_here(control_plane)
            manager.stop()
            await asyncio.wait_for(run, 15)


async def test_a_start_without_an_api_server_waits_for_it(
    control_plane: ControlPlane, kube: Kube, namespace: str
) -> None:
    await kube.create(CONFIGMAPS, cm("waiting"), namespace)
    seen = Seen()
    s = settings(namespace)
    async with await Kube.connect(
        kubeconfig=str(control_plane.kubeconfig), context="admin", metrics=Metrics()
    ) as operator:
        await asyncio.to_thread(control_plane.stop_apiserver)
        restarted = False
        with structlog.testing.capture_logs() as logs:
            run = asyncio.create_task(
                manager_module.run(s, [factory(seen)], kube=operator, handle_signals=False)
            )
            try:
                async with asyncio.timeout(30):
                    while len(failures(logs)) < 3:  # noqa: ASYNC110 - polling captured log records
                        await asyncio.sleep(0.1)
                assert not run.done()  # waiting, not exited
                restart_apiserver_here(control_plane)
                restarted = True
                await seen.until_seen("waiting")
            finally:
                if not restarted:
                    restart_apiserver_here(control_plane)
                run.cancel()
                await asyncio.gather(run, return_exceptions=True)
        assert [e["attempt"] for e in failures(logs)[:3]] == [1, 2, 3]
        assert any(e["event"] == "the Kubernetes API server answers" for e in logs)
