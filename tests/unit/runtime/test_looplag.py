"""The event-loop lag instrument: how late a wake-up ran, seen in the histogram and the worst value."""

from __future__ import annotations

import asyncio
import time

from nova_operator.clock import FakeClock
from nova_operator.metrics import Metrics
from nova_operator.runtime.looplag import LoopLag
from tests.unit.runtime.conftest import Until


def lag_count(metrics: Metrics, le: str) -> float:
    value = metrics.registry.get_sample_value("nova_operator_event_loop_lag_seconds_bucket", {"le": le})
    return value or 0.0


async def test_a_wake_up_that_runs_late_is_recorded_by_how_late(until: Until) -> None:
    clock, metrics = FakeClock(), Metrics()
    lag = LoopLag(metrics.loop_lag.observe, interval=0.25, clock=clock)
    task = asyncio.create_task(lag.run())
    await until(lambda: clock.next_due() is not None)
    clock.advance(0.25)  # on time
    await until(lambda: lag_count(metrics, "+Inf") == 1)
    assert lag_count(metrics, "0.001") == 1
    await until(lambda: clock.next_due() is not None)
    clock.advance(3.25)  # the loop was held for 3 s past the wake-up
    await until(lambda: lag_count(metrics, "+Inf") == 2)
    assert lag_count(metrics, "2.5") == 1
    assert lag_count(metrics, "5.0") == 2
    assert lag.take_worst() == 3.0
    assert lag.worst == 0.0
    task.cancel()


async def test_a_blocked_loop_shows_as_lag_on_the_real_clock(until: Until) -> None:
    metrics = Metrics()
    lag = LoopLag(metrics.loop_lag.observe, interval=0.01)
    task = asyncio.create_task(lag.run())
    await asyncio.sleep(0)
    time.sleep(0.2)  # noqa: ASYNC251 - holding the loop is what is measured
    await until(lambda: lag.worst > 0)
    assert lag.worst >= 0.15  # at least the hold, less the interval it was asked to wait
    task.cancel()
