"""Writes held back a moment per key, and dropped when the key's next pass begins (``HeldWrites``).

A pass that only reports progress (a wait that moved on to its next stage) is superseded by the
key's next pass as soon as that one runs: the next pass reports from what is persisted, so the held
report need never be sent. When the pass ends its write is handed here instead of sent:

- ``take(key)``, which the key's next pass calls first, drops a held write that was not sent yet
  (and waits for one being sent, so the pass never races it);
- otherwise the write is sent ``hold`` seconds after the pass, or, while work for the key is
  already due (``due(key)``: its next pass is coming), when that pass has not begun ``longest``
  seconds after; a failed send wakes the key (``failed``), so its next pass writes again.
- at ``longest``, a pass still waiting in the queue is moved to its head (``expedite(key)``) and
  given ``hold`` seconds more to begin: under load the held report is stale by then (the cache
  already shows what the pass will report), and the pass reports the truth for the write the
  stale report would have cost. Only when it does not begin in that time is the write sent.

So a wait that lasts more than ``hold`` seconds is reported, and a wait shorter than that which is
followed at once by the next stage is reported by that stage's write only.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

import structlog

from nova_operator.clock import Clock, LoopClock, Timer

K = TypeVar("K", bound=Hashable)
Write = Callable[[], Awaitable[object]]

log = structlog.get_logger("nova_operator.held")


@dataclass
class _Held:
    write: Write
    since: float
    timer: Timer
    expedited: bool = False


class HeldWrites(Generic[K]):
    def __init__(
        self,
        *,
        hold: float,
        longest: float,
        due: Callable[[K], bool] = lambda _key: False,
        expedite: Callable[[K], bool] = lambda _key: False,
        failed: Callable[[K], None] = lambda _key: None,
        clock: Clock | None = None,
    ) -> None:
        self.hold_seconds = hold
        self.longest = max(hold, longest)
        self._due = due
        self._expedite = expedite
        self._failed = failed
        self._clock: Clock = clock if clock is not None else LoopClock()
        self._held: dict[K, _Held] = {}
        self._sending: dict[K, asyncio.Task[None]] = {}

    def hold(self, key: K, write: Write) -> None:
        """Send ``write`` later (see the module docstring) unless ``take(key)`` comes first."""
        self._drop(key)
        self._held[key] = _Held(
            write, self._clock.now(), self._clock.call_later(self.hold_seconds, self._fire(key))
        )

    async def take(self, key: K) -> bool:
        """The key's next pass begins: True when a held write was dropped unsent; a write being
        sent is waited for (its outcome is the sender's to log)."""
        if self._drop(key):
            return True
        task = self._sending.get(key)
        if task is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(task)
        return False

    def close(self) -> None:
        """Drop every held write (the controller stops: the next leader's passes report). A write
        already being sent goes on."""
        for key in list(self._held):
            self._drop(key)

    def __len__(self) -> int:
        return len(self._held)

    def sending(self) -> int:
        return len(self._sending)

    # -- internals ---------------------------------------------------------------------------

    def _drop(self, key: K) -> bool:
        held = self._held.pop(key, None)
        if held is None:
            return False
        held.timer.cancel()
        return True

    def _fire(self, key: K) -> Callable[[], None]:
        def fire() -> None:
            held = self._held.get(key)
            if held is None:
                return
            waited = self._clock.now() - held.since
            if self._due(key) and waited < self.longest:  # its next pass is coming: let it report
                held.timer = self._clock.call_later(min(self.hold_seconds, self.longest - waited), fire)
                return
            if not held.expedited and self._due(key) and self._expedite(key):  # overdue: it goes next
                held.expedited = True
                held.timer = self._clock.call_later(self.hold_seconds, fire)
                return
            del self._held[key]
            self._sending[key] = asyncio.get_running_loop().create_task(self._send(key, held.write))

        return fire

    async def _send(self, key: K, write: Write) -> None:
        try:
            await write()
        except Exception as exc:
            log.warning("a held write failed; the key's next pass writes again", key=str(key), error=str(exc))
            self._failed(key)
        finally:
            self._sending.pop(key, None)
