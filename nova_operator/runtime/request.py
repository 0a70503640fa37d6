"""What a reconcile is asked (``Request``) and what it answers (``Result``, ``TerminalError``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class Request(NamedTuple):
    """The key of one object: namespace ("" for cluster-scoped kinds) and name. Nothing else."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True, slots=True)
class Result:
    """``requeue_after=None``: done until the next event. Otherwise reconcile again after that many seconds.

    A requeue-after bypasses the failure backoff (the rate limiter is reset for the key).
    ``left_over``: the pass stopped at its time budget with work left (counted by the controller in
    ``nova_operator_controller_passes_left_over_total``); it comes with a requeue, normally at once.
    """

    requeue_after: float | None = None
    left_over: bool = False


class TerminalError(Exception):
    """A failure that retrying cannot fix: logged and counted, never requeued."""
