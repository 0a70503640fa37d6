"""The kubelet's restart back-off for crashed containers (pure).

A container that exits is restarted at once the first time; after that, a restart waits while the
container is "in back-off" since it finished: 10 s, then doubled per restart up to 300 s (the
container is ``Waiting`` with reason ``CrashLoopBackOff`` meanwhile). A container whose last restart
is more than 600 s (twice the maximum) ago starts over at 10 s. Times are monotonic seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

INITIAL = 10.0
MAXIMUM = 300.0


@dataclass
class _Entry:
    delay: float
    updated: float


@dataclass
class BackOff:
    initial: float = INITIAL
    maximum: float = MAXIMUM
    _entries: dict[str, _Entry] = field(default_factory=dict)

    def _live(self, key: str, now: float) -> _Entry | None:
        entry = self._entries.get(key)
        if entry is not None and now - entry.updated > 2 * self.maximum:
            del self._entries[key]
            return None
        return entry

    def remaining(self, key: str, finished_at: float, now: float) -> float:
        """Seconds until ``key`` may restart, having finished at ``finished_at`` (0: now)."""
        entry = self._live(key, now)
        if entry is None:
            return 0.0
        return max(0.0, finished_at + entry.delay - now)

    def delay(self, key: str, now: float) -> float:
        """The current back-off of ``key`` (0 when it has none)."""
        entry = self._live(key, now)
        return entry.delay if entry else 0.0

    def next(self, key: str, now: float) -> float:
        """Record a restart of ``key`` at ``now``; returns the back-off that now applies."""
        entry = self._live(key, now)
        if entry is None:
            entry = self._entries[key] = _Entry(self.initial, now)
        else:
            entry.delay = min(entry.delay * 2, self.maximum)
            entry.updated = now
        return entry.delay

    def forget(self, key: str) -> None:
        self._entries.pop(key, None)
