"""A step whose input field the model refused reports it, and renders nothing (spec README).

``decisions.spec_routes.route`` says which steps consume each failing field; ``guard`` replaces each
such step by one that sets its condition False (reason ``ConfigError``, the message naming the
field) and renders nothing, so the child that step owns keeps its last good form. Every other step
goes on with the spec. A guarded Database step is a wait (it gates every later step of the
sequence, as a Database wait always does); every other guarded step lets the pass go on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from nova_operator import intervals
from nova_operator.pipeline import Step
from nova_operator.reconcilers.nova.context import PassContext
from nova_operator.runtime.request import Result

CONFIG_ERROR: Final = "ConfigError"
_WAITS: Final = {"Database": intervals.DATABASE_WAIT}


def guard(steps: Sequence[Step[PassContext]], blocked: Mapping[str, str]) -> tuple[Step[PassContext], ...]:
    """``steps`` with each blocked one replaced by its ConfigError report."""
    return tuple(replace(s, run=_reporter(s, blocked[s.name])) if s.name in blocked else s for s in steps)


def _reporter(step: Step[PassContext], message: str) -> Any:
    async def report(ctx: PassContext) -> Result:
        before = ctx.initial_condition(step.condition)
        ctx.set(step.condition, False, CONFIG_ERROR, message)
        if before is None or before.get("message") != message:  # once per distinct problem
            await ctx.emit("Warning", "InvalidSpec", message)
        wait = _WAITS.get(step.name)
        return Result(requeue_after=wait) if wait is not None else Result()

    return report
