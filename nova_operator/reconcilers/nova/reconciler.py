"""The Nova pass (reconciler.md §2) and its deletion branch (§12).

A pass: read the CR (gone: done) -> deletion branch -> ensure the finalizer -> snapshot the
status -> the thirteen steps, then the concurrent group -> one status write, skipped when nothing
changed. The result of the pipeline (requeue or error) is returned after the status write on every
exit path.

The pass that adds the finalizer goes on with the work (reconciler.md §2 step 4 requeues 1 s and
stops there "so the next pass sees the persisted finalizer"): the patch answered with the persisted
finalizer and resourceVersion, which the pass's CR carries from then on, and the next pass reads the
CR from the API server until the cache shows that write (``runtime.ownreads``). Stopping cost a new
Nova a second pass, queued behind every other key's events (issue 27: 23 s at the median of 100).

Concurrency: up to N CRs are reconciled at once (never one CR twice); everything a step
hands forward lives in the pass's ``PassContext``. The reconciler object holds only what is
shared on purpose: the informer caches, the event recorder, the health-probe cache. Its wiring
(informers, indexes, watches) is ``nova.controller``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final

import structlog
from pydantic import ValidationError

from nova_operator import conditions, intervals, naming, ownership
from nova_operator.apply import delete_if_present
from nova_operator.clock import utcnow
from nova_operator.decisions import spec_routes
from nova_operator.kube.client import Kube
from nova_operator.kube.errors import KubeError, NotFound
from nova_operator.kube.resources import (
    DATABASES,
    GRANTS,
    NOVAS,
    USERS,
    ResourceRef,
)
from nova_operator.models.nova import Nova
from nova_operator.pipeline import Budget, run_group, run_sequence, shortest
from nova_operator.reconcilers.finalizers import ensure_finalizer, has_finalizer, remove_finalizer
from nova_operator.reconcilers.metrics import NovaMetrics, StepMetrics
from nova_operator.reconcilers.nova import spec_rules, status_hold
from nova_operator.reconcilers.nova.context import NovaOptions, PassContext
from nova_operator.reconcilers.nova.steps import CONDITION_TYPES, NOVA_GROUP, NOVA_STEPS, workloads_at_once
from nova_operator.reconcilers.status import finish_pass, snapshot_status, write_status
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.echoes import OwnWrites
from nova_operator.runtime.events import EventRecorder, EventSink
from nova_operator.runtime.held import HeldWrites
from nova_operator.runtime.ownreads import OwnReads
from nova_operator.runtime.request import Request, Result

log = structlog.get_logger("nova_operator.nova")


EVENT_COMPONENT: Final = "nova-controller"


FINALIZER: Final = "nova.openstack.c5c3.io/finalizer"


INVALID_SPEC: Final = "InvalidSpec"


class NovaReconciler:
    def __init__(
        self,
        kube: Kube,
        caches: Mapping[ResourceRef, Cache],
        *,
        events: EventSink | None = None,
        options: NovaOptions | None = None,
        now: Callable[[], datetime] = utcnow,
        referenced: Mapping[ResourceRef, Cache] | None = None,
    ) -> None:
        self.kube = kube
        self.caches = caches
        self.referenced = referenced if referenced is not None else {}  # see ``PassContext.referenced``
        self.events: EventSink = events if events is not None else EventRecorder(kube, EVENT_COMPONENT)
        self.options = options if options is not None else NovaOptions()
        self.now = now
        self.metrics = NovaMetrics.of(kube.metrics)
        self.observer = StepMetrics(self.metrics, CONDITION_TYPES.items())
        self.reads = OwnReads(kube, NOVAS, caches.get(NOVAS))
        self.writes: OwnWrites | None = None  # the controller's (``runtime.echoes``), set when wired
        # progress-only status writes held until the Nova's next pass (``status_hold``), set when wired
        self.held: HeldWrites[Request] | None = None

    async def reconcile(self, request: Request) -> Result:
        """One pass; the Nova comes from the informer cache (see ``OwnReads`` for when it GETs)."""
        if self.held is not None:
            await self.held.take(request)  # this pass reports: a held report of the last is dropped
        return await self.reads.run_pass(request.namespace, request.name, self._reconcile, Result())

    async def _reconcile(self, obj: dict[str, Any]) -> Result:
        if obj["metadata"].get("deletionTimestamp"):
            return await self.finalize(obj)
        await ensure_finalizer(self.kube, NOVAS, obj, FINALIZER)  # and on (module docstring)
        snapshot = snapshot_status(obj)
        status = snapshot_status(obj)
        generation = int(obj["metadata"].get("generation", 0))
        result, error = Result(), None
        steps, group = NOVA_STEPS, NOVA_GROUP
        try:
            nova: Nova | None = Nova.model_validate(obj)
        except ValidationError as exc:
            routed = spec_routes.route(obj, exc)  # a field's consumer reports it; the rest goes on
            if routed is None:
                await self._invalid_spec(obj, status, exc, generation)
                nova = None
            else:
                nova = routed.nova
                steps, group = (
                    spec_rules.guard(steps, routed.blocked),
                    spec_rules.guard(group, routed.blocked),
                )
        if nova is not None:
            ctx = PassContext(
                kube=self.kube,
                obj=obj,
                nova=nova,
                status=status,
                now=self.now,
                events=self.events,
                caches=self.caches,
                referenced=self.referenced,
                metrics=self.metrics,
                options=self.options,
                initial=snapshot,
                writes=self.writes,
                budget=Budget.of(self.options.pass_budget, self.options.monotonic or time.monotonic),
            )
            try:
                polls: list[Result] = []  # refusals the sequence went on past (ChildOwnedByAnother)
                result = await run_sequence(
                    steps, ctx, self.observer, at_once=workloads_at_once, carried=polls, budget=ctx.budget
                )
                if result.requeue_after is None:
                    grouped = await run_group(group, ctx, self.observer, budget=ctx.budget)
                    result = shortest([grouped, *polls])
            except Exception as exc:
                error = exc
        try:
            await self._report(obj, status, snapshot, generation, held=error is None)
        except KubeError as write_error:
            if error is not None:
                raise ExceptionGroup("pipeline and status write failed", [error, write_error]) from None
            raise
        ready = conditions.is_true(status.get("conditions") or [], conditions.READY)
        meta = obj["metadata"]
        self.metrics.nova_ready.labels(meta["name"], meta.get("namespace") or "").set(1 if ready else 0)
        if error is not None:
            raise error
        return result

    async def _report(
        self,
        obj: dict[str, Any],
        status: dict[str, Any],
        snapshot: Mapping[str, Any],
        generation: int,
        *,
        held: bool,
    ) -> None:
        """The status write (§8.4), or, for a pass without error that only reports progress, the same
        write handed to ``self.held`` (``status_hold``): the next pass drops it when it begins in time."""
        changed = finish_pass(
            status, snapshot, ready_inputs=conditions.NOVA_READY_INPUTS, generation=generation, now=self.now()
        )
        held_now = held and self.held is not None and changed and status_hold.progress_only(snapshot, status)

        async def write() -> None:
            version = str(obj["metadata"].get("resourceVersion") or "")
            await write_status(self.kube, NOVAS, obj, status, snapshot)
            if held_now:
                self.reads.after_pass(obj, version)  # as a pass's own write: the next pass reads it back

        if held_now and self.held is not None:
            meta = obj["metadata"]
            self.held.hold(Request(str(meta.get("namespace") or ""), str(meta["name"])), write)
        else:
            await write()

    async def _invalid_spec(
        self, obj: dict[str, Any], status: dict[str, Any], exc: ValidationError, generation: int
    ) -> None:
        """A rule CEL cannot express failed: a False condition and a Warning event, no crash loop."""
        problems = "; ".join(
            f"spec.{'.'.join(str(p) for p in e['loc'][1:])}: {e['msg']}" for e in exc.errors()[:5]
        )
        message = f"the spec is invalid: {problems}"
        conds: list[conditions.Condition] = status.setdefault("conditions", [])
        previous = conditions.find(conds, conditions.SECRETS_READY)
        repeated = previous is not None and previous.get("message") == message
        conditions.set_condition(
            conds,
            conditions.SECRETS_READY,
            False,
            "ConfigError",
            message,
            generation=generation,
            now=self.now(),
        )
        if not repeated:  # once per distinct problem, not on every wake-up
            await self.events.emit(obj, "Warning", INVALID_SPEC, message)

    # -- deletion (§12) ------------------------------------------------------------------------

    def _mariadb_objects(self, obj: Mapping[str, Any]) -> list[tuple[ResourceRef, str]]:
        """The MariaDB objects of the managed blocks, by name (brownfield blocks have none)."""
        name = obj["metadata"]["name"]
        spec = obj.get("spec") or {}
        targets: list[tuple[ResourceRef, str]] = []
        api, cell = spec.get("apiDatabase") or {}, spec.get("database") or {}
        if api.get("clusterRef"):
            targets += [(DATABASES, f"{name}-api"), (USERS, f"{name}-api"), (GRANTS, f"{name}-api")]
        if cell.get("clusterRef"):
            cell0 = naming.cell0_object_name(name, str(cell.get("database") or ""))
            targets += [(DATABASES, name), (DATABASES, cell0), (USERS, name), (GRANTS, name), (GRANTS, cell0)]
        return targets

    async def finalize(self, obj: dict[str, Any]) -> Result:
        if not has_finalizer(obj, FINALIZER):
            return Result()
        meta = obj["metadata"]
        namespace = meta.get("namespace") or ""
        live = False
        mine: list[tuple[ResourceRef, str, str]] = []
        marks = naming.common_labels(meta["name"])
        for ref, name in self._mariadb_objects(obj):  # observe both blocks before deleting either
            try:
                found = await self.kube.get(ref, name, namespace)
            except NotFound:
                continue
            if ownership.holder(found, str(meta.get("uid") or ""), marks) is not None:
                continue  # another Nova's object under a colliding name (issue 26): never deleted
            mine.append((ref, name, str(found["metadata"].get("uid") or "")))
            live = live or not found["metadata"].get("deletionTimestamp")
        for ref, name, uid in mine:  # the uid precondition: the object judged, not a successor
            await delete_if_present(self.kube, ref, name, namespace, uid=uid or None)
        if live:
            await self.events.emit(
                obj,
                "Normal",
                "FinalizingDatabase",
                "cleaning up both schemas' Databases, Users and Grants",
            )
            return Result(requeue_after=intervals.DATABASE_WAIT)
        await self.events.emit(obj, "Normal", "DatabaseFinalized", "marked for deletion; releasing finalizer")
        await remove_finalizer(self.kube, NOVAS, obj, FINALIZER)
        self.metrics.forget_nova(meta["name"], namespace)
        self.options.health.evict(str(meta.get("uid", "")))
        self.options.sweeps.evict(str(meta.get("uid", "")))
        if isinstance(self.events, EventRecorder):
            self.events.forget(str(meta.get("uid", "")))
        return Result()
