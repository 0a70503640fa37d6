"""/healthz, /readyz and /metrics: a minimal HTTP/1.1 server on asyncio streams.

``/healthz`` answers 200 while the process works, 503 with one line per reason when its
liveness check names problems (a reflector that has heard nothing from the API server for
several watch timeouts, a worker stuck far past any reconcile's bound) or when the event loop
does not answer within a second. ``/readyz`` answers 200 once the manager's readiness check
passes (every informer cache synced), 503 before. The metrics endpoint serves the manager's
own registry. One request per connection, GET only.

The probe server can run on a thread of its own (``HttpServer(..., check_loop=loop)``): its
routes are then evaluated on ``loop`` (where the state they read lives) and a loop that does
not run them within ``loop_timeout`` seconds is itself the answer: 503, "event loop
unresponsive". On the loop it probes, a blocked loop could not say so.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Mapping

Response = tuple[int, str, bytes]  # status, content type, body
Route = Callable[[], Response]

_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}
TEXT = "text/plain; charset=utf-8"
PROMETHEUS = "text/plain; version=0.0.4; charset=utf-8"


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

    def healthz() -> Response:
        found = problems()
        if found:
            return 503, TEXT, ("unhealthy:\n" + "".join(f"- {p}\n" for p in found)).encode()
        return 200, TEXT, b"ok\n"

    def readyz() -> Response:
        if not_ready is None:
            return (200, TEXT, b"ok\n") if ready() else (503, TEXT, b"caches not synced\n")
        found = not_ready()
        if found:
            return 503, TEXT, ("not ready:\n" + "".join(f"- {p}\n" for p in found)).encode()
        return 200, TEXT, b"ok\n"

    return {"/healthz": healthz, "/readyz": readyz}


def metrics_routes(render: Callable[[], bytes]) -> dict[str, Route]:
    return {"/metrics": lambda: (200, PROMETHEUS, render())}


class HttpServer:
    def __init__(
        self,
        host: str,
        port: int,
        routes: Mapping[str, Route],
        *,
        check_loop: asyncio.AbstractEventLoop | None = None,
        loop_timeout: float = 1.0,
    ) -> None:
        self.host, self.port = host, port
        self._routes = dict(routes)
        self._server: asyncio.Server | None = None
        self._check_loop = check_loop  # set: serve from a thread, evaluate routes on this loop
        self._loop_timeout = loop_timeout
        self._thread: threading.Thread | None = None
        self._thread_loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        if self._check_loop is None:
            await self._start_here()
            return
        bound: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._thread_main, args=(bound,), name="probes", daemon=True)
        self._thread.start()
        await asyncio.wrap_future(bound)  # a taken port raises here

    async def _start_here(self) -> None:
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
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

    async def _answer(self, route: Route) -> Response:
        """``route()``, on the probed loop when there is one (bounded by ``loop_timeout``)."""
        target = self._check_loop
        if target is None:
            return route()
        result: concurrent.futures.Future[Response] = concurrent.futures.Future()

        def run() -> None:
            if not result.set_running_or_notify_cancel():
                return  # the probe gave up waiting already
            try:
                result.set_result(route())
            except Exception as exc:
                result.set_exception(exc)

        try:
            target.call_soon_threadsafe(run)
            return await asyncio.wait_for(asyncio.wrap_future(result), self._loop_timeout)
        except TimeoutError:
            msg = f"unhealthy:\n- event loop unresponsive: no answer within {self._loop_timeout:g} s\n"
            return 503, TEXT, msg.encode()
        except RuntimeError:  # the probed loop is closed: the process is stopping
            return 503, TEXT, b"unhealthy:\n- event loop stopped\n"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(10):
                request_line = await reader.readline()
                while (await reader.readline()).strip():
                    pass
            parts = request_line.decode("latin-1").split()
            method, path = (parts[0], parts[1].split("?")[0]) if len(parts) >= 2 else ("", "")
            route = self._routes.get(path)
            if method not in ("GET", "HEAD"):
                status, ctype, body = 405, TEXT, b"method not allowed\n"
            elif route is None:
                status, ctype, body = 404, TEXT, b"not found\n"
            else:
                status, ctype, body = await self._answer(route)
            head = (
                f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode() + (body if method != "HEAD" else b""))
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
