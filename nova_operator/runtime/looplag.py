"""How late the event loop runs what it was asked to run: ``nova_operator_event_loop_lag_seconds``.

Everything the operator does shares one event loop: a pass that decodes for seconds without
awaiting, a large List decoded at once, or a machine whose CPUs are busy elsewhere delays every
other task on it, the Lease renewal among them. ``LoopLag.run`` asks to be woken every
``interval`` seconds and records, each time, how much later than asked it ran: near 0 on an idle
loop, the length of the stall when something held the loop (or the process got no CPU).

The worst lag since the last ``take_worst()`` is kept for a test or a benchmark to report.
"""

from __future__ import annotations

from collections.abc import Callable

from nova_operator.clock import Clock, LoopClock

INTERVAL = 0.25
"""Seconds between wake-ups: a stall longer than this is always seen (4 wake-ups a second cost nothing)."""


class LoopLag:
    def __init__(
        self, observe: Callable[[float], None], *, interval: float = INTERVAL, clock: Clock | None = None
    ) -> None:
        self._observe = observe
        self.interval = interval
        self._clock: Clock = clock if clock is not None else LoopClock()
        self.worst = 0.0
        """The largest lag seen since the last ``take_worst()``."""

    def take_worst(self) -> float:
        worst, self.worst = self.worst, 0.0
        return worst

    async def run(self) -> None:
        """Measure until cancelled."""
        while True:
            due = self._clock.now() + self.interval
            await self._clock.sleep(self.interval)
            lag = max(0.0, self._clock.now() - due)
            self.worst = max(self.worst, lag)
            self._observe(lag)
