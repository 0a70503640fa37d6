"""Time as a seam: the loop's monotonic clock in production, ``FakeClock`` in unit tests."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds."""
        ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` (synchronously, on the loop) after ``delay`` seconds."""
        ...


class LoopClock:
    """The running event loop's clock."""

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        return asyncio.get_running_loop().call_later(max(0.0, delay), callback)


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

    def advance(self, seconds: float) -> None:
        target = self._now + seconds
        while self._timers and self._timers[0][0] <= target:
            at, _, timer, callback = heapq.heappop(self._timers)
            self._now = max(self._now, at)
            if not timer.cancelled:
                callback()
        self._now = target
