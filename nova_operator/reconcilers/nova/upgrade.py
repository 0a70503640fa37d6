"""The release upgrade inside the Nova pass: ``nova_operator.decisions.upgrade``'s decisions carried out.

Two seams:

* the Database step, after its gates (provisioning, ``WaitingForConfig``):
  ``dispatch(ctx, steady)`` runs §2 of upgrade-and-cells.md in full (``steady`` is the
  db-sync path it falls through to); ``run_upgrade(ctx, installed, target)`` is the same
  flow for a caller that already ran the lockstep check and only hands over when a phase is
  set or the pair needs an upgrade: what the Database step calls.
* the API (Deployment) step, after its own availability wait: ``rollout_flip(ctx, api)``
  returns the step's result while the phase is ``RollingUpdate`` (gate closed: wait 10 s;
  open: flip to ``Contracting``, requeue 1 s) and None in any other phase.

Wiring (step modules may not import each other, ``tests/unit/reconcilers/test_independence.py``):
the Database step takes the flow as a parameter (``database.reconcile_database(ctx, upgrade_flow=...)``) and
``steps`` binds ``run_upgrade`` into it. The API step's own inline flip is equivalent to
``rollout_flip``.

The phase Jobs run through the Database step's Job mechanics (``database.run_job``: create,
pod-spec-hash gate, recreate on a template change, adoption, permanent failure). Each Job
observed is handed to the exactly-once recorder (``database.record_job_metrics``) under its
suffix (``db-expand``, ``db-migrate``, ``db-contract``) for the ``nova_operator_db_sync_*``
series, and the expand
Job once more under ``db-expand-check`` for the pre-flight report (§4). The flow only
mutates the in-memory status; the pass writes it once at the end.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, cast

from nova_operator import naming
from nova_operator.decisions import upgrade
from nova_operator.decisions.cells import report_pod, termination_message
from nova_operator.decisions.readiness import JobState, deployment_rolled_out, first_container_image
from nova_operator.decisions.upgrade import Action, Decision, JobOutcome, Next, View
from nova_operator.kube.errors import NotFound
from nova_operator.kube.owners import controller_uid
from nova_operator.kube.resources import DEPLOYMENTS, JOBS, NOVAS, PODS
from nova_operator.models.nova import NovaStatus
from nova_operator.naming import Component
from nova_operator.reconcilers.claims import Claim, record_claims
from nova_operator.reconcilers.nova import database
from nova_operator.reconcilers.nova.context import PassContext
from nova_operator.renderers import jobs
from nova_operator.renderers.workload import image_ref
from nova_operator.runtime.request import Result

Steady = Callable[[PassContext], Awaitable[Result]]

STATUS_FIELDS: Final = (
    ("installedRelease", "installed"),
    ("targetRelease", "target"),
    ("upgradePhase", "phase"),
)


class UpgradeBlocked(Exception):
    """The upgrade cannot go on this pass (the work queue backs off); ``reason`` is the condition reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason


def view_of(ctx: PassContext) -> View:
    status = ctx.status
    return View(
        spec_release=ctx.nova.spec.open_stack_release,
        image=image_ref(ctx.nova),
        installed=str(status.get("installedRelease") or ""),
        target=str(status.get("targetRelease") or ""),
        phase=str(status.get("upgradePhase") or ""),
        held=ctx.state.policy_held,
    )


# -- the Database step ------------------------------------------------------------------------


async def dispatch(ctx: PassContext, steady: Steady) -> Result:
    """§2 of upgrade-and-cells.md: the active upgrade, the lockstep check, initiation, else ``steady``."""
    decision = upgrade.decide(view_of(ctx))
    if decision.action is Action.STEADY:
        return await steady(ctx)
    if decision.action is Action.RUN_JOB:
        return await _run_phase(ctx, decision)
    return await apply(ctx, decision)


async def _no_steady(ctx: PassContext) -> Result:
    raise RuntimeError("run_upgrade called for a Nova that needs no upgrade (the caller's dispatch is off)")


async def run_upgrade(ctx: PassContext, installed: str = "", target: str = "") -> Result:
    """The same flow for ``database.dispatch``'s seam; the release pair is re-read from ``ctx``."""
    return await dispatch(ctx, _no_steady)


async def apply(ctx: PassContext, decision: Decision) -> Result:
    """Carry a decision out: delete the phase Jobs (abort) before touching the status, then status,
    condition and events; return the step's result or raise ``UpgradeBlocked``."""
    if decision.action is Action.DELETE_PHASE_JOBS:
        await delete_phase_jobs(ctx)  # any error but NotFound ends the pass before the status changes
    for key, attr in STATUS_FIELDS:
        value = getattr(decision, attr)
        if value:
            ctx.status[key] = value
        else:
            ctx.status.pop(key, None)  # "empty": the CRD enum admits no ""; the write sends null
    _mirror(ctx, decision)
    if decision.condition is not None:
        c = decision.condition
        ctx.set(c.type, c.status, c.reason, c.message)
    for event in decision.events:
        await ctx.emit(event.type, event.reason, event.message)
    if decision.next is Next.ERROR:
        message = decision.condition.message if decision.condition is not None else str(decision.error)
        raise UpgradeBlocked(str(decision.error), message)
    if decision.next is Next.NOW:
        return Result(requeue_after=0.0)
    if decision.next is Next.AFTER:
        return Result(requeue_after=decision.requeue_after)
    return Result()


def _mirror(ctx: PassContext, decision: Decision) -> None:
    """Keep the typed view of the status in step: the workload steps render from ``ctx.nova``.

    On completion the four ``installed-release``-annotated roles must roll in the same pass
    (§6.2); a status write is status-only and wakes no further pass.
    """
    if ctx.nova.status is None:
        ctx.nova.status = NovaStatus()
    status = ctx.nova.status
    status.installed_release = decision.installed or None
    status.target_release = decision.target or None
    status.upgrade_phase = cast(Any, decision.phase or None)


async def delete_phase_jobs(ctx: PassContext) -> None:
    """Delete ``{name}-db-expand/-migrate/-contract`` (background propagation; NotFound is fine).

    A Job of that name controlled by another owner is not ours to delete and is left alone.
    """
    for suffix in upgrade.PHASE_JOB_SUFFIXES:
        name = f"{ctx.name}-{suffix}"
        cached = ctx.cached(JOBS, name)
        if cached is not None and controller_uid(cached) not in (None, ctx.uid):
            continue
        with contextlib.suppress(NotFound):
            await ctx.kube.delete(JOBS, name, ctx.namespace, propagation="Background")


def _failure(job: Mapping[str, Any] | None) -> str:
    for c in ((job or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == "Failed" and c.get("status") == "True":
            return str(c.get("message") or c.get("reason") or "failed")
    return "failed"


async def _run_phase(ctx: PassContext, decision: Decision) -> Result:
    suffix = decision.job
    assert suffix is not None
    desired = jobs.phase_job(
        ctx.nova, cast(jobs.Phase, suffix), ctx.state.config_map, checked=ctx.checked_copies
    )
    state, observed = await database.run_job(ctx, desired)
    await database.record_job_metrics(ctx, observed, suffix)
    if suffix == upgrade.DB_EXPAND:
        await report_check(ctx, observed)
    outcome = (
        JobOutcome.NOT_DONE
        if state is None
        else JobOutcome.FAILED
        if state is JobState.FAILED
        else JobOutcome.DONE
    )
    after = upgrade.after_job(
        view_of(ctx), outcome, job_name=desired["metadata"]["name"], error=_failure(observed)
    )
    if outcome is JobOutcome.NOT_DONE and after.condition is not None:  # name a pod that cannot start
        message = database.job_running(ctx, after.condition.message, observed)
        after = dataclasses.replace(after, condition=dataclasses.replace(after.condition, message=message))
    return await apply(ctx, after)


def _of_another_job(pod: Mapping[str, Any], job_uid: str) -> bool:
    """A pod that names a different Job UID (a replaced Job's pod still being garbage-collected)."""
    meta = pod.get("metadata") or {}
    marks = {str(r.get("uid")) for r in meta.get("ownerReferences") or [] if r.get("kind") == "Job"}
    label = (meta.get("labels") or {}).get("batch.kubernetes.io/controller-uid")
    if label:
        marks.add(str(label))
    return bool(marks) and job_uid not in marks


async def read_check_message(ctx: PassContext, job: Mapping[str, Any]) -> str | None:
    """The expand pod's termination message, read uncached (succeeded pod first, else the newest).

    Pods are selected by the ``job-name`` label like the cells report; a pod that positively
    belongs to another UID of that name (the Job was re-created) is left out.
    """
    meta = job.get("metadata") or {}
    try:
        listed = await ctx.kube.list(
            PODS, ctx.namespace, label_selector=f"batch.kubernetes.io/job-name={meta.get('name', '')}"
        )
        pods = [p for p in listed.get("items") or [] if not _of_another_job(p, str(meta.get("uid", "")))]
        pod = report_pod(pods)
    except Exception:  # diagnostic only: never fails the pass
        return None
    return termination_message(pod) if pod is not None else None


async def report_check(ctx: PassContext, job: Mapping[str, Any] | None) -> None:
    """Once per terminal expand Job UID: ``UpgradeCheckCompleted`` or ``UpgradeCheckWarnings`` (§4)."""

    async def record(state: JobState, seconds: float) -> None:
        assert job is not None
        event = upgrade.check_report(await read_check_message(ctx, job))
        await ctx.emit(event.type, event.reason, event.message)

    await record_claims(
        ctx, NOVAS, job, Claim(upgrade.DB_EXPAND_CHECK, record, upgrade.UPGRADE_CHECK_DEFERRED)
    )


# -- the API (Deployment) step ----------------------------------------------------------------


def role_rollouts(ctx: PassContext) -> list[upgrade.Rollout | None]:
    """Conductor, scheduler, metadata and (while enabled) the console proxy, from the cache."""
    components = [Component.CONDUCTOR, Component.SCHEDULER, Component.METADATA]
    if ctx.nova.spec.console_proxy.enabled:
        components.append(Component.NOVNCPROXY)
    found: list[upgrade.Rollout | None] = []
    for component in components:
        name = naming.deployment_name(ctx.name, component)
        live = ctx.cached(DEPLOYMENTS, name)
        found.append(
            None
            if live is None
            else upgrade.Rollout(name, deployment_rolled_out(live), first_container_image(live))
        )
    return found


async def rollout_flip(ctx: PassContext, api: Mapping[str, Any]) -> Result | None:
    """§6.1 for the API step (after its availability wait); None outside ``RollingUpdate``.

    ``api`` is the API Deployment as applied this pass.
    """
    view = view_of(ctx)
    if view.phase != upgrade.ROLLING_UPDATE:
        return None
    ready = upgrade.rollout_gate(
        api_rolled_out=deployment_rolled_out(api), roles=role_rollouts(ctx), image=image_ref(ctx.nova)
    )
    decision = upgrade.flip(view, ready=ready, api_name=str(api["metadata"]["name"]))
    assert decision is not None
    return await apply(ctx, decision)
