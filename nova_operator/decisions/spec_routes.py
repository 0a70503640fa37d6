"""Which steps consume each field the pydantic model refuses, and the spec without those fields.

The CRD (OpenAPI + CEL) refuses most bad input at the API server. A few rules are checked
only by ``Nova.model_validate`` (the cron grammar of ``dbArchive.schedule``, the label grammar of
a ``nodeSelector``; also objects stored before a CEL rule existed). ``route`` finds the steps
that consume each failing field (``CONSUMERS``) and validates the spec again with those fields
left out, so every other step can go on (``reconcilers.nova.spec_rules`` reports the blocked
ones; the NovaCompute controller reads a referenced Nova the same way).

Consumers: a role's ``deployment`` block feeds only that role's Deployment; ``spec.jobs``
feeds the db-sync Job (Database) and the db-archive CronJob (DBArchive); the API block
feeds the API Deployment and, as the Jobs' fallback placement, both of those too. An error at
a field no step is listed for returns ``None``: the caller reports the spec as a whole.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError

from nova_operator.models.nova import Nova

CONSUMERS: Final[tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]] = (
    (("dbArchive",), ("DBArchive",)),
    (("jobs",), ("Database", "DBArchive")),
    (("api", "deployment"), ("Deployment", "Database", "DBArchive")),
    (("conductor", "deployment"), ("Conductor",)),
    (("scheduler", "deployment"), ("Scheduler",)),
    (("metadata", "deployment"), ("Metadata",)),
    (("consoleProxy", "deployment"), ("ConsoleProxy",)),
)


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
