"""The ordered sub-reconciler pipeline of one pass (reconciler.md §3).

A ``Step`` is data: a name (the ``sub_reconciler`` metric label), the condition it owns
and an async function of the pass context. ``run_sequence`` runs steps in order and stops
at the first that asks for a requeue or raises; ``run_group`` runs members concurrently,
each on its own fork of the context, copies every member's condition back, and returns
the first error (cancelling the rest) or the shortest requeue.

A child the API server refuses (400 Bad Request, 422 Invalid: a spec value the CRD admits
but the child's own validation does not) is not an error to retry: the step's condition
becomes False with reason ``ChildRejected`` and the server's message (``_outcome``), no
requeue (a spec change wakes the CR), and the sequence goes on when the step is marked
``on_refusal="continue"`` (nothing after it needs what it would have written).

Steps that share a ``batch`` and follow each other may run at once when the caller's
``at_once(ctx, batch)`` says so (``run_sequence``): each on its own fork, all started together,
then committed in order as if they had run one after the other. A step is committed (its
condition and the status fields it changed copied back, ``Speculative.adopt_step``) only when
every step before it went on; the first requeue, refusal that stops, or error ends the commit,
and the steps after it leave no trace in the status. What running them at once changes is only
the wire: a later step's writes may already have been sent in a pass that stops earlier (the
next pass would send them anyway). Steps whose outputs a later step consumes, or that patch
the CR itself, must not share a batch.

A pass has a time ``Budget`` (``--pass-budget``, well below the reconcile timeout): the work a
tenant's objects decide the size of must not hold a worker for long, since the queue's fair shares
promise another namespace's event at most one pass of waiting (``runtime.workqueue``). The budget is
checked, never enforced by cancelling: ``run_sequence`` begins a step after the first only while the
budget lasts and ``run_group`` begins only while it lasts; a step's own long loops (one call per
node, per aggregate) ask ``budget.spent()`` before each costly item after their first. What is left
over ends the pass with ``LEFT_OVER``, a requeue at once, which the controller hands out in the
namespace's next turn; every step is idempotent, so the next pass goes through the steps done
already without requests and continues where this one stopped (a loop that stopped remembers where).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, Self, TypeVar, runtime_checkable

import structlog

from nova_operator.kube.errors import KubeError
from nova_operator.runtime.request import Result

CHILD_REJECTED = "ChildRejected"
_REFUSALS = frozenset({400, 422})
LEFT_OVER = Result(requeue_after=0.0, left_over=True)
"""The result of a pass whose budget ran out: the rest in the key's next turn (a prompt requeue)."""

log = structlog.get_logger("nova_operator.pipeline")


@dataclass(frozen=True)
class Budget:
    """When a pass stops beginning work: ``ends`` on the monotonic ``clock`` (inf: never)."""

    ends: float = math.inf
    clock: Callable[[], float] = field(default=time.monotonic, compare=False)

    @classmethod
    def of(cls, seconds: float | None, clock: Callable[[], float] = time.monotonic) -> Budget:
        """A budget of ``seconds`` from now; None or 0: unlimited."""
        return cls(clock() + seconds if seconds else math.inf, clock)

    def spent(self) -> bool:
        return self.clock() >= self.ends

    def left(self) -> float:
        return max(0.0, self.ends - self.clock())


UNLIMITED = Budget()


class StepObserver(Protocol):
    """Receives one observation per step invocation (success, requeue and error alike)."""

    def observe_step(self, step: str, condition: str, seconds: float, *, failed: bool) -> None: ...


class Forkable(Protocol):
    """A pass context the concurrent group can copy for each member and merge back."""

    def fork(self) -> Self: ...

    def adopt_condition(self, member: Self, condition_type: str) -> None: ...


Ctx = TypeVar("Ctx")
GroupCtx = TypeVar("GroupCtx", bound="Speculative")


class StepInputError(Exception):
    """An input the step cannot use (say, a Secret value that is not text): reported like a
    refused child, on the step's condition with ``reason``; the message must name no value.

    ``requeue_after``: when set, the CR is looked at again after that long (what would fix the
    input wakes nothing), and a step marked ``on_refusal="continue"`` still lets the rest run.
    """

    reason = "InvalidInput"
    requeue_after: float | None = None


@runtime_checkable
class Refusable(Protocol):
    """A context that can report a refused child on a step's condition."""

    def refused(self, condition: str, reason: str, message: str) -> None: ...


@runtime_checkable
class Speculative(Forkable, Protocol):
    """A pass context whose batched steps can run on forks and be committed in order."""

    def adopt_step(self, member: Self, condition_type: str) -> None: ...


@dataclass(frozen=True)
class Step(Generic[Ctx]):
    name: str
    condition: str
    run: Callable[[Ctx], Awaitable[Result]]
    on_refusal: Literal["stop", "continue"] = "stop"
    batch: str = ""  # consecutive steps of one batch may run at once (``run_sequence``'s ``at_once``)


T = TypeVar("T")


async def all_in_order(*calls: Awaitable[T]) -> list[T]:
    """Await ``calls`` concurrently; every one finishes, then the first error in argument order is raised.

    Unlike ``asyncio.gather`` no call is left running after an error, and unlike a ``TaskGroup``
    the error keeps its own type (a refused child stays a ``KubeError``).
    """
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return list(outcomes)  # type: ignore[arg-type]


class NullObserver:
    def observe_step(self, step: str, condition: str, seconds: float, *, failed: bool) -> None:
        return None


async def _timed(step: Step[Ctx], ctx: Ctx, observer: StepObserver) -> Result:
    start = time.monotonic()
    failed = False
    try:
        return await step.run(ctx)
    except asyncio.CancelledError:
        raise
    except BaseException:
        failed = True
        raise
    finally:
        observer.observe_step(step.name, step.condition, time.monotonic() - start, failed=failed)


async def _outcome(step: Step[Ctx], ctx: Ctx, observer: StepObserver) -> tuple[Result, bool]:
    """The step's result, and whether the API server refused one of its children (then reported)."""
    try:
        return await _timed(step, ctx, observer), False
    except KubeError as exc:
        if exc.status not in _REFUSALS or not isinstance(ctx, Refusable):
            raise
        ctx.refused(step.condition, CHILD_REJECTED, f"the API server refused a child object: {exc.message}")
        return Result(), True
    except StepInputError as exc:
        if not isinstance(ctx, Refusable):
            raise
        ctx.refused(step.condition, exc.reason, str(exc))
        return Result(requeue_after=exc.requeue_after), True


def _stops(step: Step[Ctx], result: Result, refused: bool) -> bool:
    if refused:
        return step.on_refusal == "stop"
    return result.requeue_after is not None


def _carried(step: Step[Ctx], result: Result, refused: bool, carried: list[Result]) -> None:
    """A refusal the sequence goes on past keeps its requeue for the sequence's result."""
    if refused and not _stops(step, result, refused) and result.requeue_after is not None:
        carried.append(result)


async def run_sequence(
    steps: Sequence[Step[Ctx]],
    ctx: Ctx,
    observer: StepObserver,
    *,
    at_once: Callable[[Ctx, str], bool] | None = None,
    carried: list[Result] | None = None,
    budget: Budget = UNLIMITED,
) -> Result:
    """Run ``steps`` in order; the first non-zero result or error ends the sequence.

    The first step always begins; a later one only while ``budget`` lasts, else the sequence ends
    with ``LEFT_OVER`` (the next pass goes on from there).

    A run of consecutive steps with the same non-empty ``batch`` runs at once when
    ``at_once(ctx, batch)`` is true at its start (the context must be ``Speculative``).

    A refusal of a step marked ``on_refusal="continue"`` that asks to be looked at again
    (``StepInputError.requeue_after``) does not end the sequence: its requeue goes into
    ``carried`` when the caller passes a list (to merge after what it runs next), else into
    the result of a sequence that ran to its end.
    """
    i = 0
    own = carried if carried is not None else []
    while i < len(steps):
        step = steps[i]
        if i > 0 and budget.spent():
            log.info("the pass's budget is spent; the steps left go to its next pass", next_step=step.name)
            return LEFT_OVER
        end = i + 1
        while step.batch and end < len(steps) and steps[end].batch == step.batch:
            end += 1
        if end - i > 1 and at_once is not None and isinstance(ctx, Speculative) and at_once(ctx, step.batch):
            stopped = await _speculate(steps[i:end], ctx, observer, own)
            if stopped is not None:
                return stopped
            i = end
            continue
        result, refused = await _outcome(step, ctx, observer)
        if _stops(step, result, refused):
            return result
        _carried(step, result, refused, own)
        i += 1
    return Result() if carried is not None else shortest(own)


async def _speculate(
    steps: Sequence[Step[Any]], ctx: Speculative, observer: StepObserver, carried: list[Result]
) -> Result | None:
    """Run ``steps`` at once on forks, commit them in order; the result that stops, or None to go on."""
    forks = [ctx.fork() for _ in steps]
    outcomes = await asyncio.gather(
        *(_outcome(s, f, observer) for s, f in zip(steps, forks, strict=True)), return_exceptions=True
    )
    for step, fork, outcome in zip(steps, forks, outcomes, strict=True):
        ctx.adopt_step(fork, step.condition)  # what it set before it stopped or failed stays, as in order
        if isinstance(outcome, BaseException):
            raise outcome
        result, refused = outcome
        if _stops(step, result, refused):
            return result
        _carried(step, result, refused, carried)
    return None


def shortest(results: Sequence[Result]) -> Result:
    """The result with the shortest requeue (work left over first among equals), else ``Result()``."""
    timed = [r for r in results if r.requeue_after is not None]
    return min(timed, key=lambda r: (r.requeue_after, not r.left_over)) if timed else Result()


async def _member(step: Step[GroupCtx], ctx: GroupCtx, observer: StepObserver) -> Result:
    result, _ = await _outcome(step, ctx, observer)
    return result


async def run_group(
    members: Sequence[Step[GroupCtx]], ctx: GroupCtx, observer: StepObserver, *, budget: Budget = UNLIMITED
) -> Result:
    """Run every member concurrently on its own fork; merge each member's condition, and the status
    fields it changed, back into ``ctx`` (members are independent: no two change the same field).
    A group begins only while ``budget`` lasts: else nothing runs, and the result is ``LEFT_OVER``."""
    if budget.spent():
        log.info("the pass's budget is spent; the group goes to its next pass", steps=len(members))
        return LEFT_OVER
    forks = [ctx.fork() for _ in members]
    tasks = [
        asyncio.create_task(_member(m, f, observer), name=f"step:{m.name}")
        for m, f in zip(members, forks, strict=True)
    ]
    try:
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.wait(pending)
    except asyncio.CancelledError:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    for member, fork in zip(members, forks, strict=True):
        ctx.adopt_step(fork, member.condition)
    # The error that ended the group (it completed before the others were cancelled).
    first_error = next((t.exception() for t in tasks if t in done and t.exception() is not None), None)
    if first_error is not None:
        raise first_error
    return shortest([t.result() for t in tasks])
