"""The one thing a controller calls."""

from __future__ import annotations

from typing import Protocol

from nova_operator.runtime.request import Request, Result


class Reconciler(Protocol):
    """Drive the object named by ``request`` toward its desired state.

    Raise to retry with backoff, raise ``TerminalError`` to give up on this version of
    the object, return ``Result(requeue_after=...)`` to be called again later. The
    reconciler must be idempotent and keep no per-pass state on itself: up to N
    workers call it concurrently (never for the same key).
    """

    async def reconcile(self, request: Request) -> Result: ...
