"""Leader election on a ``coordination.k8s.io/v1`` Lease (client-go's algorithm).

``LeaderElector.run(lead)``:

1. try to acquire the Lease every half ``retry_period`` (with jitter) until this process holds
   it (a Lease released by a stopping leader is taken within about a second).
   Another holder's lease counts as expired when its record has not changed for
   ``leaseDurationSeconds`` as measured on *our* monotonic clock since we first saw that
   record (no comparison of timestamps across machines);
2. run ``lead()`` and, beside it, renew every ``retry_period``. A renewal is one PUT of the Lease as
   this process's last write returned it (client-go's fast path: no GET while the record it holds
   is current; a conflict or any error falls back to a GET and a PUT in the same attempt), so a
   slow API server costs one round trip per renewal, not two. A renewal attempt that fails
   (an error, a conflict, no answer) is tried again every ``retry_period`` until
   ``renew_deadline`` after the renewal was due, as client-go does; each attempt has a timeout
   of its own, ``attempt_timeout`` (half the renew deadline, at least the retry period), cut to
   what is left of the deadline, so one request that hangs (a dead connection, a queue
   somewhere) is abandoned while there is time for another. No renewal within the deadline
   means the lease is lost: ``lead()`` is cancelled and ``LeaderElectionLost`` is raised (the
   process must stop reconciling);
3. when ``lead()`` returns or the elector is cancelled, release the Lease (empty holder,
   1 s duration) so a successor does not wait for expiry.

Defaults (settings): 15 s lease, 10 s renew deadline, 2 s retry period.

The Lease requests go through a client of their own (``Kube.own_connections``, asked for by the
manager), on an event loop of their own on a thread of their own (``_LeaseThread``): they never
wait for a connection behind the operator's other requests, nor for the operator's event loop
(held for seconds by a large List or a busy machine, issue 36), and a 429 or 5xx comes back at
once for the renew loop to retry on its schedule. ``lead()`` runs on the caller's loop.
Every failed attempt is logged with the phase it was in (``lease renewal failed``: waiting for
the event loop, waiting for a connection, connecting, request sent and awaiting the response,
or the API's error code) and how long it took;
``nova_operator_leader_election_renewal_duration_seconds`` times each renewal from its due time.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import math
import random
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import structlog

from nova_operator.clock import Clock, LoopClock
from nova_operator.kube.client import Kube
from nova_operator.kube.errors import Conflict, KubeError, NotFound
from nova_operator.kube.resources import LEASES
from nova_operator.kube.tracing import RequestTrace, tracing
from nova_operator.metrics import Metrics
from nova_operator.settings import LeaderElectionSettings

log = structlog.get_logger("nova_operator.runtime.leaderelection")
T = TypeVar("T")

RBAC_NEEDS: dict[str, tuple[str, ...]] = {str(LEASES): ("get", "create", "update")}
"""The verbs leader election sends (config/rbac must grant them, and no more)."""


class LeaderElectionLost(Exception):
    """The lease could not be renewed within the renew deadline."""


def _micro_time() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _LeaseThread:
    """An event loop on a thread of its own, for the Lease requests and the renew loop.

    The operator's event loop can be held for seconds (a large List decoded, a long pass, a
    machine without CPU to spare): a renewal scheduled on it waits that long before it is even
    sent, and its answer waits again before it is read. On a loop of its own the renewal runs on
    time (the interpreter switches threads every few milliseconds), as client-go's does in a
    goroutine of its own.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="leader-election", daemon=True)
        self._thread.start()

    def call(self, coro: Coroutine[Any, Any, T]) -> Awaitable[T]:
        """Run ``coro`` on this loop, awaited from another (cancelling the await cancels ``coro``)."""
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    async def close(self, kube: Kube) -> None:
        """Close ``kube`` (made on this loop), then stop the loop and its thread."""
        with contextlib.suppress(Exception):
            await self.call(kube.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        await asyncio.to_thread(self._thread.join, 5.0)
        if not self._thread.is_alive():
            self.loop.close()


async def _own_connections(kube: Kube) -> Kube:
    return kube.own_connections(close_with_this=False)


class LeaderElector:
    def __init__(
        self,
        kube: Kube,
        settings: LeaderElectionSettings,
        *,
        metrics: Metrics | None = None,
        clock: Clock | None = None,
        own_connections: bool = False,
    ) -> None:
        """``own_connections``: send the Lease requests through ``kube.own_connections()``, and run
        them and the renew loop on an event loop of their own, on a thread of its own (made when
        ``run`` starts, stopped when it ends), rather than through ``kube`` on the caller's loop."""
        if settings.renew_deadline >= settings.lease_duration:
            raise ValueError("renew deadline must be shorter than the lease duration")
        self._kube = kube
        self._own_connections = own_connections
        self._clock: Clock = clock if clock is not None else LoopClock()
        self.attempt_timeout = max(settings.retry_period, settings.renew_deadline / 2)
        """The most one renewal attempt (a PUT, or a GET and a PUT) may take, before the deadline cuts it."""
        self.settings = settings
        self.identity = settings.identity
        self._metrics = metrics
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._held: dict[str, Any] | None = None  # the Lease as our last successful write returned it
        self._leading = False
        if metrics is not None:
            metrics.leader.labels(settings.name).set(0)

    @property
    def is_leader(self) -> bool:
        return self._leading

    async def run(self, lead: Callable[[], Awaitable[None]]) -> None:
        worker: _LeaseThread | None = None
        given = self._kube
        if self._own_connections:
            worker = _LeaseThread()
            self._kube = await worker.call(_own_connections(given))
        try:
            await self._run(lead, worker)
        finally:
            if worker is not None:
                await worker.close(self._kube)
                self._kube = given  # the next run makes its own connections again

    async def _run(self, lead: Callable[[], Awaitable[None]], worker: _LeaseThread | None) -> None:
        def lease_work(coro: Coroutine[Any, Any, None]) -> Awaitable[None]:
            return worker.call(coro) if worker is not None else coro

        await lease_work(self._acquire())
        self._set_leading(True)
        log.info("became leader", lease=self.settings.name, identity=self.identity)
        release = True
        try:
            lead_task = asyncio.ensure_future(lead())
            renew_task = asyncio.ensure_future(lease_work(self._renew()))
            try:
                await asyncio.wait({lead_task, renew_task}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (lead_task, renew_task):
                    task.cancel()
                results = await asyncio.gather(lead_task, renew_task, return_exceptions=True)
            for result in results:
                if isinstance(result, LeaderElectionLost):
                    release = False
                    raise result
                if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                    raise result
        except asyncio.CancelledError:
            release = self.settings.release_on_cancel
            raise
        finally:
            self._set_leading(False)
            if release:
                await lease_work(self._release())

    # -- acquire / renew / release -----------------------------------------------------------

    async def _acquire(self) -> None:
        s = self.settings
        while True:
            try:
                if await self.try_acquire_or_renew():
                    return
            except KubeError as exc:
                log.warning("lease acquire failed", lease=s.name, error=str(exc))
            # A standby polls twice per retry period, so a released Lease is taken within ~1 s.
            await self._clock.sleep(s.retry_period * random.uniform(0.4, 0.6))

    async def _renew(self) -> None:
        s = self.settings
        while True:
            due = self._clock.now() + s.retry_period
            await self._clock.sleep(s.retry_period)
            await self.renew(due)

    async def renew(self, due: float) -> None:
        """Renew the held lease, due at ``due``: attempts every retry period until the renew deadline.

        Raises ``LeaderElectionLost`` when no attempt succeeded by ``due + renew_deadline``.
        """
        s = self.settings
        deadline = due + s.renew_deadline
        attempt = 0
        while True:
            started = self._clock.now()
            remaining = deadline - started
            if remaining <= 0:
                self._observe_renewal("lost", started - due)
                log.error(
                    "lost the lease: no renewal within the deadline",
                    lease=s.name,
                    attempts=attempt,
                    renew_deadline=s.renew_deadline,
                )
                raise LeaderElectionLost(s.name)
            attempt += 1
            budget = min(self.attempt_timeout, remaining)
            with tracing() as trace:
                try:
                    async with self._clock.timeout(budget):
                        renewed = await self.try_acquire_or_renew()
                except (KubeError, TimeoutError) as exc:
                    self._log_failure(attempt, started, budget, exc, trace, late=started - due)
                else:
                    if renewed:
                        self._observe_renewal("renewed", self._clock.now() - due)
                        if attempt > 1:
                            log.info("lease renewed", lease=s.name, attempts=attempt)
                        return
                    log.warning(
                        "lease renewal failed",
                        lease=s.name,
                        attempt=attempt,
                        phase="the Lease changed under us (conflict or another holder)",
                        latency=round(self._clock.now() - started, 3),
                    )
            # the next attempt one retry period after this one started (at once if that has passed)
            if (wait := min(started + s.retry_period, deadline) - self._clock.now()) > 0:
                await self._clock.sleep(wait)

    def _log_failure(
        self,
        attempt: int,
        started: float,
        budget: float,
        exc: BaseException,
        trace: RequestTrace,
        *,
        late: float,
    ) -> None:
        """One line per failed attempt: the phase it was in and how long it took."""
        now = self._clock.now()
        if isinstance(exc, TimeoutError):
            # The timeout's wake-up itself ran late by ``held``: the loop was busy (or had no CPU)
            # for that long, and the request may have been answered unread meanwhile.
            held = now - (started + budget)
            if held >= budget / 2:
                phase = f"waiting for the event loop (held {held:.3g} s past the attempt's timeout)"
            else:
                phase = f"no answer within {budget:.3g} s: {trace.describe()}"
        elif isinstance(exc, KubeError) and exc.status:
            phase = f"API error {exc.status}" + (f" ({trace.request})" if trace.request else "")
        else:
            phase = f"{trace.describe()}: {str(exc) or type(exc).__name__}"
        log.warning(
            "lease renewal failed",
            lease=self.settings.name,
            attempt=attempt,
            phase=phase,
            latency=round(now - started, 3),
            renewal_started_late=round(max(0.0, late), 3),
        )

    def _observe_renewal(self, result: str, seconds: float) -> None:
        if self._metrics is not None:
            self._metrics.lease_renewal.labels(self.settings.name, result).observe(max(0.0, seconds))

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this process holds the lease afterwards."""
        s = self.settings
        now = _micro_time()
        duration = max(1, math.ceil(s.lease_duration))
        if await self._renew_held(now, duration):
            return True
        try:
            lease = await self._kube.get(LEASES, s.name, s.namespace)
        except NotFound:
            spec: dict[str, Any] = {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": duration,
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
            }
            body = {
                "apiVersion": LEASES.api_version,
                "kind": LEASES.kind,
                "metadata": {"name": s.name, "namespace": s.namespace},
                "spec": spec,
            }
            try:
                self._held = await self._kube.create(LEASES, body, s.namespace)
            except Conflict:
                return False
            self._observe(spec)
            return True
        spec = dict(lease.get("spec") or {})
        if spec != self._observed_spec:
            self._observe(spec)
        holder = spec.get("holderIdentity") or ""
        held_for = spec.get("leaseDurationSeconds") or duration
        if holder and holder != self.identity and self._clock.now() < self._observed_at + held_for:
            self._held = None
            return False
        new = dict(spec)
        if holder != self.identity:
            new["acquireTime"] = now
            new["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        new.update(holderIdentity=self.identity, leaseDurationSeconds=duration, renewTime=now)
        lease["spec"] = new
        try:
            self._held = await self._kube.replace(LEASES, lease, s.namespace)
        except Conflict:
            self._held = None
            return False
        self._observe(new)
        return True

    async def _renew_held(self, now: str, duration: int) -> bool:
        """The fast path: while this process leads and its own record has not expired on its clock,
        PUT the Lease its last write returned with a new ``renewTime``. That write's
        resourceVersion is the precondition: a Lease anybody else changed since answers 409, and
        then (or on any other error) the caller reads it and decides as on the first attempt."""
        held = self._held
        if held is None or not self._leading or self._observed_spec is None:
            return False
        if self._clock.now() >= self._observed_at + duration:
            return False  # our own record has expired: read before writing
        spec = {**(held.get("spec") or {}), "renewTime": now, "holderIdentity": self.identity}
        body = {**held, "spec": spec}
        try:
            self._held = await self._kube.replace(LEASES, body, self.settings.namespace)
        except KubeError as exc:
            self._held = None
            log.debug("fast lease renewal refused; reading it", lease=self.settings.name, status=exc.status)
            return False
        self._observe(spec)
        return True

    async def _release(self) -> None:
        s = self.settings
        with contextlib.suppress(KubeError, TimeoutError):
            async with self._clock.timeout(max(1.0, s.retry_period)):
                lease = await self._kube.get(LEASES, s.name, s.namespace)
                spec = lease.get("spec") or {}
                if spec.get("holderIdentity") != self.identity:
                    return
                now = _micro_time()
                lease["spec"] = {
                    **spec,
                    "holderIdentity": None,
                    "leaseDurationSeconds": 1,
                    "renewTime": now,
                    "acquireTime": now,
                }
                await self._kube.replace(LEASES, lease, s.namespace)
                log.info("released the lease", lease=s.name, identity=self.identity)

    def _observe(self, spec: dict[str, Any]) -> None:
        self._observed_spec = spec
        self._observed_at = self._clock.now()

    def _set_leading(self, leading: bool) -> None:
        self._leading = leading
        if self._metrics is not None:
            self._metrics.leader.labels(self.settings.name).set(1 if leading else 0)
