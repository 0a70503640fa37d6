"""A TCP proxy on loopback that can stop forwarding: a network that silently drops everything.

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
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
_CHUNK = 65536


class StallProxy:
    def __init__(self, upstream_port: int, *, upstream_host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = 0
        self.accepted = 0  # connections accepted since start
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._flowing: asyncio.Event | None = None
        self._conns: set[asyncio.Task[None]] = set()

    # -- control (from any thread) -----------------------------------------------------------

    def start(self) -> StallProxy:
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._main, args=(ready,), name="stall-proxy", daemon=True)
        self._thread.start()
        ready.result(10)
        return self

    def stall(self) -> None:
        self._call(self._set_flowing(False))

    def resume(self) -> None:
        self._call(self._set_flowing(True))

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop = None

    def __enter__(self) -> StallProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the proxy's loop --------------------------------------------------------------------

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        assert self._loop is not None, "start() the proxy first"
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    def _main(self, ready: concurrent.futures.Future[None]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop

        async def listen() -> None:
            self._flowing = asyncio.Event()
            self._flowing.set()
            self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
            self.port = self._server.sockets[0].getsockname()[1]

        try:
            loop.run_until_complete(listen())
        except BaseException as exc:
            ready.set_exception(exc)
            return
        ready.set_result(None)
        try:
            loop.run_forever()
        finally:
            loop.close()

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
