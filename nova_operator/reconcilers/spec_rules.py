"""Rules only the pydantic model checks, reported on the step that consumes the field (spec README).

The CRD (OpenAPI + CEL) refuses most bad input at the API server. A few rules are checked
only by ``Nova.model_validate`` inside the reconciler (the cron grammar of
``dbArchive.schedule``, the label grammar of a ``nodeSelector``; also objects stored before
a CEL rule existed). Such an error must not stop the whole pipeline: ``route`` finds the
steps that consume each failing field (``CONSUMERS``), validates the spec again with those
fields left out, and ``guard`` replaces each consuming step by one that sets its condition
False (reason ``ConfigError``, the message naming the field) and renders nothing, so the
child that step owns keeps its last good form. Every other step goes on with the spec.

Consumers: a role's ``deployment`` block feeds only that role's Deployment; ``spec.jobs``
feeds the db-sync Job (Database) and the db-archive CronJob (DBArchive); the API block
feeds the API Deployment and, as the Jobs' fallback placement, both of those too. A guarded
Database step is a wait (it gates every later step of the sequence, as a Database wait
always does); every other guarded step lets the pass go on. An error at a field no step
is listed for returns ``None``: the caller reports the spec as a whole (``SecretsReady``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from pydantic import ValidationError

from nova_operator import intervals
from nova_operator.models.nova import Nova
from nova_operator.pipeline import Step
from nova_operator.reconcilers.context import PassContext
from nova_operator.runtime.request import Result

CONFIG_ERROR: Final = "ConfigError"
CONSUMERS: Final[tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]] = (
    (("dbArchive",), ("DBArchive",)),
    (("jobs",), ("Database", "DBArchive")),
    (("api", "deployment"), ("Deployment", "Database", "DBArchive")),
    (("conductor", "deployment"), ("Conductor",)),
    (("scheduler", "deployment"), ("Scheduler",)),
    (("metadata", "deployment"), ("Metadata",)),
    (("consoleProxy", "deployment"), ("ConsoleProxy",)),
)
_WAITS: Final = {"Database": intervals.DATABASE_WAIT}


@dataclass(frozen=True)
class Routed:
    nova: Nova  # the spec with every failing field left out
    blocked: Mapping[str, str]  # step name -> the message its condition carries


def _consumers(path: tuple[str, ...]) -> tuple[str, ...]:
    for prefix, steps in CONSUMERS:
        if path[: len(prefix)] == prefix:
            return steps
    return ()


def _drop(spec: dict[str, Any], path: tuple[str, ...]) -> None:
    node: Any = spec
    for key in path[:-1]:
        node = node.get(key) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(path[-1], None)


def describe(path: tuple[str, ...], message: str) -> str:
    return f"spec.{'.'.join(path)}: {message}"


def route(obj: Mapping[str, Any], exc: ValidationError) -> Routed | None:
    """The consuming steps of each error and the spec without the failing fields (None: unroutable)."""
    body = copy.deepcopy(dict(obj))
    spec = body.get("spec")
    if not isinstance(spec, dict):
        return None
    problems: dict[str, list[str]] = {}
    for error in exc.errors():
        loc = tuple(str(p) for p in error["loc"])
        if loc[:1] != ("spec",) or len(loc) < 2:
            return None
        path = loc[1:]
        steps = _consumers(path)
        if not steps:
            return None
        _drop(spec, path)
        for step in steps:
            problems.setdefault(step, []).append(describe(path, str(error["msg"])))
    try:
        nova = Nova.model_validate(body)
    except ValidationError:
        return None
    blocked = {
        step: "the spec is invalid: " + "; ".join(sorted(set(msgs))) for step, msgs in problems.items()
    }
    return Routed(nova=nova, blocked=blocked)


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
