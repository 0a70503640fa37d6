"""Fixtures for the runtime's integration tests: a ``Kube`` seam on the real control plane."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from simcluster import ControlPlane

from nova_operator.kube import Kube
from nova_operator.kube.types import Object
from nova_operator.metrics import Metrics
from nova_operator.settings import LeaderElectionSettings, ServerSettings, Settings, WatchSettings


@pytest.fixture
async def kube(control_plane: ControlPlane) -> AsyncIterator[Kube]:
    """An admin ``Kube`` (plays the user and the missing controllers; its requests are not the operator's)."""
    k = await Kube.connect(kubeconfig=str(control_plane.kubeconfig), context="admin", metrics=Metrics())
    async with k:
        yield k


@pytest.fixture
def fast_settings(namespace: str) -> Callable[..., Settings]:
    """Settings with test-sized intervals, watching ``namespace``, servers off, leader election off."""

    def make(**leader: Any) -> Settings:
        return Settings(
            watch=WatchSettings(
                namespaces=(namespace,),
                backoff_initial=0.05,
                backoff_max=0.5,
                inactivity_timeout=20,
                resync_period=None,
                sync_timeout=20,
            ),
            leader_election=LeaderElectionSettings(
                **{"enabled": False, "namespace": namespace, **leader},
            ),
            servers=ServerSettings(metrics_bind_address="0", health_probe_bind_address="0"),
            shutdown_timeout=5,
        )

    return make


class Recorder:
    """An event handler that records (event, name, data) and lets a test await a condition."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Object | None]] = []
        self._changed = asyncio.Event()

    def on_add(self, obj: Object) -> None:
        self._record("add", obj)

    def on_update(self, old: Object, new: Object) -> None:
        self._record("update", new)

    def on_delete(self, obj: Object) -> None:
        self._record("delete", obj)

    def _record(self, kind: str, obj: Object) -> None:
        self.events.append((kind, obj["metadata"]["name"], obj.get("data")))
        self._changed.set()

    async def until(self, condition: Callable[[], bool], within: float = 20) -> None:
        """Wait (on events, not on a timer) until ``condition()`` holds."""
        async with asyncio.timeout(within):
            while not condition():
                self._changed.clear()
                await self._changed.wait()
