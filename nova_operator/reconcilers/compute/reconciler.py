"""One NovaCompute pass (novacompute-crd.md §5, §16; reconciler.md §15).

    read -> deleting? teardown : ensure finalizer (1 s) -> snapshot -> pipeline -> status write

Status is written once per pass, on every exit path, only when it changed, with Ready
recomputed and observedGeneration stamped (``reconcilers.status``). If both the pipeline
and the status write fail, both errors are raised together.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import structlog
from pydantic import ValidationError

from nova_operator import conditions
from nova_operator.kube import errors
from nova_operator.kube.client import Kube
from nova_operator.kube.resources import NOVACOMPUTES, NOVAS, SECRETS
from nova_operator.kube.types import Object
from nova_operator.models.novacompute import NovaCompute
from nova_operator.pipeline import Budget, Step, StepObserver, run_sequence
from nova_operator.reconcilers.compute.context import (
    DRAIN_FINALIZER,
    ComputePass,
    ComputeSettings,
    Fill,
    Listing,
    Lookup,
    PoolLister,
    no_cache,
    no_fill,
    no_listing,
)
from nova_operator.reconcilers.compute.steps import NOVACOMPUTE_STEPS, TEARDOWN_STEPS
from nova_operator.reconcilers.finalizers import ensure_finalizer, has_finalizer, remove_finalizer
from nova_operator.reconcilers.status import finish_pass, snapshot_status, write_status
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.events import EventSink
from nova_operator.runtime.ownreads import OwnReads
from nova_operator.runtime.request import Request, Result, TerminalError

log = structlog.get_logger("nova_operator.novacompute")

MIRROR_LABEL: Final = "nova.openstack.c5c3.io/compute-config-mirror"
CONFIG_ERROR: Final = "ConfigError"
INVALID_SPEC: Final = "InvalidSpec"


class InvalidPoolSpec(TerminalError):
    """The NovaCompute passes the CRD but not the model; the message names fields, never values."""


class NovaComputeReconciler:
    def __init__(
        self,
        kube: Kube,
        events: EventSink,
        *,
        pools: PoolLister,
        observer: StepObserver,
        cached: Lookup | None = None,
        listed: Listing | None = None,
        fill: Fill | None = None,
        settings: ComputeSettings | None = None,
        own: Cache | None = None,
        nodes: Cache | None = None,
    ) -> None:
        self.kube = kube
        self.events = events
        self.pools = pools
        self.observer = observer
        self.cached = cached
        self.listed = listed
        self.fill = fill
        self.settings = settings if settings is not None else ComputeSettings()
        self.nodes = nodes  # the optional Node informer's cache (read once it has synced)
        # the NovaCompute itself from the informer cache (``own``); see ``OwnReads``
        self.reads = OwnReads(kube, NOVACOMPUTES, own)

    async def reconcile(self, request: Request) -> Result:
        return await self.reads.run_pass(request.namespace, request.name, self._reconcile, Result())

    async def _reconcile(self, cr: Object) -> Result:
        if cr["metadata"].get("deletionTimestamp"):
            return await self._teardown(cr)
        if await ensure_finalizer(self.kube, NOVACOMPUTES, cr, DRAIN_FINALIZER):
            return Result(requeue_after=self.settings.intervals.next_pass)
        try:
            p = self._pass(cr)
        except InvalidPoolSpec as exc:
            return await self._invalid_spec(cr, str(exc))
        return await self._run(p, NOVACOMPUTE_STEPS)

    async def _invalid_spec(self, cr: Object, message: str) -> Result:
        """A rule only the model checks failed: ConfigReady=False ConfigError, one Warning per problem.

        No requeue: the spec must change, and a spec change wakes the pool.
        """
        snapshot, status = snapshot_status(cr), snapshot_status(cr)
        conds: list[conditions.Condition] = status.setdefault("conditions", [])
        previous = conditions.find(conds, conditions.CONFIG_READY)
        repeated = previous is not None and previous.get("message") == message
        generation = int(cr["metadata"].get("generation", 0))
        now = self.settings.clock()
        conditions.set_condition(
            conds, conditions.CONFIG_READY, False, CONFIG_ERROR, message, generation=generation, now=now
        )
        if not repeated:  # once per distinct problem, not on every wake-up
            await self.events.emit(cr, "Warning", INVALID_SPEC, message)
        finish_pass(
            status, snapshot, ready_inputs=conditions.NOVACOMPUTE_READY_INPUTS, generation=generation, now=now
        )
        await write_status(self.kube, NOVACOMPUTES, cr, status, snapshot)
        return Result()

    def _pass(self, cr: Object) -> ComputePass:
        try:
            pool = NovaCompute.model_validate(cr)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]
            )
            raise InvalidPoolSpec(f"the spec is invalid: {problems}") from None
        return ComputePass(
            kube=self.kube,
            events=self.events,
            settings=self.settings,
            cr=cr,
            pool=pool,
            status=snapshot_status(cr),
            pools=self.pools,
            now=self.settings.clock(),
            budget=Budget.of(self.settings.pass_budget, self.settings.monotonic),
            cached=self.cached or no_cache,
            listed=self.listed or no_listing,
            fill=self.fill or no_fill,
            node_cache=self.nodes,
        )

    async def _run(self, p: ComputePass, steps: Sequence[Step[ComputePass]]) -> Result:
        """Run ``steps`` and write the status once, whatever happened."""
        snapshot = snapshot_status(p.cr)
        failure: Exception | None = None
        result = Result()
        try:
            result = await run_sequence(steps, p, self.observer, budget=p.budget)
        except Exception as exc:
            failure = exc
        finally:
            p.close()
        finish_pass(
            p.status,
            snapshot,
            ready_inputs=conditions.NOVACOMPUTE_READY_INPUTS,
            generation=p.generation,
            now=p.now,
        )
        try:
            await write_status(self.kube, NOVACOMPUTES, p.cr, p.status, snapshot)
        except errors.KubeError as exc:
            if failure is not None:
                raise ExceptionGroup("the pass and its status write failed", [failure, exc]) from None
            raise
        if failure is not None:
            raise failure
        return result

    # -- deletion (§16) --------------------------------------------------------------------

    async def _teardown(self, cr: Object) -> Result:
        if has_finalizer(cr, DRAIN_FINALIZER) and await self._nova_exists(cr):
            try:
                p = self._pass(cr)
            except InvalidPoolSpec as exc:
                # Nothing can be drained from a spec that does not parse; never keep the pool
                # Terminating for it (its children go by garbage collection).
                await self.events.emit(
                    cr, "Warning", INVALID_SPEC, f"{exc}; deleted without draining its compute services"
                )
                return await self._release(cr)
            held_at_start = bool(p.nodes)
            steps = NOVACOMPUTE_STEPS if held_at_start else TEARDOWN_STEPS
            result = await self._run(p, steps)  # an error propagates: the pass failed
            if held_at_start or not p.aggregates_ensured:
                return (
                    result
                    if result.requeue_after is not None
                    else Result(requeue_after=self.settings.intervals.draining)
                )
        return await self._release(cr)

    async def _release(self, cr: Object) -> Result:
        await self._reap_mirrors(cr)
        # Local children go by garbage collection through their owner references.
        await remove_finalizer(self.kube, NOVACOMPUTES, cr, DRAIN_FINALIZER)
        self.settings.resume.finished(cr["metadata"]["namespace"], cr["metadata"]["name"])
        self.settings.claims.finished(cr["metadata"]["namespace"], cr["metadata"]["name"])
        return Result()

    async def _nova_exists(self, cr: Object) -> bool:
        nova = ((cr.get("spec") or {}).get("novaRef") or {}).get("name") or ""
        try:
            await self.kube.get(NOVAS, nova, cr["metadata"]["namespace"])
        except errors.NotFound:
            return False
        return True

    async def _reap_mirrors(self, cr: Object) -> None:
        """Delete the ControlPlane's mirror Secrets once no other pool of the Nova needs them."""
        ns = cr["metadata"]["namespace"]
        nova = ((cr.get("spec") or {}).get("novaRef") or {}).get("name") or ""
        nova_exists = await self._nova_exists(cr)
        for other in self.pools(ns, nova):
            meta = other["metadata"]
            if meta["name"] == cr["metadata"]["name"]:
                continue
            draining = (
                DRAIN_FINALIZER in (meta.get("finalizers") or [])
                and bool((other.get("status") or {}).get("nodes"))
                and nova_exists
            )
            if not meta.get("deletionTimestamp") or draining:
                return
        for name in (f"{nova}-compute-config", f"{nova}-hypervisor-operator-auth"):
            try:
                secret = await self.kube.get(SECRETS, name, ns)
            except errors.NotFound:
                continue
            if ((secret.get("metadata") or {}).get("labels") or {}).get(MIRROR_LABEL) != "true":
                continue
            try:
                await self.kube.delete(SECRETS, name, ns)
            except errors.NotFound:
                continue
            await self.events.emit(
                cr, "Normal", "ComputeConfigMirrorReaped", f"deleted the mirrored Secret {ns}/{name}"
            )
