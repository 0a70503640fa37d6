"""The house's naming rule for a pipeline's steps, shared by both controllers' drift tests."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

from nova_operator.pipeline import Step


def snake(step: str) -> str:
    """``DBConnectionSecrets`` -> ``db_connection_secrets`` (an acronym run is one word)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", step).lower()


def misnamed(steps: Iterable[Step[Any]], families: Mapping[str, frozenset[str]]) -> list[str]:
    """Steps whose function is not ``reconcile_<step>`` or whose module is neither ``<step>`` nor the
    family module listed for it in ``families`` (module -> the steps it holds)."""
    wrong = []
    for step in steps:
        run = step.run.func if isinstance(step.run, functools.partial) else step.run
        module = run.__module__.rpartition(".")[2]
        family = {m for m, members in families.items() if step.name in members}
        if run.__name__ != f"reconcile_{snake(step.name)}" or module not in {snake(step.name), *family}:
            wrong.append(f"{step.name}: {run.__module__}.{run.__name__}")
    return wrong
