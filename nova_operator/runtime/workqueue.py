"""A work queue with client-go semantics.

Three sets carry the invariants: ``dirty`` (keys waiting to be processed), ``processing``
(keys a worker holds) and the FIFO lanes of each flow (dirty keys not being processed).
``_event_turn`` and ``_timer_turn`` order the flows with keys in those lanes (see fair shares).

- Duplicates collapse: adding a key that is already dirty does nothing.
- A key is never handed to two workers at once: a key added while it is processing
  only becomes dirty, and ``done`` puts it back in the queue.
- ``add_after`` parks a key in a heap until its time; the earliest deadline wins.
- Two lanes: a key added by ``add`` (an event: something changed) is handed out before a key
  whose ``add_after`` deadline came (a requeue timer, a backoff retry, a damped event), so with
  many keys waiting a hand-off is not queued behind polls that would find nothing new. An event
  for a key already waiting in the timer lane moves it up. A timer key is never starved: once it
  has waited ``later_max_wait`` seconds it goes next (in its flow's turn, below). With few keys both
  lanes are served at once.
- ``add_after(..., prompt=True)`` parks a key that is not a poll: work due after a delay (a
  pass that must see its own write first, events held back to be handled together). When its time
  comes it joins the event lane, in turn with the events, not the timer lane behind them.
- Fair shares across flows: ``flow(key)`` names the key's flow (the controller's is the key's
  namespace: one tenant); without it every key is of one flow, and the queue behaves as described
  above and below. Each flow has its own two lanes, and the flows with keys waiting take turns, as
  the API server's priority and fairness queues take turns across flows. Whose turn it is: the
  first flow with an event waiting, in the order the flows came to have one; or the first flow with
  timer keys, in the order they came to have them, when its timer key has waited
  ``later_max_wait``; of those two, the one first in turn (a flow served goes to the back: it takes
  a new ticket). A flow none of whose keys is being processed goes first, as fair queuing counts the
  seats a flow holds: before running flows it follows in its order, and of the two. With neither,
  the first flow with timer keys. So a flow whose passes are slow, or which holds many keys, delays
  another flow's event by at most one pass of its own besides the passes it has running; polls,
  however many, go before another flow's event only once they are old, and then in turn; and a pick
  looks at no flow it passes over but flows with keys being processed (no more than keys are).
- Fair shares within a flow: its event lane is first in, first out and holds a key at most once, so a
  key added (a new CR's first event) waits for at most one pass of each key of its flow that was
  waiting before it; a key handed out and added again goes to the back, behind every key that was
  waiting meanwhile.
- ``expedite`` moves a key waiting in the event lane to its head, and its flow to the head of the
  turn: the one exception to the fair shares, for a key whose pass is overdue (a status report held
  for that pass, ``runtime.held``).
- ``shutdown`` stops handing out work (``get`` raises ``ShutDown``) and drops parked
  keys; ``drain`` waits until every held key is ``done``.

Everything runs on the event loop without helper tasks: ``get`` waits on a future that
``add``/``done``/``shutdown`` resolve, and parked keys are promoted by one clock timer.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from nova_operator.clock import Clock, LoopClock, Timer
from nova_operator.metrics import Metrics
from nova_operator.runtime.ratelimit import RateLimiter, default_rate_limiter

T = TypeVar("T", bound=Hashable)
LATER_MAX_WAIT = 30.0
"""Seconds a key of the timer lane may wait behind event keys before it goes next."""


class ShutDown(Exception):
    """The queue is shut down: no more work."""


def _one_flow(_item: Hashable) -> Hashable:
    return None


_NONE: Hashable = object()  # no flow chosen yet


class _Flow(Generic[T]):
    """The keys of one flow waiting to be handed out: its event lane and its timer lane."""

    __slots__ = ("events", "later", "ticket")

    def __init__(self, ticket: int) -> None:
        self.events: deque[T] = deque()
        self.later: deque[T] = deque()
        self.ticket = ticket  # its place in the turn: taken when it joined or was last served

    def __bool__(self) -> bool:
        return bool(self.events or self.later)


class WorkQueue(Generic[T]):
    def __init__(
        self,
        *,
        name: str = "",
        rate_limiter: RateLimiter | None = None,
        clock: Clock | None = None,
        metrics: Metrics | None = None,
        later_max_wait: float = LATER_MAX_WAIT,
        flow: Callable[[T], Hashable] = _one_flow,
    ) -> None:
        self.name = name
        self._flow_of = flow
        self._later_max_wait = later_max_wait
        self._clock = clock if clock is not None else LoopClock()
        self._limiter = rate_limiter if rate_limiter is not None else default_rate_limiter(clock=self._clock)
        self._metrics = metrics
        self._flows: dict[Hashable, _Flow[T]] = {}  # flows with keys waiting
        # The turn, in two orders so that a pick looks at no flow it passes over but running ones:
        # the flows with an event waiting, and the flows with a timer key waiting, each in the order
        # they joined it (a flow served goes to the back of both); the tickets order the two.
        self._event_turn: OrderedDict[Hashable, None] = OrderedDict()
        self._timer_turn: OrderedDict[Hashable, None] = OrderedDict()
        self._tickets = itertools.count()
        self._front = 0  # tickets below every other: ``expedite``
        self._ready = 0  # keys waiting in every flow's lanes
        self._running: dict[Hashable, int] = {}  # keys being processed, by flow
        self._urgent: set[T] = set()  # dirty keys an event added (they belong in the event lane)
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        self._added_at: dict[T, float] = {}
        self._started_at: dict[T, float] = {}
        self._parked: list[tuple[float, int, T]] = []
        self._parked_at: dict[T, float] = {}
        self._parked_prompt: set[T] = set()  # parked keys that join the event lane when due
        self._seq = itertools.count()
        self._timer: Timer | None = None
        self._timer_at = float("inf")
        self._getters: deque[asyncio.Future[None]] = deque()
        self._drainers: list[asyncio.Future[None]] = []
        self._shutting_down = False
        if metrics is not None:  # read when /metrics is scraped, like client-go's periodic update
            metrics.queue_longest.labels(name).set_function(lambda: max(self._held_for(), default=0.0))
            metrics.queue_unfinished.labels(name).set_function(lambda: sum(self._held_for()))

    # -- adding ------------------------------------------------------------------------------

    def add(self, item: T) -> None:
        """An event for ``item``: it joins the event lane (or moves up to it)."""
        self._push(item, urgent=True)

    def _push(self, item: T, *, urgent: bool) -> None:
        if self._shutting_down:
            return
        if item in self._dirty:
            if urgent and item not in self._urgent:
                self._urgent.add(item)
                if item not in self._processing:  # waiting in the timer lane: move it up
                    key = self._flow_of(item)
                    flow = self._flows[key]
                    flow.later.remove(item)
                    flow.events.append(item)
                    if not flow.later:
                        del self._timer_turn[key]
                    self._event_turn.setdefault(key)
            return
        self._dirty.add(item)
        if urgent:
            self._urgent.add(item)
        if self._metrics is not None:
            self._metrics.queue_adds.labels(self.name).inc()
        self._added_at.setdefault(item, self._clock.now())
        if item in self._processing:
            return
        self._line_up(item, urgent=urgent)

    def add_after(self, item: T, delay: float, *, prompt: bool = False) -> None:
        """``item`` after ``delay`` seconds, in the timer lane (a poll, a retry) or, ``prompt``, the
        event lane (work that is due then). Parked twice, it keeps the earlier deadline, and is
        prompt when either was."""
        if self._shutting_down:
            return
        if delay <= 0:
            self._push(item, urgent=prompt)
            return
        if prompt:
            self._parked_prompt.add(item)
        at = self._clock.now() + delay
        if self._parked_at.get(item, float("inf")) <= at:
            return
        self._parked_at[item] = at
        heapq.heappush(self._parked, (at, next(self._seq), item))
        self._arm_timer()

    def add_rate_limited(self, item: T) -> None:
        if self._metrics is not None:
            self._metrics.queue_retries.labels(self.name).inc()
        self.add_after(item, self._limiter.when(item))

    def forget(self, item: T) -> None:
        self._limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return self._limiter.num_requeues(item)

    def expedite(self, item: T) -> bool:
        """Move ``item``, waiting in the event lane, to its head, so the next free worker takes it.
        False when it is not waiting there: nothing due, its pass running, or its work parked until
        its time (a pass that must see its own write waits for it even so)."""
        if self._shutting_down or item in self._processing or item not in self._urgent:
            return False
        key = self._flow_of(item)
        flow = self._flows.get(key)
        try:
            if flow is None:
                raise ValueError(item)
            flow.events.remove(item)
        except ValueError:  # not in the lane after all: leave the order alone
            return False
        flow.events.appendleft(item)
        self._event_turn.move_to_end(key, last=False)  # its flow's turn comes first
        self._front -= 1
        flow.ticket = self._front
        return True

    # -- processing --------------------------------------------------------------------------

    async def get(self) -> T:
        """The next key; the caller must call ``done(key)`` when finished with it."""
        while not self._ready:
            if self._shutting_down:
                raise ShutDown(self.name)
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():
                    self._wake_one()  # we were woken for a key we will not take: pass it on
                raise
            finally:
                if not fut.done():
                    fut.cancel()
                if fut in self._getters:
                    self._getters.remove(fut)
        if self._shutting_down:
            raise ShutDown(self.name)
        now = self._clock.now()
        item = self._next(now)
        self._dirty.discard(item)
        self._urgent.discard(item)
        self._processing.add(item)
        self._started_at[item] = now
        added = self._added_at.pop(item, now)
        if self._metrics is not None:
            self._metrics.queue_latency.labels(self.name).observe(now - added)
        self._set_depth()
        return item

    def _next(self, now: float) -> T:
        """The key of the flow whose turn it is (``_turn``); that flow goes to the back of the turn."""
        chosen = self._turn(now)
        flow = self._flows[chosen]
        if flow.later and (not flow.events or self._old(flow, now)):
            item = flow.later.popleft()
        else:
            item = flow.events.popleft()
        self._running[chosen] = self._running.get(chosen, 0) + 1
        self._event_turn.pop(chosen, None)
        self._timer_turn.pop(chosen, None)
        if flow:  # the back of the turn
            flow.ticket = next(self._tickets)
            if flow.events:
                self._event_turn[chosen] = None
            if flow.later:
                self._timer_turn[chosen] = None
        else:
            del self._flows[chosen]
        self._ready -= 1
        return item

    def _turn(self, now: float) -> Hashable:
        """The flow whose turn it is. An expedited flow (a ticket below every other) first, running or
        not. Else the candidates: the first flow in the event turn, and the first in the timer turn
        when its timer key is old; in each, a flow with nothing running goes before the running ones
        it follows (``_first``). Of two, the one with nothing running, else the one first in turn (the
        lower ticket). With neither, the timer turn's first flow."""
        head = next(iter(self._event_turn), _NONE)
        if head is not _NONE and self._flows[head].ticket < 0:
            return head
        event = self._first(self._event_turn, lambda _flow: True)
        timer = self._first(self._timer_turn, lambda flow: self._old(flow, now))
        if event is _NONE:
            return timer if timer is not _NONE else self._first(self._timer_turn, lambda _flow: True)
        if timer is _NONE:
            return event
        if (event in self._running) != (timer in self._running):
            return timer if event in self._running else event
        return event if self._flows[event].ticket <= self._flows[timer].ticket else timer

    def _first(self, turn: OrderedDict[Hashable, None], eligible: Callable[[_Flow[T]], bool]) -> Hashable:
        """The first flow of ``turn`` with nothing running, looking past running flows only (and
        stopping at the first other flow); else the first eligible running flow it passed."""
        passed: Hashable = _NONE
        for key in turn:
            flow = self._flows[key]
            if key not in self._running:
                return key if eligible(flow) else passed
            if passed is _NONE and eligible(flow):
                passed = key
        return passed

    def _old(self, flow: _Flow[T], now: float) -> bool:
        """Whether the head of ``flow``'s timer lane has waited long enough to go before events."""
        return bool(flow.later) and now - self._added_at.get(flow.later[0], now) >= self._later_max_wait

    def _line_up(self, item: T, *, urgent: bool) -> None:
        """``item`` joins its flow's lane; a flow joins the turn of that lane at its back when it was
        not in it (a flow new to the turn takes the next ticket)."""
        key = self._flow_of(item)
        flow = self._flows.get(key)
        if flow is None:
            flow = self._flows[key] = _Flow(next(self._tickets))
        if urgent:
            flow.events.append(item)
            self._event_turn.setdefault(key)
        else:
            flow.later.append(item)
            self._timer_turn.setdefault(key)
        self._ready += 1
        self._set_depth()
        self._wake_one()

    def done(self, item: T) -> None:
        if item in self._processing:
            key = self._flow_of(item)
            left = self._running.get(key, 1) - 1
            if left > 0:
                self._running[key] = left
            else:
                self._running.pop(key, None)
        self._processing.discard(item)
        started = self._started_at.pop(item, None)
        if self._metrics is not None and started is not None:
            self._metrics.queue_work.labels(self.name).observe(self._clock.now() - started)
        if item in self._dirty and not self._shutting_down:
            self._line_up(item, urgent=item in self._urgent)
        if not self._processing:
            for fut in self._drainers:
                if not fut.done():
                    fut.set_result(None)
            self._drainers.clear()

    # -- shutdown ----------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Hand out no more keys; parked keys are dropped. Held keys finish (see ``drain``)."""
        self._shutting_down = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._parked.clear()
        self._parked_at.clear()
        self._parked_prompt.clear()
        for fut in self._getters:
            if not fut.done():
                fut.set_result(None)

    async def drain(self) -> None:
        """Wait until no key is being processed."""
        if not self._processing:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._drainers.append(fut)
        await fut

    async def shutdown_with_drain(self) -> None:
        self.shutdown()
        await self.drain()

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def __len__(self) -> int:
        """Keys ready to be handed out (the depth, both lanes)."""
        return self._ready

    def parked(self) -> int:
        """Keys waiting for their ``add_after`` deadline."""
        return len(self._parked_at)

    def processing(self) -> frozenset[T]:
        return frozenset(self._processing)

    def due(self, item: T) -> bool:
        """Whether work for ``item`` is waiting that is not a poll: an event (in the event lane, or
        come while the key is processed), or an event or due requeue parked until its time (``prompt``)."""
        return item in self._urgent or item in self._parked_prompt

    # -- internals ---------------------------------------------------------------------------

    def _held_for(self) -> list[float]:
        """Seconds each key a worker holds has been held."""
        if not self._started_at:
            return []
        try:
            now = self._clock.now()
        except RuntimeError:  # read outside the event loop (no running loop): nothing to report
            return []
        return [now - started for started in self._started_at.values()]

    def _wake_one(self) -> None:
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(None)
                return

    def _set_depth(self) -> None:
        if self._metrics is not None:
            self._metrics.queue_depth.labels(self.name).set(len(self))

    def _arm_timer(self) -> None:
        if not self._parked:
            return
        at = self._parked[0][0]
        if at >= self._timer_at and self._timer is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        self._timer = self._clock.call_later(at - self._clock.now(), self._on_timer)

    def _on_timer(self) -> None:
        self._timer, self._timer_at = None, float("inf")
        now = self._clock.now()
        while self._parked and self._parked[0][0] <= now:
            at, _, item = heapq.heappop(self._parked)
            if self._parked_at.get(item) == at:
                del self._parked_at[item]
                prompt = item in self._parked_prompt
                self._parked_prompt.discard(item)
                self._push(item, urgent=prompt)
        self._arm_timer()
