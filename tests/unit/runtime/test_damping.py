"""Hot-loop damping on a fake clock: bursts pass, fights are slowed to one pass per cap."""

from __future__ import annotations

import asyncio

import structlog

from nova_operator.clock import FakeClock
from nova_operator.metrics import Metrics
from nova_operator.runtime.controller import Controller
from nova_operator.runtime.damping import HotKeys
from nova_operator.runtime.request import Request, Result
from nova_operator.settings import QueueSettings

KEY = Request("ns", "nova")


def test_a_burst_of_passes_like_an_install_is_not_delayed() -> None:
    hot: HotKeys[str] = HotKeys(after=30, cap=10.0)
    now = 0.0
    for _ in range(30):  # 30 passes, 0.2 s apart: 6 s of install
        hot.reconciled("k", now)
        assert hot.delay("k", now) == 0.0
        now += 0.2
    assert hot.hot() == 0
    now += 1.5  # a pause breaks the streak
    hot.reconciled("k", now)
    assert hot.delay("k", now) == 0.0


def test_a_fight_is_delayed_with_a_growing_backoff_up_to_the_cap_and_forgiven_when_quiet() -> None:
    hot: HotKeys[str] = HotKeys(after=30, cap=10.0)
    now = 0.0
    for _ in range(31):  # a fight: a pass every 0.1 s
        hot.reconciled("k", now)
        now += 0.1
    delays = []
    for _ in range(8):  # each event now waits, and each further pass doubles the wait
        d = hot.delay("k", now)
        delays.append(d)
        now += d
        hot.reconciled("k", now)
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]
    assert hot.hot() == 1
    assert hot.delay("other", now) == 0.0  # other keys are not affected
    now += 20.5  # left alone for twice the cap
    assert hot.delay("k", now) == 0.0
    hot.reconciled("k", now)
    assert hot.delay("k", now) == 0.0  # forgiven: a new streak starts


def test_a_fight_whose_passes_are_slow_is_damped_too() -> None:
    """A loaded machine: each pass takes 1.5 s, the other writer's event comes 0.1 s after it ends.
    Counted from pass start to pass start (1.6 s) the gaps would never make a streak."""
    hot: HotKeys[str] = HotKeys(after=30, cap=10.0)
    now = 0.0
    for _ in range(31):
        hot.reconciled("k", now, ended=now + 1.5)
        now += 1.6
    assert hot.delay("k", now) == 0.5
    assert hot.hot() == 1
    now += 0.5
    hot.reconciled("k", now, ended=now + 1.5)
    assert hot.delay("k", now + 1.6) == 1.0  # the backoff goes on growing
    slow: HotKeys[str] = HotKeys(after=30, cap=10.0)
    now = 0.0
    for _ in range(100):  # slow passes 1.2 s apart (end to start): not a fight, never hot
        slow.reconciled("k", now, ended=now + 1.5)
        now += 2.7
    assert slow.delay("k", now) == 0.0


class Writer:
    """A reconcile that writes once per pass (as the fight makes every pass re-apply)."""

    def __init__(self, metrics: Metrics, writes: bool = True) -> None:
        self.metrics, self.writes = metrics, writes

    async def reconcile(self, request: Request) -> Result:
        if self.writes:
            self.metrics.count_request("apply", "deployments.apps", "200")
        return Result()


def test_passes_that_write_nothing_neither_extend_nor_break_a_streak() -> None:
    hot: HotKeys[str] = HotKeys(after=3, cap=10.0)
    now = 0.0
    for _ in range(100):  # a rollout watched pass after pass, nothing to write
        hot.reconciled("k", now, wrote=False)
        now += 0.1
    assert hot.delay("k", now) == 0.0
    for _ in range(4):
        hot.reconciled("k", now)
        hot.reconciled("k", now + 0.05, wrote=False)
        now += 0.1
    assert hot.delay("k", now) == 0.5


async def test_the_controller_parks_events_of_a_hot_key_and_counts_them() -> None:
    clock = FakeClock()
    metrics = Metrics()
    ctl = Controller(
        "test",
        Writer(metrics),
        clock=clock,
        metrics=metrics,
        settings=QueueSettings(hot_after=5, hot_delay_cap=4),
    )
    for _ in range(6):  # six passes 0.1 s apart: over the threshold
        await ctl.reconcile_one(KEY)
        clock.advance(0.1)
    with structlog.testing.capture_logs() as logs:
        ctl.enqueue(KEY)
        ctl.enqueue(KEY)
    assert len(ctl.queue) == 0  # not ready at once
    assert ctl.queue.parked() == 1
    assert [e["event"] for e in logs].count(
        "key re-triggered pass after pass (another writer fighting?); delaying its events"
    ) == 1  # logged once per hot spell
    damped = ctl.metrics.registry.get_sample_value(
        "nova_operator_controller_damped_events_total", {"controller": "test"}
    )
    assert damped == 2
    clock.advance(0.5)
    assert len(ctl.queue) == 1  # the first backoff step: 0.5 s
    ctl.enqueue(Request("ns", "other"))
    assert len(ctl.queue) == 2  # another key goes at once


async def test_a_controller_whose_passes_write_nothing_never_damps() -> None:
    clock = FakeClock()
    metrics = Metrics()
    ctl = Controller(
        "test",
        Writer(metrics, writes=False),
        clock=clock,
        metrics=metrics,
        settings=QueueSettings(hot_after=2),
    )
    for _ in range(20):
        await ctl.reconcile_one(KEY)
        clock.advance(0.1)
    ctl.enqueue(KEY)
    assert len(ctl.queue) == 1


async def test_requeues_the_reconciler_asks_for_are_not_damped() -> None:
    class Requeue:
        async def reconcile(self, request: Request) -> Result:
            return Result(requeue_after=0.0)

    clock = FakeClock()
    ctl = Controller("test", Requeue(), clock=clock, metrics=Metrics(), settings=QueueSettings(hot_after=2))
    for _ in range(5):
        await ctl.reconcile_one(KEY)
        clock.advance(0.01)
        ctl.queue.done(await ctl.queue.get())
    assert (
        ctl.metrics.registry.get_sample_value(
            "nova_operator_controller_damped_events_total", {"controller": "test"}
        )
        == 0
    )


async def test_a_key_that_writes_nothing_is_not_damped_for_another_keys_concurrent_writes() -> None:
    # Issue 26 item 13: "this pass wrote" came from a process-wide count, so a quiet key whose
    # passes overlapped a writing key's was taken for a fighter (29 of 60 events delayed).
    clock = FakeClock()
    metrics = Metrics()
    quiet, loud = Request("ns", "quiet"), Request("ns", "loud")

    class Overlapping:
        """``loud`` writes while ``quiet``'s pass is in flight (two workers, interleaved)."""

        def __init__(self) -> None:
            self.quiet_running = asyncio.Event()
            self.loud_wrote = asyncio.Event()

        async def reconcile(self, request: Request) -> Result:
            if request == quiet:
                self.quiet_running.set()
                await self.loud_wrote.wait()
            else:
                await self.quiet_running.wait()
                metrics.count_request("apply", "deployments.apps", "200")
                self.loud_wrote.set()
            return Result()

    ctl = Controller("test", Overlapping(), clock=clock, metrics=metrics, settings=QueueSettings(hot_after=3))
    for _ in range(10):
        rec = Overlapping()
        ctl.reconciler = rec
        await asyncio.gather(ctl.reconcile_one(quiet), ctl.reconcile_one(loud))
        clock.advance(0.1)
    ctl.enqueue(quiet)
    assert len(ctl.queue) == 1  # at once: its passes wrote nothing
    ctl.enqueue(loud)
    assert len(ctl.queue) == 1
    assert ctl.queue.parked() == 1  # the writer is hot


async def test_writes_of_a_passs_subtasks_count_as_the_passs() -> None:
    clock = FakeClock()
    metrics = Metrics()

    class Forking:
        async def reconcile(self, request: Request) -> Result:
            async def write() -> None:
                metrics.count_request("apply", "deployments.apps", "200")

            async with asyncio.TaskGroup() as tg:
                tg.create_task(write())
            return Result()

    ctl = Controller("test", Forking(), clock=clock, metrics=metrics, settings=QueueSettings(hot_after=3))
    for _ in range(5):
        await ctl.reconcile_one(KEY)
        clock.advance(0.1)
    ctl.enqueue(KEY)
    assert ctl.queue.parked() == 1
