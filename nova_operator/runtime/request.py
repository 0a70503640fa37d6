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
    """

    requeue_after: float | None = None


class TerminalError(Exception):
    """A failure that retrying cannot fix: logged and counted, never requeued."""
