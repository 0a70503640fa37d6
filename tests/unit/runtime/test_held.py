"""``HeldWrites``: a write held back a moment, dropped by the key's next pass, sent when none comes."""

from __future__ import annotations

import asyncio

from nova_operator.clock import FakeClock
from nova_operator.runtime.held import HeldWrites
from nova_operator.runtime.workqueue import WorkQueue

KEY, OTHER = "ns/a", "ns/b"


class Writes:
    def __init__(self, fail: bool = False) -> None:
        self.sent: list[str] = []
        self.fail = fail
        self.release: asyncio.Event | None = None

    def write(self, what: str):  # type: ignore[no-untyped-def]
        async def send() -> None:
            if self.release is not None:
                await self.release.wait()
            if self.fail:
                raise RuntimeError("the API server said no")
            self.sent.append(what)

        return send


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_held_write_is_sent_after_the_hold_when_no_pass_comes() -> None:
    clock, writes = FakeClock(), Writes()
    held: HeldWrites[str] = HeldWrites(hold=1.0, longest=10.0, clock=clock)
    held.hold(KEY, writes.write("waiting"))
    clock.advance(0.99)
    await settle()
    assert writes.sent == []
    clock.advance(0.02)
    await settle()
    assert writes.sent == ["waiting"]
    assert len(held) == 0
    assert held.sending() == 0


async def test_the_keys_next_pass_drops_the_held_write() -> None:
    clock, writes = FakeClock(), Writes()
    held: HeldWrites[str] = HeldWrites(hold=1.0, longest=10.0, clock=clock)
    held.hold(KEY, writes.write("waiting for the database"))
    held.hold(OTHER, writes.write("the other's"))
    assert await held.take(KEY) is True
    assert await held.take(KEY) is False  # nothing left to drop
    clock.advance(5.0)
    await settle()
    assert writes.sent == ["the other's"]  # only the key's own pass drops its write


async def test_a_later_hold_replaces_the_earlier_one() -> None:
    clock, writes = FakeClock(), Writes()
    held: HeldWrites[str] = HeldWrites(hold=1.0, longest=10.0, clock=clock)
    held.hold(KEY, writes.write("first"))
    held.hold(KEY, writes.write("second"))
    clock.advance(1.0)
    await settle()
    assert writes.sent == ["second"]


async def test_while_the_next_pass_is_due_the_write_waits_for_it_up_to_the_longest() -> None:
    clock, writes = FakeClock(), Writes()
    due = {KEY}
    held: HeldWrites[str] = HeldWrites(hold=1.0, longest=3.0, due=lambda k: k in due, clock=clock)
    held.hold(KEY, writes.write("waiting"))
    clock.advance(2.5)
    await settle()
    assert writes.sent == []  # its next pass is queued: that pass reports
    assert await held.take(KEY) is True
    held.hold(KEY, writes.write("still waiting"))  # that pass's report, with yet another pass due
    clock.advance(3.0)
    await settle()
    assert writes.sent == ["still waiting"]  # no pass began in time: reported after all


async def test_at_the_longest_a_pass_still_queued_goes_next_and_its_report_replaces_the_held_one() -> None:
    """Under load the pass that would supersede the held report waits behind other keys' passes.
    At ``longest`` it is moved to the head of the queue: the next free worker takes it, and the
    stale report is never sent."""
    clock, writes = FakeClock(), Writes()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    held: HeldWrites[str] = HeldWrites(
        hold=1.0, longest=3.0, due=queue.due, expedite=queue.expedite, clock=clock
    )
    for key in ("x", "y", KEY, "z"):
        queue.add(key)  # KEY's next pass is due, behind two other keys' passes
    held.hold(KEY, writes.write("routes not accepted yet"))
    clock.advance(2.9)
    await settle()
    assert await queue.get() == "x"  # a worker takes the head as usual meanwhile
    clock.advance(0.1)
    await settle()
    assert writes.sent == []
    assert await queue.get() == KEY  # the next free worker takes the overdue pass
    assert await held.take(KEY) is True  # which drops the stale report
    clock.advance(5.0)
    await settle()
    assert writes.sent == []
    assert [await queue.get() for _ in range(2)] == ["y", "z"]


async def test_an_expedited_pass_that_does_not_begin_within_the_hold_leaves_the_report_sent() -> None:
    clock, writes = FakeClock(), Writes()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    expedited: list[str] = []

    def expedite(key: str) -> bool:
        expedited.append(key)
        return queue.expedite(key)

    held: HeldWrites[str] = HeldWrites(hold=1.0, longest=3.0, due=queue.due, expedite=expedite, clock=clock)
    queue.add(KEY)
    held.hold(KEY, writes.write("waiting"))
    clock.advance(3.0)
    await settle()
    assert expedited == [KEY]
    assert writes.sent == []
    clock.advance(0.99)
    await settle()
    assert writes.sent == []
    clock.advance(0.02)  # every worker still busy: reported after all, and moved up only once
    await settle()
    assert writes.sent == ["waiting"]
    assert expedited == [KEY]


async def test_a_held_write_whose_next_pass_is_only_parked_is_sent_at_the_longest() -> None:
    clock, writes = FakeClock(), Writes()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    held: HeldWrites[str] = HeldWrites(
        hold=1.0, longest=3.0, due=queue.due, expedite=queue.expedite, clock=clock
    )
    queue.add_after(KEY, 10.0, prompt=True)  # due, but not before its time: nothing to move up
    held.hold(KEY, writes.write("waiting"))
    clock.advance(3.0)
    await settle()
    assert writes.sent == ["waiting"]


async def test_a_pass_beginning_while_the_write_is_sent_waits_for_it() -> None:
    clock, writes = FakeClock(), Writes()
    writes.release = asyncio.Event()
    held: HeldWrites[str] = HeldWrites(hold=1.0, longest=10.0, clock=clock)
    held.hold(KEY, writes.write("waiting"))
    clock.advance(1.0)
    await settle()
    assert held.sending() == 1
    taking = asyncio.create_task(held.take(KEY))
    await settle()
    assert not taking.done()  # the pass must not read before the write is in
    writes.release.set()
    assert await taking is False
    assert writes.sent == ["waiting"]


async def test_a_failed_write_wakes_the_key() -> None:
    clock, writes = FakeClock(), Writes(fail=True)
    woken: list[str] = []
    held: HeldWrites[str] = HeldWrites(hold=1.0, longest=10.0, failed=woken.append, clock=clock)
    held.hold(KEY, writes.write("waiting"))
    clock.advance(1.0)
    await settle()
    assert woken == [KEY]
    assert held.sending() == 0


async def test_close_drops_what_is_held() -> None:
    clock, writes = FakeClock(), Writes()
    held: HeldWrites[str] = HeldWrites(hold=1.0, longest=10.0, clock=clock)
    held.hold(KEY, writes.write("waiting"))
    held.close()
    clock.advance(5.0)
    await settle()
    assert writes.sent == []
    assert len(held) == 0


def test_the_queue_tells_due_work_from_polls() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after(KEY, 10.0)  # a poll
    assert not queue.due(KEY)
    queue.add_after(KEY, 0.25, prompt=True)  # a child's event, held to be coalesced
    assert queue.due(KEY)
    queue.add(OTHER)  # an event
    assert queue.due(OTHER)
    clock.advance(0.3)
    assert queue.due(KEY)  # now in the event lane


async def test_a_stopped_controller_drops_the_held_writes_of_its_reconciler() -> None:
    from nova_operator.metrics import Metrics
    from nova_operator.runtime.controller import Controller
    from nova_operator.runtime.request import Request, Result

    clock, writes = FakeClock(), Writes()
    held: HeldWrites[Request] = HeldWrites(hold=1.0, longest=10.0, clock=clock)

    class Holding:
        async def reconcile(self, request: Request) -> Result:
            held.hold(request, writes.write("waiting"))
            return Result()

    ctl = Controller("held", Holding(), clock=clock, metrics=Metrics())
    ctl.on_stop(held.close)
    running = asyncio.create_task(ctl.run())
    ctl.enqueue(Request("ns", "a"))
    for _ in range(20):
        await asyncio.sleep(0)
    assert len(held) == 1
    ctl.stop()
    await running
    clock.advance(5.0)
    await settle()
    assert writes.sent == []
    assert len(held) == 0
