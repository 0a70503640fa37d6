"""The simulated cluster's stop order: the stand-in operators end before the teardown parts.

The real tier's RabbitMQ and MariaDB stand-ins act on the backing servers, and stopping those
servers is a teardown part: a stand-in still running then fails every look at a stopped broker.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

from simcluster.platform.launch import Sidecar, SimHandle


def test_the_stand_ins_have_ended_when_the_first_teardown_part_runs() -> None:
    sidecar = Sidecar()
    order: list[str] = []

    async def event() -> asyncio.Event:
        return asyncio.Event()

    stop_event = sidecar.call(event())

    async def standins() -> None:
        await stop_event.wait()
        await asyncio.sleep(0.2)  # a stand-in finishing the look it is in
        order.append("stand-ins ended")

    cluster = SimpleNamespace(
        stop=lambda: order.append("control plane"), control_plane=SimpleNamespace(stop_seconds={})
    )
    handle = SimHandle(
        cluster=cast(Any, cluster),
        nodes={},
        sidecar=sidecar,
        _stop_event=stop_event,
        _standins_future=sidecar.spawn(standins()),
        teardown=[("backing servers", lambda: order.append("backing servers"))],
    )
    handle.stop()
    assert order == ["stand-ins ended", "backing servers", "control plane"]
    assert {"stand-ins", "backing servers"} <= set(handle.stop_seconds)
