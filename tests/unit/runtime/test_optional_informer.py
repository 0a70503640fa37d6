"""An optional informer (issue 41: the Node informer) neither holds up the controllers nor readiness."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, cast

from nova_operator.kube import Kube
from nova_operator.kube.errors import Forbidden
from nova_operator.kube.resources import CONFIGMAPS, NODES
from nova_operator.metrics import Metrics
from nova_operator.runtime.manager import Manager
from nova_operator.settings import LeaderElectionSettings, ServerSettings, Settings, WatchSettings


class NoKube:
    def __init__(self) -> None:
        self.metrics = Metrics()


class Lists:
    """Lists ``ref`` (empty), or answers 403 when ``forbidden``; every watch hangs."""

    def __init__(self, forbidden: bool) -> None:
        self.forbidden = forbidden
        self.lists = 0

    async def list(self, *a: Any, **kw: Any) -> dict[str, Any]:
        self.lists += 1
        if self.forbidden:
            raise Forbidden(403, "nodes is forbidden")
        return {"metadata": {"resourceVersion": "1"}, "items": []}

    def watch(self, *a: Any, **kw: Any) -> Any:
        return self

    async def __aenter__(self) -> Any:
        await asyncio.Event().wait()

    async def __aexit__(self, *exc: object) -> None:
        return None


def manager() -> Manager:
    s = Settings(
        leader_election=LeaderElectionSettings(enabled=False),
        servers=ServerSettings(metrics_bind_address="0", health_probe_bind_address="0"),
        watch=WatchSettings(backoff_initial=0.01, backoff_max=0.02, sync_timeout=1, inactivity_timeout=60),
    )
    return Manager(cast(Kube, NoKube()), dataclasses.replace(s))


async def test_a_forbidden_optional_informer_does_not_hold_up_sync_or_readiness() -> None:
    m = manager()
    required = m.informer(CONFIGMAPS)
    optional = m.informer(NODES, optional=True)
    required._lw, forbidden = cast(Any, Lists(False)), Lists(True)
    optional._lw = cast(Any, forbidden)
    m._running = True
    tasks = [asyncio.create_task(inf.run()) for inf in m.informers]
    try:
        await asyncio.wait_for(m._wait_for_sync(), 2)  # would raise CacheSyncTimeout if it waited
        await asyncio.sleep(0.1)
        assert forbidden.lists >= 2  # it keeps trying, with its backoff
        assert not optional.has_synced
        assert m.ready()
        assert m.readiness_problems() == []
        assert m.required == [required]
        assert set(m.informers) == {required, optional}  # started all the same
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def test_a_caller_asking_for_the_same_informer_as_required_makes_it_required() -> None:
    m = manager()
    optional = m.informer(NODES, optional=True)
    assert m.required == []
    assert m.informer(NODES) is optional
    assert m.required == [optional]
    m.informer(NODES, optional=True)  # a later optional caller does not undo it
    assert m.required == [optional]
