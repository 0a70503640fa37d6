"""The controller's outcome switch, exception containment, and worker concurrency."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Awaitable, Callable

import pytest
import structlog

from nova_operator.clock import FakeClock
from nova_operator.metrics import Metrics
from nova_operator.runtime.controller import Controller
from nova_operator.runtime.handlers import enqueue_mapped
from nova_operator.runtime.ratelimit import ItemExponential
from nova_operator.runtime.request import Request, Result, TerminalError
from nova_operator.settings import QueueSettings

Until = Callable[[Callable[[], bool]], Awaitable[None]]

KEY = Request("ns", "obj")


class Scripted:
    """Returns (or raises) the next scripted outcome per call."""

    def __init__(self, *outcomes: Result | Exception) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[Request] = []
        self.context: list[dict[str, object]] = []

    async def reconcile(self, request: Request) -> Result:
        self.calls.append(request)
        self.context.append(structlog.contextvars.get_contextvars())
        outcome = self.outcomes.pop(0) if self.outcomes else Result()
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


def make(rec: Scripted, clock: FakeClock) -> Controller:
    return Controller("test", rec, clock=clock, rate_limiter=ItemExponential(), metrics=Metrics())


def total(ctl: Controller, result: str) -> float:
    value = ctl.metrics.registry.get_sample_value(
        "nova_operator_controller_reconcile_total", {"controller": "test", "result": result}
    )
    return value or 0.0


async def test_success_forgets_the_key_and_does_not_requeue() -> None:
    clock = FakeClock()
    ctl = make(Scripted(Result()), clock)
    ctl.queue.add_rate_limited(KEY)  # one earlier failure on record
    assert await ctl.reconcile_one(KEY) == "success"
    assert ctl.queue.num_requeues(KEY) == 0
    assert total(ctl, "success") == 1


async def test_error_requeues_with_growing_backoff() -> None:
    clock = FakeClock()
    ctl = make(Scripted(RuntimeError("boom"), RuntimeError("boom")), clock)
    assert await ctl.reconcile_one(KEY) == "error"
    assert ctl.queue.parked() == 1
    clock.advance(0.005)
    assert len(ctl.queue) == 1
    key = await ctl.queue.get()
    assert await ctl.reconcile_one(key) == "error"
    ctl.queue.done(key)
    clock.advance(0.0099)
    assert len(ctl.queue) == 0  # the second retry waits 10 ms
    clock.advance(0.0002)
    assert len(ctl.queue) == 1
    assert total(ctl, "error") == 2


async def test_requeue_after_bypasses_the_backoff() -> None:
    clock = FakeClock()
    ctl = make(Scripted(RuntimeError("x"), Result(requeue_after=7.0)), clock)
    await ctl.reconcile_one(KEY)
    assert ctl.queue.num_requeues(KEY) == 1
    clock.advance(1)
    ctl.queue.done(await ctl.queue.get())
    assert await ctl.reconcile_one(KEY) == "requeue_after"
    assert ctl.queue.num_requeues(KEY) == 0
    clock.advance(6.9)
    assert len(ctl.queue) == 0
    clock.advance(0.1)
    assert len(ctl.queue) == 1


async def test_terminal_error_is_not_retried() -> None:
    clock = FakeClock()
    ctl = make(Scripted(TerminalError("bad spec")), clock)
    assert await ctl.reconcile_one(KEY) == "terminal_error"
    clock.advance(3600)
    assert len(ctl.queue) == 0
    assert ctl.queue.parked() == 0
    assert total(ctl, "terminal_error") == 1


async def test_reconcile_log_context_carries_controller_key_and_reconcile_id() -> None:
    rec = Scripted(Result(), Result())
    ctl = make(rec, FakeClock())
    await ctl.reconcile_one(KEY)
    await ctl.reconcile_one(KEY)
    first, second = rec.context
    assert first["controller"] == "test"
    assert first["namespace"] == "ns"
    assert first["name"] == "obj"
    assert first["reconcile_id"] != second["reconcile_id"]
    assert "reconcile_id" not in structlog.contextvars.get_contextvars()


async def test_workers_reconcile_different_keys_concurrently_and_never_one_key_twice(until: Until) -> None:
    running: Counter[Request] = Counter()
    peak = 0
    overlap = False
    release = asyncio.Event()
    seen: list[Request] = []

    class Slow:
        async def reconcile(self, request: Request) -> Result:
            nonlocal peak, overlap
            overlap = overlap or running[request] > 0
            running[request] += 1
            peak = max(peak, sum(running.values()))
            seen.append(request)
            await release.wait()
            running[request] -= 1
            return Result()

    ctl = Controller("test", Slow(), settings=QueueSettings(workers=2), metrics=Metrics())
    for name in ("a", "b", "a", "c"):
        ctl.enqueue(Request("ns", name))
    task = asyncio.create_task(ctl.run())
    await until(lambda: len(seen) == 2)
    ctl.enqueue(Request("ns", "a"))  # while "a" is being reconciled
    release.set()
    await until(lambda: len(seen) == 4 and not ctl.queue.processing())
    ctl.stop()
    await asyncio.wait_for(task, 1)
    assert peak == 2
    assert not overlap
    assert sorted(r.name for r in seen) == ["a", "a", "b", "c"]


async def test_an_exception_in_one_key_does_not_stop_the_workers() -> None:
    done = asyncio.Event()

    class Flaky:
        async def reconcile(self, request: Request) -> Result:
            if request.name == "bad":
                raise KeyError("missing")
            done.set()
            return Result()

    ctl = Controller("test", Flaky(), metrics=Metrics(), settings=QueueSettings(workers=1))
    ctl.enqueue(Request("ns", "bad"))
    ctl.enqueue(Request("ns", "good"))
    task = asyncio.create_task(ctl.run())
    await asyncio.wait_for(done.wait(), 1)
    ctl.stop()
    await asyncio.wait_for(task, 1)


@pytest.mark.parametrize("workers", [0, -3])
def test_non_positive_worker_count_means_the_default(workers: int) -> None:
    ctl = Controller("test", Scripted(), settings=QueueSettings(workers=workers), metrics=Metrics())
    assert ctl.workers == 2


class CancelledInside:
    """Raises ``CancelledError`` from inside the reconcile (a cancelled future it awaited), once."""

    def __init__(self) -> None:
        self.calls: list[Request] = []
        self.done = asyncio.Event()

    async def reconcile(self, request: Request) -> Result:
        self.calls.append(request)
        if len(self.calls) == 1:
            inner: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            inner.cancel()
            await inner  # raises CancelledError, though nobody cancelled this task
        self.done.set()
        return Result()


async def test_a_cancelled_error_from_inside_a_reconcile_is_an_error_of_that_key() -> None:
    clock = FakeClock()
    rec = CancelledInside()
    ctl = make(rec, clock)
    ctl.workers = 1
    ctl.enqueue(KEY)
    task = asyncio.create_task(ctl.run())
    await asyncio.sleep(0.01)
    assert not task.done()  # the worker is alive
    assert total(ctl, "error") == 1
    assert ctl.queue.parked() == 1  # requeued with backoff, like any other error
    clock.advance(0.005)
    await asyncio.wait_for(rec.done.wait(), 1)  # and the same worker reconciles it again
    assert rec.calls == [KEY, KEY]
    assert total(ctl, "success") == 1
    ctl.stop()
    await asyncio.wait_for(task, 1)


async def test_the_workers_own_cancellation_still_ends_it() -> None:
    started = asyncio.Event()

    class Forever:
        async def reconcile(self, request: Request) -> Result:
            started.set()
            await asyncio.Event().wait()
            return Result()

    ctl = Controller("test", Forever(), metrics=Metrics(), settings=QueueSettings(workers=1))
    ctl.enqueue(KEY)
    task = asyncio.create_task(ctl.run())
    await asyncio.wait_for(started.wait(), 1)
    assert ctl.stuck(-1) == ["test ns/obj"]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 1)
    assert total(ctl, "error") == 0  # a shutdown is not an error of the key
    assert ctl.stuck(-1) == []


async def test_a_reconcile_timeout_names_the_key_and_the_bound() -> None:
    class Slow:
        async def reconcile(self, request: Request) -> Result:
            await asyncio.sleep(10)
            return Result()

    ctl = Controller("test", Slow(), metrics=Metrics(), settings=QueueSettings(reconcile_timeout=0.01))
    errors: list[str] = []
    with structlog.testing.capture_logs() as logs:
        assert await ctl.reconcile_one(KEY) == "error"
    errors = [str(entry.get("error")) for entry in logs if entry.get("log_level") == "error"]
    assert errors == ["reconcile of ns/obj did not finish within 0.01 s"]


async def test_a_reconcile_past_the_timeout_is_cancelled_counted_and_requeued_with_backoff() -> None:
    cancelled: list[Request] = []

    class Hanging:
        async def reconcile(self, request: Request) -> Result:
            try:
                await asyncio.Event().wait()  # a pass that would never end
            except asyncio.CancelledError:
                cancelled.append(request)
                raise
            return Result()

    ctl = Controller("test", Hanging(), metrics=Metrics(), settings=QueueSettings(reconcile_timeout=0.01))
    assert await ctl.reconcile_one(KEY) == "error"
    assert await ctl.reconcile_one(KEY) == "error"
    assert cancelled == [KEY, KEY]
    assert total(ctl, "error") == 2
    assert ctl.queue.num_requeues(KEY) == 2  # rate-limited: each retry waits longer


def test_reconciles_have_a_timeout_by_default_shorter_than_the_stuck_worker_check() -> None:
    ctl = Controller("test", object(), metrics=Metrics())  # type: ignore[arg-type]
    assert ctl.reconcile_timeout == 300.0
    assert ctl.reconcile_timeout < QueueSettings().stuck_after


@pytest.mark.parametrize(("other_change", "passes"), [(False, 1), (True, 2)])
async def test_the_echo_of_a_passs_own_write_seen_during_that_pass_starts_no_pass(
    until: Until, other_change: bool, passes: int
) -> None:
    """The watch delivers the echo before the pass has the write's response: decided at the pass's end."""
    seen: list[Request] = []
    child = {"metadata": {"name": "c", "namespace": "ns", "uid": "u1", "resourceVersion": "7"}}
    other = {"metadata": {**child["metadata"], "resourceVersion": "8"}}

    class Writer:
        async def reconcile(self, request: Request) -> Result:
            seen.append(request)
            if len(seen) == 1:
                handler.on_add(child)  # the echo comes first ...
                if other_change:
                    handler.on_update(child, other)  # ... and, in one case, somebody else's change
                await asyncio.sleep(0)
                ctl.own_writes.wrote(child, request)  # ... then the write's response
            return Result()

    ctl = Controller("test", Writer(), settings=QueueSettings(workers=1), metrics=Metrics())
    handler = enqueue_mapped(ctl.enqueue, lambda _obj: [KEY], echoes=ctl.own_writes)
    ctl.enqueue(KEY)
    task = asyncio.create_task(ctl.run())
    await until(lambda: len(seen) >= 1 and not ctl.queue.processing())
    await asyncio.sleep(0.05)
    await until(lambda: not ctl.queue.processing() and len(ctl.queue) == 0)
    ctl.stop()
    await asyncio.wait_for(task, 1)
    assert len(seen) == passes


async def test_a_short_requeue_is_due_work_and_joins_the_event_lane() -> None:
    """A requeue of at most ``prompt_requeue`` (the spec's 1 s "next pass") is handed out in turn
    with events when due; a longer one (a poll) waits behind them."""
    clock = FakeClock()
    poll, due, event = Request("ns", "poll"), Request("ns", "due"), Request("ns", "event")
    ctl = make(Scripted(Result(requeue_after=10.0), Result(requeue_after=1.0)), clock)
    assert await ctl.reconcile_one(poll) == "requeue_after"
    clock.advance(9.5)
    assert await ctl.reconcile_one(due) == "requeue_after"
    clock.advance(0.7)  # the poll came due
    ctl.enqueue(event)
    clock.advance(0.3)  # the next pass came due
    assert [await asyncio.wait_for(ctl.queue.get(), 1) for _ in range(3)] == [event, due, poll]


async def test_events_of_children_within_the_coalescing_window_make_one_pass() -> None:
    clock = FakeClock()
    ctl = Controller(
        "test",
        Scripted(),
        clock=clock,
        rate_limiter=ItemExponential(),
        metrics=Metrics(),
        settings=QueueSettings(coalesce=0.25),
    )
    new = Request("ns", "new")
    for i in range(3):  # three children turn ready one after the other, 0.1 s apart
        clock.advance(0.1 if i else 0.0)
        ctl.enqueue_together(KEY)
    ctl.enqueue(new)  # the CR's own event (a new CR) is not held
    assert await asyncio.wait_for(ctl.queue.get(), 1) == new
    assert len(ctl.queue) == 0
    clock.advance(0.05)  # 0.25 s after the first child's event: one key for the three
    assert len(ctl.queue) == 1
    assert await asyncio.wait_for(ctl.queue.get(), 1) == KEY
    assert ctl.queue.parked() == 0
    unheld = Controller(
        "test", Scripted(), clock=clock, metrics=Metrics(), settings=QueueSettings(coalesce=0)
    )
    unheld.enqueue_together(KEY)
    assert len(unheld.queue) == 1


async def run_clock(clock: FakeClock, seconds: float) -> None:
    """Advance ``clock`` one second at a time, letting the workers run between steps."""
    for _ in range(round(seconds)):
        for _ in range(30):
            await asyncio.sleep(0)
        clock.advance(1.0)
    for _ in range(30):
        await asyncio.sleep(0)


async def test_a_busy_namespace_delays_another_namespaces_event_by_at_most_one_pass_of_its_own() -> None:
    """Issue 36, queue starvation: ten slow Novas in one namespace (60 s passes, each asking for
    a poll 5 s after it) kept both workers: their timer keys had always waited past the timer
    lane's 30 s, so they went next every time, and 0 of 20 other namespaces' events were served
    in 10 minutes. Fair queuing across namespaces serves each of the 20 after at most one more
    pass of the busy namespace."""
    clock = FakeClock()
    busy_passes: list[float] = []  # when each pass of the busy namespace began
    added: dict[Request, int] = {}  # other namespaces' events: busy passes begun before the event
    served: dict[Request, int] = {}  # ... and before its pass

    class Tenants:
        async def reconcile(self, request: Request) -> Result:
            if request.namespace == "busy":
                busy_passes.append(clock.now())
                await clock.sleep(60.0)
                return Result(requeue_after=5.0)
            served[request] = len(busy_passes)
            await clock.sleep(1.0)
            return Result()

    ctl = Controller("test", Tenants(), clock=clock, metrics=Metrics(), settings=QueueSettings(workers=2))
    for i in range(10):
        ctl.enqueue(Request("busy", f"nova-{i}"))
    task = asyncio.create_task(ctl.run())
    try:
        await run_clock(clock, 120)  # the busy namespace's keys are cycling
        for i in range(20):
            key = Request(f"tenant-{i}", "nova")
            added[key] = len(busy_passes)
            ctl.enqueue(key)
        await run_clock(clock, 600)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert sorted(served, key=str) == sorted(added, key=str)  # all 20 served within 10 minutes
    delays = {str(key): served[key] - added[key] for key in served}
    assert max(delays.values()) <= 1, delays  # at most one more busy pass began before each
    assert len(busy_passes) > 12  # and the busy namespace was served meanwhile, not starved


async def test_the_rest_of_a_pass_cut_by_its_budget_comes_at_once_but_in_its_namespaces_turn() -> None:
    """A pass whose budget ran out returns a requeue of 0 s marked left over (``pipeline.LEFT_OVER``,
    counted): the rest is due work, handed out without delay, yet in its namespace's turn: another
    namespace's event, added behind the three pools of a busy namespace, waits for one pass of
    theirs, not three."""
    clock = FakeClock()
    passes: list[str] = []

    class Cut:
        async def reconcile(self, request: Request) -> Result:
            passes.append(str(request))
            if request.namespace == "big" and passes.count(str(request)) < 2:
                return Result(requeue_after=0.0, left_over=True)  # the budget ran out
            return Result()

    ctl = Controller("test", Cut(), clock=clock, metrics=Metrics(), settings=QueueSettings(workers=1))
    for name in ("p1", "p2", "p3"):
        ctl.enqueue(Request("big", name))
    ctl.enqueue(Request("small", "nova"))
    task = asyncio.create_task(ctl.run())
    try:
        await run_clock(clock, 1)
    finally:
        ctl.stop()
        await asyncio.wait_for(task, 1)
    assert passes == ["big/p1", "small/nova", "big/p2", "big/p3", "big/p1", "big/p2", "big/p3"]
    left_over = ctl.metrics.registry.get_sample_value(
        "nova_operator_controller_passes_left_over_total", {"controller": "test"}
    )
    assert left_over == 3
