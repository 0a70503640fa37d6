"""Rate limiters for failed keys: client-go's three-method protocol and its usual combination.

``default_rate_limiter()`` is what every controller uses (reconciler spec §1): per-key
exponential backoff from 5 ms doubling to a 30 s cap, combined by max with a global token
bucket of 10 keys/s and a burst of 100.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol

from nova_operator.clock import Clock, LoopClock


class RateLimiter(Protocol):
    def when(self, item: Hashable) -> float:
        """Seconds to wait before ``item`` may be retried; records one more failure."""
        ...

    def forget(self, item: Hashable) -> None:
        """Stop tracking ``item`` (it succeeded, or is requeued on purpose)."""
        ...

    def num_requeues(self, item: Hashable) -> int: ...


class ItemExponential:
    """``base * 2**failures``, capped at ``cap``; failures counted per item."""

    def __init__(self, base: float = 0.005, cap: float = 30.0) -> None:
        self.base, self.cap = base, cap
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        exp = self._failures.get(item, 0)
        self._failures[item] = exp + 1
        if exp > 62:  # 2**exp would overflow any sensible cap
            return self.cap
        return float(min(self.base * 2**exp, self.cap))

    def forget(self, item: Hashable) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        return self._failures.get(item, 0)


class TokenBucket:
    """A global bucket: ``rate`` tokens per second, at most ``burst`` stored.

    Each ``when`` reserves one token; when the bucket is empty the reservation lies in
    the future and the delay says how far (like ``rate.Limiter.Reserve`` in Go).
    """

    def __init__(self, rate: float = 10.0, burst: int = 100, *, clock: Clock | None = None) -> None:
        self.rate, self.burst = rate, burst
        self._clock = clock if clock is not None else LoopClock()
        self._tokens = float(burst)
        self._last: float | None = None

    def when(self, item: Hashable) -> float:
        now = self._clock.now()
        if self._last is not None:
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.rate)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    def forget(self, item: Hashable) -> None:
        return None

    def num_requeues(self, item: Hashable) -> int:
        return 0


class MaxOf:
    """The longest delay of several limiters; ``forget`` reaches all of them."""

    def __init__(self, *limiters: RateLimiter) -> None:
        self.limiters = limiters

    def when(self, item: Hashable) -> float:
        return max(limiter.when(item) for limiter in self.limiters)

    def forget(self, item: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return max(limiter.num_requeues(item) for limiter in self.limiters)


def default_rate_limiter(
    *,
    base: float = 0.005,
    cap: float = 30.0,
    rate: float = 10.0,
    burst: int = 100,
    clock: Clock | None = None,
) -> MaxOf:
    return MaxOf(ItemExponential(base, cap), TokenBucket(rate, burst, clock=clock))
