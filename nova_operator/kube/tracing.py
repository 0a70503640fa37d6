"""The phase of a request in flight, for a caller that gives up on it and must say where it waited.

``tracing()`` opens a scope; a request sent inside it by a client whose session carries
``trace_config()`` (``Kube.own_connections``) records in the scope's ``RequestTrace`` where it is:
preparing (credentials), waiting for a free connection of its pool, connecting, sending, request
sent and awaiting the response, reading the response, or answered with an error code. Context
variables carry the scope, so the aiohttp trace hooks (run in the requesting task) find it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from types import SimpleNamespace
from typing import Any

import aiohttp


class RequestTrace:
    """Where the latest request of a ``tracing()`` scope is: ``phase``, since ``since`` (monotonic).

    ``request`` names it (``PUT leases.coordination.k8s.io``), ``code`` is its answer's HTTP
    status once there is one.
    """

    __slots__ = ("code", "phase", "request", "since")

    def __init__(self) -> None:
        self.request = ""
        self.phase = "no request sent yet"
        self.since = time.monotonic()
        self.code: int | None = None

    def enter(self, phase: str) -> None:
        self.phase, self.since = phase, time.monotonic()

    def describe(self) -> str:
        """``PUT x: request sent, awaiting the response (for 4.2 s)``."""
        where = f"{self.request}: " if self.request else ""
        return f"{where}{self.phase} (for {time.monotonic() - self.since:.3g} s)"


_TRACE: ContextVar[RequestTrace | None] = ContextVar("nova_operator_request_trace", default=None)


@contextlib.contextmanager
def tracing() -> Iterator[RequestTrace]:
    """Record the phases of the requests this task sends until the scope ends (see the module notes)."""
    trace = RequestTrace()
    token = _TRACE.set(trace)
    try:
        yield trace
    finally:
        _TRACE.reset(token)


def _phase(phase: str) -> Callable[[aiohttp.ClientSession, SimpleNamespace, Any], Awaitable[None]]:
    async def record(session: aiohttp.ClientSession, context: SimpleNamespace, params: Any) -> None:
        if (trace := _TRACE.get()) is not None:
            trace.enter(phase)

    return record


def trace_config() -> aiohttp.TraceConfig:
    config = aiohttp.TraceConfig()
    config.on_connection_queued_start.append(_phase("waiting for a free connection of its pool"))
    config.on_connection_create_start.append(_phase("connecting"))
    config.on_connection_reuseconn.append(_phase("sending on an open connection"))
    config.on_connection_create_end.append(_phase("connected, sending"))
    config.on_request_headers_sent.append(_phase("request sent, awaiting the response"))
    return config


def current_trace() -> RequestTrace | None:
    """The ``RequestTrace`` of the enclosing ``tracing()`` scope, if any."""
    return _TRACE.get()
