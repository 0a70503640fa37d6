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
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, Protocol, Self, TypeVar, runtime_checkable

from nova_operator.kube.errors import KubeError
from nova_operator.runtime.request import Result

CHILD_REJECTED = "ChildRejected"
_REFUSALS = frozenset({400, 422})


class StepObserver(Protocol):
    """Receives one observation per step invocation (success, requeue and error alike)."""

    def observe_step(self, step: str, condition: str, seconds: float, *, failed: bool) -> None: ...


class Forkable(Protocol):
    """A pass context the concurrent group can copy for each member and merge back."""

    def fork(self) -> Self: ...

    def adopt_condition(self, member: Self, condition_type: str) -> None: ...


Ctx = TypeVar("Ctx")
GroupCtx = TypeVar("GroupCtx", bound=Forkable)


class StepInputError(Exception):
    """An input the step cannot use (say, a Secret value that is not text): reported like a
    refused child, on the step's condition with ``reason``; the message must name no value."""

    reason = "InvalidInput"


@runtime_checkable
class Refusable(Protocol):
    """A context that can report a refused child on a step's condition."""

    def refused(self, condition: str, reason: str, message: str) -> None: ...


@dataclass(frozen=True)
class Step(Generic[Ctx]):
    name: str
    condition: str
    run: Callable[[Ctx], Awaitable[Result]]
    on_refusal: Literal["stop", "continue"] = "stop"


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
        return Result(), True


async def run_sequence(steps: Sequence[Step[Ctx]], ctx: Ctx, observer: StepObserver) -> Result:
    """Run ``steps`` in order; the first non-zero result or error ends the sequence."""
    for step in steps:
        result, refused = await _outcome(step, ctx, observer)
        if refused and step.on_refusal == "stop":
            return result
        if result.requeue_after is not None:
            return result
    return Result()


def shortest(results: Sequence[Result]) -> Result:
    delays = [r.requeue_after for r in results if r.requeue_after is not None]
    return Result(requeue_after=min(delays)) if delays else Result()


async def _member(step: Step[GroupCtx], ctx: GroupCtx, observer: StepObserver) -> Result:
    result, _ = await _outcome(step, ctx, observer)
    return result


async def run_group(members: Sequence[Step[GroupCtx]], ctx: GroupCtx, observer: StepObserver) -> Result:
    """Run every member concurrently on its own fork; merge each member's condition back into ``ctx``."""
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
        ctx.adopt_condition(fork, member.condition)
    # The error that ended the group (it completed before the others were cancelled).
    first_error = next((t.exception() for t in tasks if t in done and t.exception() is not None), None)
    if first_error is not None:
        raise first_error
    return shortest([t.result() for t in tasks])
