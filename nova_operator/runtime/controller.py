"""A controller: a work queue of ``Request``s, N workers, one reconciler.

Concurrency model: informers call the handlers registered here, which only add keys to
the queue. ``run()`` starts ``workers`` tasks; each takes a key, reconciles it, and
then ``_settle`` (the one place that decides what happens next) picks the outcome:

    raised TerminalError   -> log, forget the key's backoff, no retry
    raised anything else   -> rate-limited requeue (per-key backoff max global bucket);
                              a CancelledError from inside the reconcile is such an error:
                              only the worker's own cancellation ends a worker
    Result(requeue_after)  -> forget the backoff, add_after(requeue_after); a short one (at most
                              ``prompt_requeue``: the next pass that must see this one's write)
                              is work, not a poll: it joins the event lane when due; one marked
                              ``left_over`` (the pass's budget ran out) is counted too
    Result()               -> forget the backoff; done until the next event

Events for a key re-triggered pass after pass (two writers fighting over a field) are delayed
with a growing backoff (``runtime.damping``); requeues the reconciler asks for are not. The events
of owned or mapped objects are held ``coalesce`` seconds (the first one's deadline), so a burst of
them, such as several children turning ready one after the other, is one pass; the primary's own
events (a new CR, a spec change) are handed out at once.

Fair shares: the queue's flows are the keys' namespaces (one tenant each). The namespaces with keys
waiting take turns for the workers, one pass per turn, and a free worker goes first to a namespace
with nothing running (``runtime.workqueue``), so a namespace whose passes are slow, or which holds
many keys, delays another namespace's event by at most one pass of its own besides the passes
already running; the pass's budget (the reconciler's: well below
``reconcile_timeout``) bounds how long that pass is. Polls and retries of one namespace go before
another's event only once they have waited ``later_max_wait``, and then in turn too.

The queue guarantees a key is never reconciled by two workers at once. ``stop()`` shuts
the queue down: workers finish their current key and exit. Every log line of one
reconcile carries controller, namespace, name and reconcile_id (structlog contextvars).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Sequence

import structlog

from nova_operator.clock import Clock, LoopClock
from nova_operator.metrics import Metrics, counting_writes
from nova_operator.runtime.damping import HotKeys
from nova_operator.runtime.echoes import OwnWrites
from nova_operator.runtime.handlers import (
    ForgetWriter,
    MapFunc,
    enqueue_for_object,
    enqueue_for_owner,
    enqueue_mapped,
)
from nova_operator.runtime.informer import Informer
from nova_operator.runtime.predicates import Predicate
from nova_operator.runtime.ratelimit import RateLimiter, default_rate_limiter
from nova_operator.runtime.reconciler import Reconciler
from nova_operator.runtime.request import Request, Result, TerminalError
from nova_operator.runtime.workqueue import ShutDown, WorkQueue
from nova_operator.settings import QueueSettings

log = structlog.get_logger("nova_operator.controller")


def _namespace(request: Request) -> str:
    """A key's flow in the queue's fair shares: its namespace (one tenant)."""
    return request.namespace


class ReconcileTimeout(Exception):
    """A reconcile outlived the controller's ``reconcile_timeout``."""


class ReconcileCancelled(Exception):
    """A reconcile raised ``CancelledError`` although its worker was not being cancelled."""


class Controller:
    def __init__(
        self,
        name: str,
        reconciler: Reconciler,
        *,
        settings: QueueSettings | None = None,
        metrics: Metrics | None = None,
        rate_limiter: RateLimiter | None = None,
        clock: Clock | None = None,
    ) -> None:
        s = settings if settings is not None else QueueSettings()
        self.name = name
        self.reconciler = reconciler
        self.workers = s.workers if s.workers > 0 else QueueSettings().workers
        self.reconcile_timeout = s.reconcile_timeout
        self.prompt_requeue = s.prompt_requeue
        self.coalesce = s.coalesce
        self.metrics = metrics if metrics is not None else Metrics()
        limiter = rate_limiter or default_rate_limiter(
            base=s.backoff_base, cap=s.backoff_cap, rate=s.bucket_rate, burst=s.bucket_burst, clock=clock
        )
        self.queue: WorkQueue[Request] = WorkQueue(
            name=name, rate_limiter=limiter, clock=clock, metrics=self.metrics, flow=_namespace
        )
        self.primary: Informer | None = None
        self._busy: dict[Request, float] = {}  # key -> when a worker took it (monotonic)
        self._clock: Clock = clock if clock is not None else LoopClock()
        self._hot: HotKeys[Request] = HotKeys(after=s.hot_after, cap=s.hot_delay_cap)
        self._damped: set[Request] = set()  # hot keys already logged
        # What the reconciler records of its own writes (``runtime.echoes``): the watch handlers
        # leave the writer's key out of those writes' echoes; an event that reaches a key during its
        # own pass is decided when the pass ends (the echo may beat the write's response).
        self.own_writes = OwnWrites(busy=lambda key: key in self._busy)
        self._on_stop: list[Callable[[], None]] = []
        self.metrics.register_controller(name, self.workers)

    # -- wiring (before run) -----------------------------------------------------------------

    def enqueue(self, request: Request) -> None:
        """An event for ``request``: reconcile it at once, or later when it is hot (see damping)."""
        self._enqueue(request, 0.0)

    def enqueue_together(self, request: Request) -> None:
        """An event of a child or of a mapped object: reconcile ``request`` with the others that come
        within ``coalesce`` seconds (or later when it is hot)."""
        self._enqueue(request, self.coalesce)

    def _enqueue(self, request: Request, hold: float) -> None:
        delay = self._hot.delay(request, self._clock.now())
        if delay <= 0:
            if hold > 0:
                self.queue.add_after(request, hold, prompt=True)
            else:
                self.queue.add(request)
            return
        if request not in self._damped:
            self._damped.add(request)
            log.warning(
                "key re-triggered pass after pass (another writer fighting?); delaying its events",
                controller=self.name,
                namespace=request.namespace,
                name=request.name,
                delay=round(delay, 3),
            )
        self.metrics.damped_events.labels(self.name).inc()
        self.queue.add_after(request, delay)

    def watch_primary(self, informer: Informer, *predicates: Predicate) -> Controller:
        """Reconcile every object of ``informer`` (its own key)."""
        self.primary = informer
        informer.add_handler(enqueue_for_object(self.enqueue, *predicates, echoes=self.own_writes))
        informer.add_handler(ForgetWriter(self.own_writes))  # a deleted key's writes are forgotten
        return self

    def watch_owned(
        self, informer: Informer, *, owner_group: str, owner_kind: str, predicates: Sequence[Predicate] = ()
    ) -> Controller:
        """Reconcile the controller owner (``owner_group``/``owner_kind``) of every object of ``informer``."""
        informer.add_handler(
            enqueue_for_owner(
                self.enqueue_together,
                group=owner_group,
                kind=owner_kind,
                predicates=predicates,
                echoes=self.own_writes,
            )
        )
        return self

    def watch_mapped(self, informer: Informer, mapper: MapFunc, *predicates: Predicate) -> Controller:
        """Reconcile the keys ``mapper`` returns for every object of ``informer``."""
        informer.add_handler(
            enqueue_mapped(self.enqueue_together, mapper, *predicates, echoes=self.own_writes)
        )
        return self

    def resync(self) -> int:
        """Enqueue every key of the primary cache (predicates bypassed); returns how many."""
        if self.primary is None:
            return 0
        keys = self.primary.cache.list_keys()
        for key in keys:
            self.enqueue(key)
        return len(keys)

    # -- running -----------------------------------------------------------------------------

    def on_stop(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when the workers have ended (or were cancelled): what the reconciler
        scheduled to do later (``runtime.held``) must not outlive its controller, nor its leadership."""
        self._on_stop.append(callback)

    async def run(self) -> None:
        """Run the workers until ``stop()``; returns when they have all finished."""
        try:
            async with asyncio.TaskGroup() as tg:
                for i in range(self.workers):
                    tg.create_task(self._worker(), name=f"{self.name} worker {i}")
        finally:
            for callback in self._on_stop:
                callback()

    def stop(self) -> None:
        self.queue.shutdown()

    async def _worker(self) -> None:
        """Take keys until the queue shuts down. Only the worker's own cancellation ends it early."""
        while True:
            try:
                request = await self.queue.get()
            except ShutDown:
                return
            self._busy[request] = time.monotonic()
            try:
                await self.reconcile_one(request)
            except Exception:  # a bug in settling, never a reconcile's error (those are the key's)
                log.exception("worker failed to settle a key; requeueing it", controller=self.name)
                self.queue.add_rate_limited(request)
            finally:
                if self.own_writes.settle(request):  # an event during the pass that was not its echo
                    self.enqueue(request)
                del self._busy[request]
                self.queue.done(request)

    def stuck(self, after: float) -> list[str]:
        """The keys a worker has been reconciling for longer than ``after`` seconds."""
        now = time.monotonic()
        return [f"{self.name} {r}" for r, since in self._busy.items() if now - since > after]

    async def reconcile_one(self, request: Request) -> str:
        """Reconcile ``request`` once and settle the outcome; returns the result label."""
        rid = uuid.uuid4().hex[:12]
        gauge = self.metrics.active_workers.labels(self.name)
        with (
            structlog.contextvars.bound_contextvars(
                controller=self.name, namespace=request.namespace, name=request.name, reconcile_id=rid
            ),
            counting_writes() as writes,  # this pass's writes (its task's and subtasks'), no other's
        ):
            gauge.inc()
            began = self._clock.now()
            started = time.monotonic()
            result: Result | None = None
            error: Exception | None = None
            try:
                if self.reconcile_timeout:
                    try:
                        async with asyncio.timeout(self.reconcile_timeout):
                            result = await self.reconciler.reconcile(request)
                    except TimeoutError as exc:
                        raise ReconcileTimeout(
                            f"reconcile of {request} did not finish within {self.reconcile_timeout:g} s"
                        ) from exc
                else:
                    result = await self.reconciler.reconcile(request)
            except asyncio.CancelledError as exc:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise  # this worker is being cancelled (shutdown): let it end
                # Raised inside the reconcile (a cancelled future it awaited, a library bug): an
                # error of this key like any other, never the end of the worker.
                error = ReconcileCancelled(f"reconcile of {request} raised CancelledError")
                error.__cause__ = exc
            except Exception as exc:
                error = exc
            finally:
                gauge.dec()
                self.metrics.reconcile_time.labels(self.name).observe(time.monotonic() - started)
                self._hot.reconciled(request, began, wrote=writes.count > 0, ended=self._clock.now())
                if self._damped and self._hot.delay(request, self._clock.now()) <= 0:
                    self._damped.discard(request)
            outcome = self._settle(request, result, error)
            log.debug("reconciled", result=outcome, seconds=round(time.monotonic() - started, 3))
        self.metrics.reconcile_total.labels(self.name, outcome).inc()
        return outcome

    def _settle(self, request: Request, result: Result | None, error: Exception | None) -> str:
        """The one place that decides what happens to a key after a reconcile."""
        if isinstance(error, TerminalError):
            self.queue.forget(request)
            self.metrics.reconcile_errors.labels(self.name).inc()
            log.error("reconcile failed terminally; not retrying", error=str(error))
            return "terminal_error"
        if error is not None:
            self.metrics.reconcile_errors.labels(self.name).inc()
            log.error(
                "reconcile failed; retrying with backoff",
                error=str(error) or type(error).__name__,
                error_type=type(error).__name__,
                requeues=self.queue.num_requeues(request),
                exc_info=error,
            )
            self.queue.add_rate_limited(request)
            return "error"
        if result is not None and result.requeue_after is not None and result.requeue_after >= 0:
            if result.left_over:
                self.metrics.passes_left_over.labels(self.name).inc()
            self.queue.forget(request)
            prompt = result.requeue_after <= self.prompt_requeue
            self.queue.add_after(request, result.requeue_after, prompt=prompt)
            return "requeue_after"
        self.queue.forget(request)
        return "success"
