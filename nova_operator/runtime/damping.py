"""Hot-loop damping: a key re-triggered by events pass after pass is slowed down, not obeyed at once.

Two writers fighting over one field (another controller, a script, a human with ``kubectl edit``
in a loop) make every write of one an event for the other: without damping the controller
re-applies as fast as it can, forever. ``HotKeys`` watches each key's passes that wrote to the
API server: a *streak* is a run of such passes each starting less than ``quick`` seconds after the
previous one ended (passes that wrote nothing, a rollout being watched, neither extend nor break
it). The gap is counted from the end of a pass, not its start: on a loaded machine a pass itself
may take longer than ``quick``, and a fight must not escape damping by being slow.
Once a streak exceeds ``after`` passes the key is hot: an event for it is delayed by ``base``
doubling per further pass, up to ``cap``, and every writing pass within ``2 * cap`` of the
previous one keeps it hot. A key left alone for ``2 * cap`` is forgiven. An install (a burst of
writing passes for a few seconds) stays under the threshold; a fight reaches it in seconds and
then costs one pass per ``cap``.
Requeues the reconciler asks for (errors, ``requeue_after``) are not damped: only events.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class HotKeys(Generic[K]):
    def __init__(self, *, after: int, cap: float, base: float = 0.5, quick: float = 1.0) -> None:
        self.after, self.cap, self.base, self.quick = after, cap, base, quick
        self._state: dict[K, tuple[int, float]] = {}  # key -> (passes in its streak, last pass end)
        self._passes = 0

    def reconciled(self, key: K, now: float, *, wrote: bool = True, ended: float | None = None) -> None:
        """Record a pass of ``key`` that started at ``now`` and ended at ``ended`` (default: ``now``).
        Only passes that wrote count: a pass that found nothing to do (a rollout being watched)
        neither extends nor breaks a streak."""
        if not wrote:
            return
        streak, last = self._state.get(key, (0, float("-inf")))
        gap = now - last
        if gap < self.quick or (streak > self.after and gap < 2 * self.cap):
            streak += 1
        else:
            streak = 1  # this pass starts a new streak
        end = now if ended is None else max(now, ended)
        self._state[key] = (streak, end)
        self._passes += 1
        if self._passes % 1024 == 0:  # forget keys gone quiet (deleted objects among them)
            self._state = {k: v for k, v in self._state.items() if end - v[1] < 2 * self.cap}

    def delay(self, key: K, now: float) -> float:
        """How long an event for ``key`` should wait before it is reconciled (0: at once)."""
        streak, last = self._state.get(key, (0, float("-inf")))
        if streak <= self.after or now - last >= 2 * self.cap:
            return 0.0
        backoff: float = self.base * 2.0 ** min(streak - self.after - 1, 32)
        return min(self.cap, backoff)

    def hot(self) -> int:
        """How many keys are hot now (for logs and tests)."""
        return sum(1 for streak, _ in self._state.values() if streak > self.after)
