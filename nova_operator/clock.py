"""Time as a seam: the loop's monotonic clock in production, ``FakeClock`` in unit tests."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Protocol


def utcnow() -> datetime:
    """The wall clock, timezone-aware (condition and Event timestamps); passed in where a test fixes it."""
    return datetime.now(UTC)


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds."""
        ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` (synchronously, on the loop) after ``delay`` seconds."""
        ...

    async def sleep(self, delay: float) -> None:
        """Wait ``delay`` seconds of this clock."""
        ...

    def timeout(self, delay: float) -> contextlib.AbstractAsyncContextManager[None]:
        """Like ``asyncio.timeout(delay)``, in this clock's seconds: ``TimeoutError`` when it expires."""
        ...


class LoopClock:
    """The running event loop's clock."""

    def now(self) -> float:
        try:
            return asyncio.get_running_loop().time()
        except RuntimeError:  # called outside the loop (wiring, a test): the same monotonic clock
            return time.monotonic()

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        return asyncio.get_running_loop().call_later(max(0.0, delay), callback)

    async def sleep(self, delay: float) -> None:
        await asyncio.sleep(max(0.0, delay))

    def timeout(self, delay: float) -> contextlib.AbstractAsyncContextManager[None]:
        return _loop_timeout(delay)


@contextlib.asynccontextmanager
async def _loop_timeout(delay: float) -> AsyncIterator[None]:
    async with asyncio.timeout(max(0.0, delay)):
        yield


class _FakeTimer:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """A clock that moves only when told to: ``advance(seconds)`` fires due timers in order."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._timers: list[tuple[float, int, _FakeTimer, Callable[[], None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        timer = _FakeTimer()
        heapq.heappush(self._timers, (self._now + max(0.0, delay), next(self._seq), timer, callback))
        return timer

    async def sleep(self, delay: float) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not done.done():
                done.set_result(None)

        timer = self.call_later(delay, wake)
        try:
            await done
        finally:
            timer.cancel()

    @contextlib.asynccontextmanager
    async def timeout(self, delay: float) -> AsyncIterator[None]:
        # asyncio's own Timeout does the cancel/uncancel bookkeeping; this clock only says when.
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(None) as scope:
            timer = self.call_later(delay, lambda: scope.reschedule(loop.time()))
            try:
                yield
            finally:
                timer.cancel()

    def next_due(self) -> float | None:
        """When the earliest live timer fires (None: nothing is waiting on this clock)."""
        live = [at for at, _, timer, _ in self._timers if not timer.cancelled]
        return min(live) if live else None

    def advance(self, seconds: float) -> None:
        target = self._now + seconds
        while self._timers and self._timers[0][0] <= target:
            at, _, timer, callback = heapq.heappop(self._timers)
            self._now = max(self._now, at)
            if not timer.cancelled:
                callback()
        self._now = target
