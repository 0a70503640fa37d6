"""Small HTTP servers on 127.0.0.1 that misbehave the way a tenant's endpoint may (tests only).

A tenant controls its Keystone (``spec.keystoneEndpoint``) and the image of its API pods, so
the operator must survive an answer that is huge, trickles one byte at a time, redirects
elsewhere or echoes text into a condition. ``HostileServer`` answers each (method, path) the
way a test says and records every request it got; ``HeaderTrickle`` never finishes its
status line and headers.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

Behaviour = Callable[[web.Request], Awaitable[web.StreamResponse]]
TRICKLE_PERIOD = 0.5  # one byte every half second: never idle long enough for a read timeout


@dataclass
class Hit:
    method: str
    path: str
    body: bytes
    headers: dict[str, str]
    late: bool  # arrived after the test called ``mark()``


@dataclass
class Stream:
    """What a streaming answer managed to send before it ended."""

    sent: int = 0
    finished: bool = False  # the whole body went out (the client read it all)
    ended: asyncio.Event = field(default_factory=asyncio.Event)


class HostileServer:
    def __init__(self) -> None:
        self.hits: list[Hit] = []
        self.streams: list[Stream] = []
        self._routes: dict[tuple[str, str], Behaviour] = {}
        self._runner: web.AppRunner | None = None
        self._marked = False
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> HostileServer:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def on(self, method: str, path: str, behaviour: Behaviour) -> None:
        self._routes[(method, path)] = behaviour

    def mark(self) -> None:
        """From now on every request is recorded as ``late``."""
        self._marked = True

    def requests(self, method: str | None = None) -> list[Hit]:
        return [h for h in self.hits if method is None or h.method == method]

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.hits.append(Hit(request.method, request.path, body, dict(request.headers), self._marked))
        behaviour = self._routes.get((request.method, request.path))
        if behaviour is None:
            return web.json_response({"error": "no such route"}, status=404)
        return await behaviour(request)

    # -- behaviours ------------------------------------------------------------------------

    @staticmethod
    def answer(status: int, doc: object = None, *, text: str | None = None) -> Behaviour:
        async def handler(_: web.Request) -> web.StreamResponse:
            if text is not None:
                return web.Response(status=status, text=text)
            return web.json_response(doc if doc is not None else {}, status=status)

        return handler

    @staticmethod
    def token(
        *, expires_in: float = 3600.0, delay: float = 0.0, later_delay: float | None = None
    ) -> Behaviour:
        """Keystone's 201 with ``X-Subject-Token`` and a token document; ``later_delay`` slows every
        request after the first."""
        count = [0]

        async def handler(_: web.Request) -> web.StreamResponse:
            count[0] += 1
            wait = delay if count[0] == 1 or later_delay is None else later_delay
            if wait:
                await asyncio.sleep(wait)
            expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=expires_in)
            doc = {
                "token": {
                    "methods": ["password"],
                    "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%S.000000Z"),
                    "issued_at": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.000000Z"),
                    "user": {"id": "u", "name": "nova", "domain": {"id": "default", "name": "Default"}},
                    "project": {"id": "p", "name": "service", "domain": {"id": "default", "name": "Default"}},
                    "roles": [{"id": "r", "name": "admin"}],
                    "catalog": [],
                }
            }
            return web.json_response(doc, status=201, headers={"X-Subject-Token": uuid.uuid4().hex})

        return handler

    @staticmethod
    def redirect(location: str, status: int = 307) -> Behaviour:
        async def handler(_: web.Request) -> web.StreamResponse:
            return web.Response(status=status, headers={"Location": location})

        return handler

    @staticmethod
    def slow(delay: float, then: Behaviour) -> Behaviour:
        async def handler(request: web.Request) -> web.StreamResponse:
            await asyncio.sleep(delay)
            return await then(request)

        return handler

    def huge(self, total: int, *, status: int = 200, content_length: bool = False) -> Behaviour:
        """``total`` bytes of a JSON string, chunked or with a Content-Length; records what went out."""

        async def handler(request: web.Request) -> web.StreamResponse:
            stream = Stream()
            self.streams.append(stream)
            resp = web.StreamResponse(status=status, headers={"Content-Type": "application/json"})
            if content_length:
                resp.content_length = total
            try:
                await resp.prepare(request)
                chunk = b"x" * 65536
                await resp.write(b'"')
                stream.sent = 1
                while stream.sent < total - 1:
                    piece = chunk[: total - 1 - stream.sent]
                    await resp.write(piece)
                    stream.sent += len(piece)
                await resp.write(b'"')
                await resp.write_eof()
                stream.finished = True
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                stream.ended.set()
            return resp

        return handler

    def trickle(self, *, status: int = 200, headers: dict[str, str] | None = None) -> Behaviour:
        """The headers at once, then one body byte every 0.5 s for as long as the client listens."""

        async def handler(request: web.Request) -> web.StreamResponse:
            stream = Stream()
            self.streams.append(stream)
            resp = web.StreamResponse(
                status=status, headers={"Content-Type": "application/json", **(headers or {})}
            )
            try:
                await resp.prepare(request)
                await resp.write(b"[")
                while True:
                    await asyncio.sleep(TRICKLE_PERIOD)
                    await resp.write(b" ")
                    stream.sent += 1
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                stream.ended.set()
            return resp

        return handler


class HeaderTrickle:
    """A server that sends its status line and then one header byte every 0.5 s, forever."""

    def __init__(self, status_line: bytes = b"HTTP/1.1 201 Created\r\n") -> None:
        self._status_line = status_line
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.connections = 0
        self.closed_by_client = 0
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> HeaderTrickle:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(self._status_line + b"X-Pad: ")
            while True:
                await writer.drain()
                await asyncio.sleep(TRICKLE_PERIOD)
                writer.write(b"a")  # once the client has gone, the next drain raises
        except (ConnectionError, asyncio.IncompleteReadError):
            self.closed_by_client += 1
        finally:
            self._tasks.discard(task)
            writer.close()
