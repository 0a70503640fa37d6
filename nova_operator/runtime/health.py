"""/healthz, /readyz and /metrics, served by aiohttp's low-level web server.

``/healthz`` answers 200 while the process works, 503 with one line per reason when its
liveness check names problems (a worker stuck far past any reconcile's bound) or when the event
loop does not answer within a second. ``/readyz`` answers 200 once the manager's readiness check
passes, 503 with its reasons before (and while a reflector hears nothing from the API server).
The metrics endpoint serves the manager's own registry. GET and HEAD only.

Bounded for a hostile network neighbour: at most ``max_connections`` connections at once, so a
flood of connections cannot exhaust the process's file descriptors; a connection that has not
sent a whole request within ``idle_timeout`` seconds (a fresh one, or one kept alive after a
response) is closed; request lines and headers are capped by aiohttp (8 KiB a line, 128 headers).

The slots are kept for short requests (issue 36: any pod could fill the 64 slots with idle
connections, and the kubelet's probes were then closed on accept, 19 of 20 failed): a connection
accepted while every slot is taken takes the slot of the *oldest idle* one (no request being
answered on it: it sent nothing, part of a request, or is kept alive after its answer), which is
closed. A probe connects, sends its request at once and is answered in microseconds, so idle
connections cannot keep it out; only ``max_connections`` requests being answered at that very
moment could (the new connection is then closed, counted in ``refused``). Probes and ``/metrics``
are separate servers on separate addresses (``--health-probe-bind-address``,
``--metrics-bind-address``), so scrapes never take a probe's slot either.

The probe server can run on a thread of its own (``HttpServer(..., check_loop=loop)``): its
routes are then evaluated on ``loop`` (where the state they read lives) and a loop that does
not run them within ``loop_timeout`` seconds is itself the answer: 503, "event loop
unresponsive". On the loop it probes, a blocked loop could not say so.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

Response = tuple[int, Mapping[str, str], bytes]  # status, headers (Content-Type at least), body


@dataclass(frozen=True, slots=True)
class Asked:
    """What a route may read of its request: the headers and the query (name -> every value)."""

    headers: Mapping[str, str] = field(default_factory=dict)
    query: Mapping[str, list[str]] = field(default_factory=dict)


Route = Callable[[Asked], Response]

TEXT = "text/plain; charset=utf-8"


def parse_address(address: str) -> tuple[str, int] | None:
    """``":8080"`` -> ("0.0.0.0", 8080); ``"127.0.0.1:0"`` -> an ephemeral port; ``"0"`` or "" -> disabled."""
    if address in ("", "0"):
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"invalid bind address {address!r} (want host:port or :port)")
    return (host.strip("[]") or "0.0.0.0", int(port))


def health_routes(
    ready: Callable[[], bool],
    problems: Callable[[], list[str]] = list,
    not_ready: Callable[[], list[str]] | None = None,
) -> dict[str, Route]:
    """``/healthz`` from ``problems()`` (none: healthy); ``/readyz`` from ``not_ready()`` (none:
    ready) when given, else from ``ready()``."""

    def healthz(_: Asked) -> Response:
        found = problems()
        if found:
            return _text(503, "unhealthy:\n" + "".join(f"- {p}\n" for p in found))
        return _text(200, "ok\n")

    def readyz(_: Asked) -> Response:
        if not_ready is None:
            return _text(200, "ok\n") if ready() else _text(503, "caches not synced\n")
        found = not_ready()
        if found:
            return _text(503, "not ready:\n" + "".join(f"- {p}\n" for p in found))
        return _text(200, "ok\n")

    return {"/healthz": healthz, "/readyz": readyz}


def _text(status: int, body: str) -> Response:
    return status, {"Content-Type": TEXT}, body.encode()


Exposition = Callable[[str, str, list[str]], tuple[Mapping[str, str], bytes]]
"""(Accept, Accept-Encoding, the ``name[]`` values) -> headers and body (``Metrics.exposition``)."""


def metrics_routes(expose: Exposition) -> dict[str, Route]:
    """``/metrics`` as a Prometheus client library serves it: text or OpenMetrics as the scraper
    asks (``Accept``), gzip when it accepts it, only the families named by ``name[]`` when given."""

    def metrics(asked: Asked) -> Response:
        headers, body = expose(
            asked.headers.get("Accept", ""),
            asked.headers.get("Accept-Encoding", ""),
            asked.query.get("name[]", []),
        )
        return 200, headers, body

    return {"/metrics": metrics}


MAX_CONNECTIONS = 64
"""Connections one server holds at once (Prometheus and the kubelet need a handful)."""
IDLE_TIMEOUT = 15.0
"""Seconds a connection may stay open without a whole request (Prometheus reconnects per scrape)."""


class _CappedServer(web.Server):
    """aiohttp's low-level server holding ``cap`` connections at most: one accepted beyond it takes
    the slot of the oldest idle connection (closed), or is closed itself when every one is busy."""

    def __init__(
        self, handler: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]], cap: int, **kw: Any
    ):
        super().__init__(handler, **kw)
        self.cap = cap
        self.refused = 0
        self.evicted = 0
        self.busy: dict[asyncio.BaseTransport, int] = {}  # transport -> requests being answered on it
        self._held: dict[RequestHandler, asyncio.Transport] = {}  # open and not aborted, oldest first

    def connection_made(self, handler: RequestHandler, transport: asyncio.Transport) -> None:
        super().connection_made(handler, transport)
        if len(self._held) >= self.cap:
            victim = next((h for h, t in self._held.items() if t not in self.busy), None)
            if victim is None:
                self.refused += 1
                transport.abort()  # frees the descriptor now; connection_lost forgets the handler
                return
            self.evicted += 1
            self._held.pop(victim).abort()
        self._held[handler] = transport

    def connection_lost(self, handler: RequestHandler, exc: BaseException | None = None) -> None:
        super().connection_lost(handler, exc)
        transport = self._held.pop(handler, None)
        if transport is not None:
            self.busy.pop(transport, None)


class HttpServer:
    def __init__(
        self,
        host: str,
        port: int,
        routes: Mapping[str, Route],
        *,
        check_loop: asyncio.AbstractEventLoop | None = None,
        loop_timeout: float = 1.0,
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        self.host, self.port = host, port
        self._routes = dict(routes)
        self._server: asyncio.Server | None = None
        self._web: _CappedServer | None = None
        self._check_loop = check_loop  # set: serve from a thread, evaluate routes on this loop
        self._loop_timeout = loop_timeout
        self._max_connections = max_connections
        self._idle_timeout = idle_timeout
        self._thread: threading.Thread | None = None
        self._thread_loop: asyncio.AbstractEventLoop | None = None

    @property
    def connections(self) -> int:
        """Connections open now."""
        return len(self._web.connections) if self._web is not None else 0

    @property
    def refused(self) -> int:
        """Connections closed at once because ``max_connections`` requests were being answered."""
        return self._web.refused if self._web is not None else 0

    @property
    def evicted(self) -> int:
        """Idle connections closed to give their slot to a new one."""
        return self._web.evicted if self._web is not None else 0

    async def start(self) -> None:
        if self._check_loop is None:
            await self._start_here()
            return
        bound: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._thread_main, args=(bound,), name="probes", daemon=True)
        self._thread.start()
        await asyncio.wrap_future(bound)  # a taken port raises here

    async def _start_here(self) -> None:
        self._web = _CappedServer(
            self._handle,
            self._max_connections,
            keepalive_timeout=self._idle_timeout,
            access_log=None,
            handler_cancellation=True,
        )
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._web, self.host, self.port, backlog=self._max_connections
        )
        self.port = self._server.sockets[0].getsockname()[1]

    def _thread_main(self, bound: concurrent.futures.Future[None]) -> None:
        loop = asyncio.new_event_loop()
        self._thread_loop = loop
        try:
            loop.run_until_complete(self._start_here())
        except BaseException as exc:
            bound.set_exception(exc)
            loop.close()
            return
        bound.set_result(None)
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self._stop_here())
            loop.close()

    async def stop(self) -> None:
        if self._thread is not None:
            thread, loop = self._thread, self._thread_loop
            self._thread = None
            if loop is not None and thread.is_alive():
                loop.call_soon_threadsafe(loop.stop)
            await asyncio.to_thread(thread.join, 5)
            return
        await self._stop_here()

    async def _stop_here(self) -> None:
        if self._server is not None:
            self._server.close()
            if self._web is not None:
                await self._web.shutdown(1.0)
            await self._server.wait_closed()
            self._server = None

    async def serve(self) -> None:
        """Serve until cancelled (starting first unless ``start()`` was called)."""
        if self._server is None and self._thread is None:
            await self.start()
        try:
            await asyncio.Future()
        finally:
            await self.stop()

    async def _answer(self, route: Route, asked: Asked) -> Response:
        """``route(asked)``, on the probed loop when there is one (bounded by ``loop_timeout``)."""
        target = self._check_loop
        if target is None:
            return route(asked)
        result: concurrent.futures.Future[Response] = concurrent.futures.Future()

        def run() -> None:
            if not result.set_running_or_notify_cancel():
                return  # the probe gave up waiting already
            try:
                result.set_result(route(asked))
            except Exception as exc:
                result.set_exception(exc)

        try:
            target.call_soon_threadsafe(run)
            return await asyncio.wait_for(asyncio.wrap_future(result), self._loop_timeout)
        except TimeoutError:
            return _text(
                503, f"unhealthy:\n- event loop unresponsive: no answer within {self._loop_timeout:g} s\n"
            )
        except RuntimeError:  # the probed loop is closed: the process is stopping
            return _text(503, "unhealthy:\n- event loop stopped\n")

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        transport, busy = request.transport, self._web.busy if self._web is not None else None
        if transport is None or busy is None:
            return await self._respond(request)
        busy[transport] = busy.get(transport, 0) + 1  # not evicted while it is being answered
        try:
            response = await self._respond(request)
            await response.prepare(request)  # written here, while the connection counts as busy
            await response.write_eof()
            return response
        finally:
            left = busy.get(transport, 1) - 1
            if left > 0:
                busy[transport] = left
            else:
                busy.pop(transport, None)

    async def _respond(self, request: web.BaseRequest) -> web.StreamResponse:
        route = self._routes.get(request.path)
        if request.method not in ("GET", "HEAD"):
            status, headers, body = _text(405, "method not allowed\n")
        elif route is None:
            status, headers, body = _text(404, "not found\n")
        else:
            asked = Asked(dict(request.headers), {k: request.query.getall(k) for k in request.query})
            status, headers, body = await self._answer(route, asked)
        return web.Response(status=status, body=body, headers=dict(headers))
