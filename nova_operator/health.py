"""/healthz, /readyz and /metrics: a minimal HTTP/1.1 server on asyncio streams.

``/healthz`` answers 200 while the process serves; ``/readyz`` answers 200 once the
manager's readiness check passes (every informer cache synced), 503 before. The metrics
endpoint serves the manager's own registry. One request per connection, GET only.
"""

from __future__ import annotations

import asyncio
import contextlib
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


def health_routes(ready: Callable[[], bool]) -> dict[str, Route]:
    def healthz() -> Response:
        return 200, TEXT, b"ok\n"

    def readyz() -> Response:
        return (200, TEXT, b"ok\n") if ready() else (503, TEXT, b"caches not synced\n")

    return {"/healthz": healthz, "/readyz": readyz}


def metrics_routes(render: Callable[[], bytes]) -> dict[str, Route]:
    return {"/metrics": lambda: (200, PROMETHEUS, render())}


class HttpServer:
    def __init__(self, host: str, port: int, routes: Mapping[str, Route]) -> None:
        self.host, self.port = host, port
        self._routes = dict(routes)
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def serve(self) -> None:
        """Serve until cancelled (starting first unless ``start()`` was called)."""
        if self._server is None:
            await self.start()
        try:
            await asyncio.Future()
        finally:
            await self.stop()

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
                status, ctype, body = route()
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
