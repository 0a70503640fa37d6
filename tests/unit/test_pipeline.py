from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from typing import Self

import pytest

from nova_operator.pipeline import Step, all_in_order, run_group, run_sequence
from nova_operator.runtime.request import Result


@dataclass
class Ctx:
    conditions: dict[str, str] = field(default_factory=dict)
    ran: list[str] = field(default_factory=list)

    def fork(self) -> Self:
        return copy.deepcopy(self)

    def adopt_condition(self, member: Self, condition_type: str) -> None:
        if condition_type in member.conditions:
            self.conditions[condition_type] = member.conditions[condition_type]
        self.ran.extend(r for r in member.ran if r not in self.ran)

    def adopt_step(self, member: Self, condition_type: str) -> None:
        self.adopt_condition(member, condition_type)


@dataclass
class Recorder:
    seen: list[tuple[str, str, bool]] = field(default_factory=list)

    def observe_step(self, step: str, condition: str, seconds: float, *, failed: bool) -> None:
        assert seconds >= 0
        self.seen.append((step, condition, failed))


def step(name: str, result: Result | Exception, *, delay: float = 0.0) -> Step[Ctx]:
    async def run(ctx: Ctx) -> Result:
        ctx.ran.append(name)
        if delay:
            await asyncio.sleep(delay)
        ctx.conditions[f"{name}Ready"] = "set"
        if isinstance(result, Exception):
            raise result
        return result

    return Step(name, f"{name}Ready", run)


async def test_sequence_runs_in_order_and_stops_at_the_first_requeue() -> None:
    ctx, obs = Ctx(), Recorder()
    steps = [step("A", Result()), step("B", Result(requeue_after=15)), step("C", Result())]
    assert await run_sequence(steps, ctx, obs) == Result(requeue_after=15)
    assert ctx.ran == ["A", "B"]
    assert obs.seen == [("A", "AReady", False), ("B", "BReady", False)]


async def test_sequence_error_stops_and_is_observed_as_failed() -> None:
    ctx, obs = Ctx(), Recorder()
    with pytest.raises(RuntimeError, match="boom"):
        await run_sequence([step("A", RuntimeError("boom")), step("B", Result())], ctx, obs)
    assert ctx.ran == ["A"]
    assert obs.seen == [("A", "AReady", True)]


async def test_group_returns_the_shortest_requeue_and_merges_every_condition() -> None:
    ctx, obs = Ctx(), Recorder()
    members = [step("X", Result(requeue_after=10)), step("Y", Result()), step("Z", Result(requeue_after=3))]
    assert await run_group(members, ctx, obs) == Result(requeue_after=3)
    assert ctx.conditions == {"XReady": "set", "YReady": "set", "ZReady": "set"}
    assert sorted(s for s, _, _ in obs.seen) == ["X", "Y", "Z"]


async def test_group_error_cancels_slow_members_and_keeps_finished_conditions() -> None:
    ctx, obs = Ctx(), Recorder()
    members = [
        step("Fast", Result()),
        step("Bad", ValueError("no")),
        step("Slow", Result(), delay=30),
    ]
    with pytest.raises(ValueError, match="no"):
        await asyncio.wait_for(run_group(members, ctx, obs), timeout=5)
    assert ctx.conditions == {"FastReady": "set", "BadReady": "set"}  # Slow never set its condition
    assert ("Bad", "BadReady", True) in obs.seen


async def test_group_members_work_on_their_own_copies() -> None:
    async def mutate(c: Ctx) -> Result:
        c.conditions["Other"] = "leak"
        c.conditions["MReady"] = "ok"
        return Result()

    ctx = Ctx()
    await run_group([Step("M", "MReady", mutate)], ctx, Recorder())
    assert ctx.conditions == {"MReady": "ok"}


@dataclass
class RefusableCtx(Ctx):
    def refused(self, condition: str, reason: str, message: str) -> None:
        self.conditions[condition] = f"False/{reason}/{message}"


def _refusing(name: str, status: int) -> Step[RefusableCtx]:
    from nova_operator.kube.errors import from_status

    async def run(ctx: RefusableCtx) -> Result:
        ctx.ran.append(name)
        raise from_status(status, b'{"message": "CronJob.batch \\"x\\" is invalid: spec.schedule: bad"}')

    return Step(name, f"{name}Ready", run, on_refusal="continue" if name.startswith("c") else "stop")


async def test_a_refused_child_is_the_steps_condition_and_the_sequence_goes_on_or_stops() -> None:
    ctx = RefusableCtx()
    ok: Step[RefusableCtx] = Step("after", "AfterReady", lambda c: _ran(c, "after"))
    assert await run_sequence([_refusing("child", 422), ok], ctx, Recorder()) == Result()
    assert ctx.ran == ["child", "after"]
    assert ctx.conditions["childReady"].startswith("False/ChildRejected/the API server refused")
    assert "spec.schedule: bad" in ctx.conditions["childReady"]
    stopped = RefusableCtx()
    await run_sequence([_refusing("secrets", 400), ok], stopped, Recorder())
    assert stopped.ran == ["secrets"]  # an input step stops what depends on it


def _held(name: str) -> Step[RefusableCtx]:
    from nova_operator.ownership import ChildOwnedByAnother

    async def run(ctx: RefusableCtx) -> Result:
        ctx.ran.append(name)
        raise ChildOwnedByAnother(f"Service ns/{name} exists and is not this Nova's")

    return Step(name, f"{name}Ready", run, on_refusal="continue" if name.startswith("c") else "stop")


async def test_a_child_held_by_another_owner_is_reported_and_looked_at_again() -> None:
    """Issue 26: nothing wakes the CR when the holder lets go, so the refusal carries a requeue."""
    ctx = RefusableCtx()
    ok: Step[RefusableCtx] = Step("after", "AfterReady", lambda c: _ran(c, "after"))
    assert await run_sequence([_held("child"), ok], ctx, Recorder()) == Result(requeue_after=60.0)
    assert ctx.ran == ["child", "after"]  # a continue step: the rest still runs
    reported = "False/ChildOwnedByAnother/Service ns/child exists and is not this Nova's"
    assert ctx.conditions["childReady"] == reported
    stopped = RefusableCtx()
    assert await run_sequence([_held("secrets"), ok], stopped, Recorder()) == Result(requeue_after=60.0)
    assert stopped.ran == ["secrets"]
    batch = RefusableCtx()
    held = Step("child", "childReady", _held("child").run, on_refusal="continue", batch="b")
    later = Step("after", "AfterReady", lambda c: _ran(c, "after"), batch="b")
    assert await run_sequence([held, later], batch, Recorder(), at_once=always) == Result(requeue_after=60.0)


async def test_other_api_errors_still_raise() -> None:
    with pytest.raises(Exception, match="invalid"):
        await run_sequence([_refusing("child", 500)], RefusableCtx(), Recorder())


async def _ran(ctx: RefusableCtx, name: str) -> Result:
    ctx.ran.append(name)
    return Result()


def batched(name: str, result: Result | Exception, *, log: list[str], delay: float = 0.01) -> Step[Ctx]:
    async def run(ctx: Ctx) -> Result:
        log.append(f"start {name}")
        await asyncio.sleep(delay)
        ctx.conditions[f"{name}Ready"] = "set"
        log.append(f"end {name}")
        if isinstance(result, Exception):
            raise result
        return result

    return Step(name, f"{name}Ready", run, batch="b")


def always(ctx: Ctx, batch: str) -> bool:
    return True


async def test_a_batch_runs_at_once_when_the_caller_allows_it() -> None:
    log: list[str] = []
    steps = [batched(n, Result(), log=log) for n in "ABC"]
    ctx = Ctx()
    assert await run_sequence(steps, ctx, Recorder(), at_once=always) == Result()
    assert log[:3] == ["start A", "start B", "start C"]
    assert set(ctx.conditions) == {"AReady", "BReady", "CReady"}


async def test_a_batch_runs_in_order_when_the_caller_does_not_allow_it() -> None:
    for at_once in (None, lambda ctx, batch: False):
        log: list[str] = []
        steps = [batched(n, Result(), log=log) for n in "AB"]
        await run_sequence(steps, Ctx(), Recorder(), at_once=at_once)
        assert log == ["start A", "end A", "start B", "end B"]


async def test_a_batch_commits_in_order_up_to_the_step_that_stops() -> None:
    log: list[str] = []
    steps = [
        batched("A", Result(), log=log),
        batched("B", Result(requeue_after=10), log=log),
        batched("C", Result(), log=log),
        step("D", Result()),
    ]
    ctx, obs = Ctx(), Recorder()
    assert await run_sequence(steps, ctx, obs, at_once=always) == Result(requeue_after=10)
    assert set(ctx.conditions) == {"AReady", "BReady"}  # C ran, but leaves no trace: as in order
    assert "D" not in ctx.ran
    assert sorted(name for name, _, _ in obs.seen) == ["A", "B", "C"]


async def test_an_error_in_a_batch_keeps_the_steps_before_it_and_is_raised() -> None:
    log: list[str] = []
    steps = [
        batched("A", Result(), log=log),
        batched("B", RuntimeError("boom"), log=log),
        batched("C", RuntimeError("later"), log=log),
    ]
    ctx = Ctx()
    with pytest.raises(RuntimeError, match="boom"):
        await run_sequence(steps, ctx, Recorder(), at_once=always)
    assert set(ctx.conditions) == {"AReady", "BReady"}
    assert log.count("end C") == 1  # nothing is left running


async def test_all_in_order_waits_for_every_call_and_raises_the_first_error_by_position() -> None:
    finished: list[str] = []

    async def call(name: str, delay: float, error: Exception | None = None) -> str:
        await asyncio.sleep(delay)
        finished.append(name)
        if error is not None:
            raise error
        return name

    assert await all_in_order(call("a", 0.02), call("b", 0.0)) == ["a", "b"]
    with pytest.raises(KeyError):
        await all_in_order(call("x", 0.02, KeyError("x")), call("y", 0.0, ValueError("y")), call("z", 0.03))
    assert finished[-3:] == ["y", "x", "z"]


class Ticks:
    """A monotonic clock that moves when told (a step's slow work)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def slow(name: str, ticks: Ticks, seconds: float, result: Result | None = None) -> Step[Ctx]:
    async def run(ctx: Ctx) -> Result:
        ctx.ran.append(name)
        ticks.now += seconds
        return result or Result()

    return Step(name, f"{name}Ready", run)


async def test_a_sequence_begins_no_step_after_its_budget_and_requeues_the_rest_at_once() -> None:
    from nova_operator.pipeline import LEFT_OVER, Budget

    ticks, ctx = Ticks(), Ctx()
    budget = Budget.of(30.0, ticks)
    steps = [slow("A", ticks, 20), slow("B", ticks, 20), slow("C", ticks, 1)]
    assert await run_sequence(steps, ctx, Recorder(), budget=budget) == LEFT_OVER
    assert (LEFT_OVER.requeue_after, LEFT_OVER.left_over) == (0.0, True)
    assert ctx.ran == ["A", "B"]  # B began at 20 s, within the budget; C would begin at 40 s
    spent = Ctx()
    assert await run_sequence(steps, spent, Recorder(), budget=budget) == LEFT_OVER
    assert spent.ran == ["A"]  # the first step always begins: every pass moves on


async def test_a_group_begins_only_while_the_budget_lasts() -> None:
    from nova_operator.pipeline import LEFT_OVER, Budget

    ticks, ctx = Ticks(), Ctx()
    members = [slow("M", ticks, 1), slow("N", ticks, 1)]
    assert await run_group(members, ctx, Recorder(), budget=Budget.of(5.0, ticks)) == Result()
    assert sorted(ctx.ran) == ["M", "N"]
    spent = Budget.of(5.0, ticks)
    ticks.now += 5.0
    late = Ctx()
    assert await run_group(members, late, Recorder(), budget=spent) == LEFT_OVER
    assert late.ran == []


def test_a_budget_of_nothing_is_unlimited() -> None:
    from nova_operator.pipeline import Budget

    ticks = Ticks()
    for seconds in (None, 0.0):
        budget = Budget.of(seconds, ticks)
        ticks.now += 1e9
        assert not budget.spent()
