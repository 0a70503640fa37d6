"""The work queue: client-go semantics, driven by a fake clock."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from nova_operator.clock import FakeClock
from nova_operator.metrics import Metrics
from nova_operator.runtime.ratelimit import ItemExponential
from nova_operator.runtime.workqueue import ShutDown, WorkQueue

Until = Callable[[Callable[[], bool]], Awaitable[None]]


def make(clock: FakeClock | None = None, metrics: Metrics | None = None) -> WorkQueue[str]:
    c = clock or FakeClock()
    return WorkQueue(name="q", rate_limiter=ItemExponential(), clock=c, metrics=metrics)


async def get_now(q: WorkQueue[str]) -> str:
    return await asyncio.wait_for(q.get(), timeout=1)


async def test_duplicates_collapse_and_order_is_fifo() -> None:
    q = make()
    for key in ["a", "b", "a", "c", "b"]:
        q.add(key)
    assert len(q) == 3
    assert [await get_now(q) for _ in range(3)] == ["a", "b", "c"]
    assert len(q) == 0


async def test_a_key_is_never_handed_out_twice_while_processing() -> None:
    q = make()
    q.add("a")
    assert await get_now(q) == "a"
    q.add("a")  # re-added while a worker holds it
    assert len(q) == 0  # ... only marked dirty
    getter = asyncio.ensure_future(q.get())
    await asyncio.sleep(0)
    assert not getter.done()
    q.done("a")  # now it is handed out again, exactly once
    assert await asyncio.wait_for(getter, 1) == "a"
    q.done("a")
    assert len(q) == 0
    assert q.processing() == frozenset()


async def test_concurrent_workers_never_overlap_on_one_key(until: Until) -> None:
    q = make()
    active: set[str] = set()
    overlaps: list[str] = []
    processed: list[str] = []

    async def worker() -> None:
        while True:
            try:
                key = await q.get()
            except ShutDown:
                return
            if key in active:
                overlaps.append(key)
            active.add(key)
            await asyncio.sleep(0)
            q.add(key) if len(processed) < 30 else None  # keep re-adding while processing
            await asyncio.sleep(0)
            active.discard(key)
            processed.append(key)
            q.done(key)

    for key in "abc":
        q.add(key)
    workers = [asyncio.create_task(worker()) for _ in range(4)]
    await until(lambda: len(processed) >= 30 and not len(q) and not q.processing())
    q.shutdown()
    await asyncio.gather(*workers)
    assert overlaps == []
    assert set(processed) == {"a", "b", "c"}


async def test_add_after_releases_keys_in_deadline_order() -> None:
    clock = FakeClock()
    q = make(clock)
    q.add_after("late", 3.0)
    q.add_after("early", 1.0)
    q.add_after("middle", 2.0)
    assert len(q) == 0
    assert q.parked() == 3
    clock.advance(1.5)
    assert len(q) == 1
    clock.advance(10)
    assert [await get_now(q) for _ in range(3)] == ["early", "middle", "late"]


async def test_add_after_keeps_the_earliest_deadline_for_a_key() -> None:
    clock = FakeClock()
    q = make(clock)
    q.add_after("a", 5.0)
    q.add_after("a", 1.0)
    q.add_after("a", 9.0)
    clock.advance(1.0)
    assert await get_now(q) == "a"
    q.done("a")
    clock.advance(10)
    assert len(q) == 0  # the later deadlines were folded into the first


async def test_get_wakes_when_a_parked_key_comes_due() -> None:
    clock = FakeClock()
    q = make(clock)
    q.add_after("a", 2.0)
    getter = asyncio.ensure_future(q.get())
    await asyncio.sleep(0)
    clock.advance(1.9)
    await asyncio.sleep(0)
    assert not getter.done()
    clock.advance(0.1)
    assert await asyncio.wait_for(getter, 1) == "a"


async def test_rate_limited_adds_follow_the_backoff_sequence() -> None:
    clock = FakeClock()
    q = make(clock)
    expected = [0.005, 0.01, 0.02, 0.04]
    for delay in expected:
        q.add_rate_limited("a")
        clock.advance(delay * 0.99)
        assert len(q) == 0
        clock.advance(delay * 0.02)
        assert await get_now(q) == "a"
        q.done("a")
    assert q.num_requeues("a") == 4
    q.forget("a")
    assert q.num_requeues("a") == 0


async def test_shutdown_wakes_getters_and_drain_waits_for_held_keys() -> None:
    q = make()
    q.add("a")
    q.add("b")
    held = await get_now(q)
    idle = asyncio.ensure_future(q.get())
    q.add_after("later", 1.0)
    q.shutdown()
    with pytest.raises(ShutDown):
        await asyncio.wait_for(idle, 1)
    with pytest.raises(ShutDown):  # "b" is not handed out any more
        await get_now(q)
    assert q.parked() == 0
    drained = asyncio.ensure_future(q.drain())
    await asyncio.sleep(0)
    assert not drained.done()
    q.add("c")  # ignored after shutdown
    q.done(held)
    await asyncio.wait_for(drained, 1)


async def test_metrics_count_adds_depth_and_retries() -> None:
    clock = FakeClock()
    metrics = Metrics()
    q = make(clock, metrics)
    q.add("a")
    q.add("a")
    q.add("b")
    assert metrics.registry.get_sample_value("nova_operator_workqueue_adds_total", {"name": "q"}) == 2
    assert metrics.registry.get_sample_value("nova_operator_workqueue_depth", {"name": "q"}) == 2
    clock.advance(2.0)
    await get_now(q)
    assert (
        metrics.registry.get_sample_value("nova_operator_workqueue_queue_duration_seconds_sum", {"name": "q"})
        == 2.0
    )
    q.add_rate_limited("z")
    assert metrics.registry.get_sample_value("nova_operator_workqueue_retries_total", {"name": "q"}) == 1


async def test_a_getter_cancelled_after_being_woken_passes_the_key_on() -> None:
    q = make()
    first = asyncio.ensure_future(q.get())
    second = asyncio.ensure_future(q.get())
    await asyncio.sleep(0)
    q.add("a")  # wakes the first getter ...
    first.cancel()  # ... which is cancelled before it runs
    assert await asyncio.wait_for(second, 1) == "a"
    assert first.cancelled()


async def test_longest_running_processor_and_unfinished_work_are_read_at_scrape_time() -> None:
    clock, m = FakeClock(), Metrics()
    q = make(clock, m)

    def sample(name: str) -> float | None:
        return m.registry.get_sample_value(f"nova_operator_workqueue_{name}", {"name": "q"})

    assert sample("longest_running_processor_seconds") == 0
    q.add("a")
    q.add("b")
    assert await get_now(q) == "a"
    clock.advance(30)
    assert await get_now(q) == "b"
    clock.advance(10)
    assert sample("longest_running_processor_seconds") == 40
    assert sample("unfinished_work_seconds") == 50
    q.done("a")
    assert sample("longest_running_processor_seconds") == 10
    q.done("b")
    assert sample("longest_running_processor_seconds") == 0
    assert sample("unfinished_work_seconds") == 0


async def test_an_event_key_is_handed_out_before_a_key_whose_timer_came_due_first() -> None:
    clock = FakeClock()
    q = make(clock)
    q.add_after("poll", 1.0)
    clock.advance(1.0)  # the timer lane holds "poll" now
    q.add("event-1")
    q.add("event-2")
    assert len(q) == 3
    assert [await get_now(q) for _ in range(3)] == ["event-1", "event-2", "poll"]


async def test_an_event_for_a_key_waiting_in_the_timer_lane_moves_it_up() -> None:
    clock = FakeClock()
    q = make(clock)
    q.add_after("a", 1.0)
    q.add_after("b", 1.0)
    clock.advance(1.0)
    q.add("c")
    q.add("b")  # b's own event: it joins the event lane behind c, once
    assert len(q) == 3
    assert [await get_now(q) for _ in range(3)] == ["c", "b", "a"]


async def test_a_timer_key_waits_behind_events_at_most_later_max_wait() -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(name="q", rate_limiter=ItemExponential(), clock=clock, later_max_wait=5.0)
    q.add_after("poll", 0.5)
    clock.advance(0.5)
    for i in range(3):
        q.add(f"e{i}")
    assert await get_now(q) == "e0"
    clock.advance(5.0)  # "poll" has waited 5 s in its lane
    assert await get_now(q) == "poll"
    assert [await get_now(q) for _ in range(2)] == ["e1", "e2"]


async def test_a_key_readded_while_processing_returns_to_the_lane_of_what_readded_it() -> None:
    clock = FakeClock()
    q = make(clock)
    q.add("a")
    q.add("b")
    assert await get_now(q) == "a"
    assert await get_now(q) == "b"
    q.add_after("a", 0.0)  # a requeue (no delay) while a is held: the timer lane
    q.add("b")  # an event while b is held: the event lane
    q.done("a")
    q.done("b")
    q.add("c")
    assert [await get_now(q) for _ in range(3)] == ["b", "c", "a"]


async def test_a_requeue_for_a_key_already_waiting_for_an_event_changes_nothing() -> None:
    clock = FakeClock()
    q = make(clock)
    q.add("a")
    q.add("b")
    q.add_after("a", 0.0)
    assert len(q) == 2
    assert [await get_now(q) for _ in range(2)] == ["a", "b"]


async def test_a_prompt_key_joins_the_event_lane_when_due() -> None:
    """Work due after a delay (a pass that must see its own write first) is not a poll: when its
    time comes it is handed out in turn with the events, ahead of timer keys that came due first."""
    clock = FakeClock()
    q = make(clock)
    q.add_after("poll", 0.5)
    q.add_after("next", 1.0, prompt=True)
    clock.advance(0.5)
    q.add("e0")
    clock.advance(0.5)  # "next" is due: behind e0, ahead of "poll"
    q.add("e1")  # an event after it came due goes behind it
    assert len(q) == 4
    assert [await get_now(q) for _ in range(4)] == ["e0", "next", "e1", "poll"]


async def test_parked_twice_a_key_keeps_the_earlier_deadline_and_is_prompt_when_either_was() -> None:
    clock = FakeClock()
    q = make(clock)
    q.add_after("poll", 0.1)
    q.add_after("k", 0.5)
    q.add_after("k", 2.0, prompt=True)  # later: the deadline stays 0.5 s, the key becomes prompt
    clock.advance(0.5)
    assert len(q) == 2
    assert [await get_now(q) for _ in range(2)] == ["k", "poll"]
    q.add_after("j", 0.0, prompt=True)  # no delay: straight into the event lane
    q.add_after("poll2", 0.0)
    assert [await get_now(q) for _ in range(2)] == ["j", "poll2"]
    clock.advance(5.0)
    assert len(q) == 0  # the later deadline was dropped: "k" comes once


async def test_a_new_key_waits_for_at_most_one_pass_of_each_key_waiting_before_it() -> None:
    """Fair shares: keys whose every pass brings another event (their children keep changing)
    go to the back after each pass; a key added meanwhile (a new CR) is not queued behind them again."""
    q = make()
    for key in ("a", "b", "c"):
        q.add(key)
    order = []
    while "new" not in order:
        key = await get_now(q)
        order.append(key)
        if len(order) == 1:
            q.add("new")
        if key != "new":
            q.add(key)  # an event during its pass: one more pass, after the others
        q.done(key)
    assert order == ["a", "b", "c", "new"]


async def test_expedite_moves_a_key_waiting_in_the_event_lane_to_its_head() -> None:
    q = make()
    for key in ("a", "b", "c"):
        q.add(key)
    assert q.expedite("c") is True
    assert q.expedite("c") is True  # already at the head: stays there
    assert len(q) == 3  # moved, not added
    assert [await get_now(q) for _ in range(3)] == ["c", "a", "b"]


async def test_expedite_leaves_alone_what_is_not_waiting_in_the_event_lane() -> None:
    clock = FakeClock()
    q = make(clock)
    q.add("running")
    assert await get_now(q) == "running"
    q.add("running")  # an event during its pass: due, but its pass runs
    q.add_after("poll", 0.0)  # a poll: the timer lane
    q.add_after("parked", 1.0, prompt=True)  # a pass that must see its write first
    q.add("event")
    assert [q.expedite(k) for k in ("running", "poll", "parked", "unknown")] == [False] * 4
    q.done("running")
    assert [await get_now(q) for _ in range(3)] == ["event", "running", "poll"]
    clock.advance(1.0)
    assert await get_now(q) == "parked"  # at its time, not before
