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


def by_tenant(clock: FakeClock | None = None, later_max_wait: float = 30.0) -> WorkQueue[str]:
    """Keys "tenant/name"; the flow is the tenant."""
    return WorkQueue(
        name="q",
        rate_limiter=ItemExponential(),
        clock=clock or FakeClock(),
        later_max_wait=later_max_wait,
        flow=lambda key: key.split("/")[0],
    )


async def test_a_flow_with_many_keys_delays_another_flows_event_by_at_most_one_of_its_passes() -> None:
    q = by_tenant()
    for i in range(100):
        q.add(f"big/{i}")
    assert await get_now(q) == "big/0"
    q.done("big/0")
    q.add("small/a")
    q.add("other/a")
    assert [await get_now(q) for _ in range(5)] == ["big/1", "small/a", "other/a", "big/2", "big/3"]
    assert len(q) == 100 - 4


async def test_a_free_worker_goes_to_a_flow_with_nothing_running_first() -> None:
    """As fair queuing counts the seats a flow holds: while one of big's passes runs, the flows
    waiting with nothing running go first, though big is ahead of them in turn."""
    q = by_tenant()
    for i in range(100):
        q.add(f"big/{i}")
    assert await get_now(q) == "big/0"  # running
    q.add("small/a")
    q.add("other/a")
    assert [await get_now(q) for _ in range(2)] == ["small/a", "other/a"]
    q.add("late/a")
    assert await get_now(q) == "late/a"
    assert await get_now(q) == "big/1"  # every flow waiting runs a pass: big is first in turn again
    q.done("small/a")
    q.add("small/b")
    assert await get_now(q) == "small/b"  # nothing of small's runs any more
    assert await get_now(q) == "big/2"  # only big has keys waiting


async def test_flows_take_turns_and_a_flow_served_goes_to_the_back() -> None:
    q = by_tenant()
    for key in ("a/1", "a/2", "a/3", "b/1", "b/2", "c/1"):
        q.add(key)
    order = [await get_now(q) for _ in range(6)]
    assert order == ["a/1", "b/1", "c/1", "a/2", "b/2", "a/3"]


async def test_a_flows_passes_readded_each_time_do_not_keep_another_flows_event_waiting() -> None:
    """A flow whose every pass brings another event for each of its keys (slow passes, children
    that keep changing) is served one pass per turn; the other flow's event goes next."""
    q = by_tenant()
    for i in range(10):
        q.add(f"busy/{i}")
    served: list[str] = []
    while "quiet/a" not in served:
        key = await get_now(q)
        served.append(key)
        if len(served) == 3:
            q.add("quiet/a")
        if key.startswith("busy/"):
            q.add(key)
        q.done(key)
    assert served == ["busy/0", "busy/1", "busy/2", "busy/3", "quiet/a"]


async def test_another_flows_young_polls_wait_behind_an_event_and_old_ones_go_in_turn() -> None:
    clock = FakeClock()
    q = by_tenant(clock, later_max_wait=5.0)
    for i in range(3):
        q.add_after(f"polls/{i}", 1.0)
    clock.advance(1.0)  # "polls" is first in turn, with only timer keys
    q.add("events/1")
    q.add("events/2")
    assert await get_now(q) == "events/1"  # young polls do not go before another flow's event
    clock.advance(5.0)  # now the polls are old: their flow goes in turn, one pass per turn
    q.add("events/3")
    assert [await get_now(q) for _ in range(5)] == ["polls/0", "events/2", "polls/1", "events/3", "polls/2"]


async def test_within_a_flow_the_lanes_keep_their_rules() -> None:
    clock = FakeClock()
    q = by_tenant(clock, later_max_wait=5.0)
    q.add_after("a/poll", 0.5)
    clock.advance(0.5)
    q.add("a/e0")
    q.add("a/e1")
    q.add("b/e0")
    assert [await get_now(q) for _ in range(2)] == ["a/e0", "b/e0"]
    clock.advance(5.0)
    assert [await get_now(q) for _ in range(2)] == ["a/poll", "a/e1"]


async def test_expedite_puts_the_keys_flow_first_in_turn() -> None:
    q = by_tenant()
    for key in ("a/1", "b/1", "c/1", "c/2"):
        q.add(key)
    assert q.expedite("c/2") is True
    assert [await get_now(q) for _ in range(4)] == ["c/2", "a/1", "b/1", "c/1"]
    assert q.expedite("c/1") is False  # handed out: nothing to move


async def test_an_expedited_key_goes_next_though_its_flow_has_a_key_running() -> None:
    q = by_tenant()
    for key in ("a/1", "a/2", "b/1", "c/1"):
        q.add(key)
    assert await get_now(q) == "a/1"  # running
    assert q.expedite("a/2") is True
    assert [await get_now(q) for _ in range(3)] == ["a/2", "b/1", "c/1"]


async def test_a_key_of_a_flow_is_never_handed_out_twice_and_readds_collapse() -> None:
    q = by_tenant()
    q.add("a/1")
    q.add("b/1")
    assert await get_now(q) == "a/1"
    q.add("a/1")  # during its pass: dirty only
    q.add("a/1")
    assert len(q) == 1
    assert await get_now(q) == "b/1"
    assert len(q) == 0
    q.done("a/1")
    assert len(q) == 1
    assert await get_now(q) == "a/1"
