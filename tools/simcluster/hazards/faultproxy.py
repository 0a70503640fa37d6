"""Fault proxies on loopback between the operator and the API server.

``StallProxy``: a TCP proxy that can stop forwarding, a network that silently drops everything.
``HttpFaultProxy``: an HTTPS proxy that can answer every watch 410 or every request 429.

``StallProxy(upstream_port).start()`` listens on 127.0.0.1 (an ephemeral port) and relays bytes
both ways to 127.0.0.1:``upstream_port`` (TLS passes through untouched: the API server's
certificate is for 127.0.0.1, whatever the port). ``stall()`` stops forwarding in both
directions without closing anything: no FIN, no RST, bytes already read are held, new
connections are accepted but not connected upstream. ``resume()`` forwards again, held bytes
first. It runs on a thread of its own, so a synchronous test can drive it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import pathlib
import ssl
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

import aiohttp
from aiohttp import web

T = TypeVar("T")
_CHUNK = 65536


class _LoopThread:
    """A proxy's own event loop on a thread: ``start()`` runs ``_listen()`` there (and sets
    ``port``), ``stop()`` runs ``_shutdown()`` and ends the thread; ``_call`` runs a coroutine there."""

    name = "proxy"

    def __init__(self) -> None:
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    async def _listen(self) -> None:
        raise NotImplementedError

    async def _shutdown(self) -> None:
        raise NotImplementedError

    def _start(self) -> None:
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._main, args=(ready,), name=self.name, daemon=True)
        self._thread.start()
        ready.result(10)

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        self._call(self._shutdown(), 15)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop = None

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float = 10) -> T:
        assert self._loop is not None, "start() the proxy first"
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def _main(self, ready: concurrent.futures.Future[None]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._listen())
        except BaseException as exc:
            ready.set_exception(exc)
            loop.close()
            return
        ready.set_result(None)
        try:
            loop.run_forever()
        finally:
            loop.close()


class StallProxy(_LoopThread):
    """A TCP proxy to ``upstream_port`` that ``stall()`` turns into a silent black hole (see above)."""

    name = "stall-proxy"

    def __init__(self, upstream_port: int, *, upstream_host: str = "127.0.0.1") -> None:
        super().__init__()
        self.upstream = (upstream_host, upstream_port)
        self.accepted = 0  # connections accepted since start
        self._server: asyncio.Server | None = None
        self._flowing: asyncio.Event | None = None
        self._conns: set[asyncio.Task[None]] = set()

    # -- control (from any thread) -----------------------------------------------------------

    def start(self) -> StallProxy:
        self._start()
        return self

    def stall(self) -> None:
        self._call(self._set_flowing(False))

    def resume(self) -> None:
        self._call(self._set_flowing(True))

    def __enter__(self) -> StallProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the proxy's loop --------------------------------------------------------------------

    async def _listen(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _set_flowing(self, flowing: bool) -> None:
        assert self._flowing is not None
        if flowing:
            self._flowing.set()
        else:
            self._flowing.clear()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._conns):
            task.cancel()
        await asyncio.gather(*self._conns, return_exceptions=True)

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.accepted += 1
        task = asyncio.current_task()
        assert task is not None
        assert self._flowing is not None
        self._conns.add(task)
        upstream_w: asyncio.StreamWriter | None = None
        try:
            await self._flowing.wait()  # stalled: the connection is accepted, and then nothing
            upstream_r, upstream_w = await asyncio.open_connection(*self.upstream)
            await asyncio.gather(self._pump(client_r, upstream_w), self._pump(upstream_r, client_w))
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._conns.discard(task)
            for w in (client_w, upstream_w):
                if w is not None:
                    w.close()
                    with contextlib.suppress(OSError, asyncio.CancelledError):
                        await w.wait_closed()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self._flowing is not None
        while True:
            data = await reader.read(_CHUNK)
            await self._flowing.wait()  # hold what was read (an EOF too) while stalled
            if not data:
                with contextlib.suppress(OSError):
                    writer.write_eof()
                return
            writer.write(data)
            await writer.drain()


class HttpFaultProxy(_LoopThread):
    """An HTTPS proxy on loopback in front of the API server that can answer for it.

    It serves the API server's own certificate (so a kubeconfig with the cluster's CA trusts it),
    forwards every request with its headers (the client's bearer token included) and streams the
    answer back, watches too. ``gone()``: every watch is answered with a 410 ERROR event and ends,
    as an API server does for an expired resourceVersion. ``busy(retry_after)``: every other
    request is answered 429 with ``Retry-After``. ``normal()``: forward everything. ``log``
    records (monotonic time, method, path with query, what was answered) for each request.
    """

    name = "http-fault-proxy"

    def __init__(self, upstream: str, cert: pathlib.Path, key: pathlib.Path, ca: pathlib.Path) -> None:
        super().__init__()
        self.upstream = upstream.rstrip("/")
        self._cert, self._key, self._ca = cert, key, ca
        self.mode = "normal"
        self.retry_after = 0
        self.log: list[tuple[float, str, str, str]] = []
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._gone_now: asyncio.Event | None = None
        self._handlers: set[asyncio.Task[Any]] = set()

    def start(self) -> HttpFaultProxy:
        self._start()
        return self

    def normal(self) -> None:
        self._set("normal")

    def gone(self) -> None:
        """Answer every watch 410 from now on; the watches open now end with a 410 too."""
        self._set("gone")

    def busy(self, retry_after: int) -> None:
        self.retry_after = retry_after
        self._set("busy")

    def _set(self, mode: str) -> None:
        self.mode = mode
        if self._loop is not None and self._gone_now is not None:
            event = self._gone_now
            self._loop.call_soon_threadsafe(event.set if mode == "gone" else event.clear)

    async def _listen(self) -> None:
        self._gone_now = asyncio.Event()
        server_ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server_ssl.load_cert_chain(self._cert, self._key)
        client_ssl = ssl.create_default_context(cafile=str(self._ca))
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_ssl, limit=0))
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=server_ssl)
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.Server)
        self.port = server.sockets[0].getsockname()[1]

    async def _shutdown(self) -> None:
        for task in list(self._handlers):  # open watches first: cleanup() would wait for them
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            return await self._answer(request)
        finally:
            self._handlers.discard(task)

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        watch = request.query.get("watch") in ("true", "1")
        mode = self.mode
        if watch and mode == "gone":
            self.log.append((time.monotonic(), request.method, request.path_qs, "410"))
            resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
            await resp.prepare(request)
            await resp.write(_gone_event())
            await resp.write_eof()
            return resp
        if not watch and mode == "busy":
            self.log.append((time.monotonic(), request.method, request.path_qs, "429"))
            return web.Response(
                status=429,
                headers={"Retry-After": str(self.retry_after)},
                content_type="application/json",
                text=json.dumps(_status(429, "TooManyRequests")),
            )
        self.log.append((time.monotonic(), request.method, request.path_qs, "forwarded"))
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() in _FORWARDED_HEADERS}
        async with self._session.request(
            request.method,
            self.upstream + request.path_qs,
            headers=headers,
            data=await request.read(),
            timeout=aiohttp.ClientTimeout(total=None),
            allow_redirects=False,
        ) as upstream:
            resp = web.StreamResponse(
                status=upstream.status,
                headers={k: v for k, v in upstream.headers.items() if k.lower() in _RETURNED_HEADERS},
            )
            await resp.prepare(request)
            if watch:
                await self._relay_watch(upstream, resp)
            else:
                async for chunk in upstream.content.iter_any():
                    await resp.write(chunk)
            await resp.write_eof()
            return resp

    async def _relay_watch(self, upstream: aiohttp.ClientResponse, resp: web.StreamResponse) -> None:
        """Relay watch events until the stream ends, or until ``gone()``: then a 410 ends it."""
        assert self._gone_now is not None
        gone = asyncio.ensure_future(self._gone_now.wait())
        read: asyncio.Future[bytes] | None = None
        try:
            while True:
                read = asyncio.ensure_future(upstream.content.readany())
                await asyncio.wait({read, gone}, return_when=asyncio.FIRST_COMPLETED)
                if gone.done():
                    await resp.write(_gone_event())
                    return
                chunk = read.result()
                if not chunk:
                    return
                await resp.write(chunk)
        finally:
            for future in (gone, read):
                if future is not None and not future.done():
                    future.cancel()
            if read is not None and read.done() and not read.cancelled():
                read.exception()  # retrieved: a connection closed under it is no news


_FORWARDED_HEADERS = frozenset({"authorization", "content-type", "accept", "user-agent"})
_RETURNED_HEADERS = frozenset({"content-type", "retry-after", "audit-id"})


def _gone_event() -> bytes:
    return json.dumps({"type": "ERROR", "object": _status(410, "Expired")}).encode() + b"\n"


def _status(code: int, reason: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": f"answered {code} by the fault proxy",
        "reason": reason,
        "code": code,
    }
