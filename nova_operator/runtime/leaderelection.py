"""Leader election on a ``coordination.k8s.io/v1`` Lease (client-go's algorithm).

``LeaderElector.run(lead)``:

1. try to acquire the Lease every half ``retry_period`` (with jitter) until this process holds
   it (a Lease released by a stopping leader is taken within about a second).
   Another holder's lease counts as expired when its record has not changed for
   ``leaseDurationSeconds`` as measured on *our* monotonic clock since we first saw that
   record (no comparison of timestamps across machines);
2. run ``lead()`` and, beside it, renew every ``retry_period``; a renewal that does not
   succeed within ``renew_deadline`` means the lease is lost: ``lead()`` is cancelled and
   ``LeaderElectionLost`` is raised (the process must stop reconciling);
3. when ``lead()`` returns or the elector is cancelled, release the Lease (empty holder,
   1 s duration) so a successor does not wait for expiry.

Defaults (settings): 15 s lease, 10 s renew deadline, 2 s retry period.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import math
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from nova_operator.kube.client import Kube
from nova_operator.kube.errors import Conflict, KubeError, NotFound
from nova_operator.kube.resources import LEASES
from nova_operator.metrics import Metrics
from nova_operator.settings import LeaderElectionSettings

log = structlog.get_logger("nova_operator.runtime.leaderelection")

RBAC_NEEDS: dict[str, tuple[str, ...]] = {str(LEASES): ("get", "create", "update")}
"""The verbs leader election sends (config/rbac must grant them, and no more)."""


class LeaderElectionLost(Exception):
    """The lease could not be renewed within the renew deadline."""


def _micro_time() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        kube: Kube,
        settings: LeaderElectionSettings,
        *,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if settings.renew_deadline >= settings.lease_duration:
            raise ValueError("renew deadline must be shorter than the lease duration")
        self._kube = kube
        self._clock = clock
        self.settings = settings
        self.identity = settings.identity
        self._metrics = metrics
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._leading = False
        if metrics is not None:
            metrics.leader.labels(settings.name).set(0)

    @property
    def is_leader(self) -> bool:
        return self._leading

    async def run(self, lead: Callable[[], Awaitable[None]]) -> None:
        await self._acquire()
        self._set_leading(True)
        log.info("became leader", lease=self.settings.name, identity=self.identity)
        release = True
        try:
            lead_task = asyncio.ensure_future(lead())
            renew_task = asyncio.ensure_future(self._renew())
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
                await self._release()

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
            await asyncio.sleep(s.retry_period * random.uniform(0.4, 0.6))

    async def _renew(self) -> None:
        s = self.settings
        while True:
            await asyncio.sleep(s.retry_period)
            deadline = self._clock() + s.renew_deadline
            while True:
                remaining = deadline - self._clock()
                if remaining <= 0:
                    log.error("lost the lease: no renewal within the deadline", lease=s.name)
                    raise LeaderElectionLost(s.name)
                try:
                    async with asyncio.timeout(remaining):
                        if await self.try_acquire_or_renew():
                            break
                except (KubeError, TimeoutError) as exc:
                    log.warning("lease renewal failed", lease=s.name, error=str(exc) or type(exc).__name__)
                await asyncio.sleep(min(s.retry_period, max(0.0, deadline - self._clock())))

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this process holds the lease afterwards."""
        s = self.settings
        now = _micro_time()
        duration = max(1, math.ceil(s.lease_duration))
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
                await self._kube.create(LEASES, body, s.namespace)
            except Conflict:
                return False
            self._observe(spec)
            return True
        spec = dict(lease.get("spec") or {})
        if spec != self._observed_spec:
            self._observe(spec)
        holder = spec.get("holderIdentity") or ""
        held_for = spec.get("leaseDurationSeconds") or duration
        if holder and holder != self.identity and self._clock() < self._observed_at + held_for:
            return False
        new = dict(spec)
        if holder != self.identity:
            new["acquireTime"] = now
            new["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        new.update(holderIdentity=self.identity, leaseDurationSeconds=duration, renewTime=now)
        lease["spec"] = new
        try:
            await self._kube.replace(LEASES, lease, s.namespace)
        except Conflict:
            return False
        self._observe(new)
        return True

    async def _release(self) -> None:
        s = self.settings
        with contextlib.suppress(KubeError, TimeoutError):
            async with asyncio.timeout(max(1.0, s.retry_period)):
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
        self._observed_at = self._clock()

    def _set_leading(self, leading: bool) -> None:
        self._leading = leading
        if self._metrics is not None:
            self._metrics.leader.labels(self.settings.name).set(1 if leading else 0)
