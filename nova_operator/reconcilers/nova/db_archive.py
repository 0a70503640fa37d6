"""Step 12, ``DBArchive`` (``DBArchiveReady``): the ``{name}-db-archive`` CronJob and its runs (§6).

The CronJob exists on every pass (with or without ``spec.dbArchive``). The newest terminal
run controlled by this CronJob decides the condition, except that ``suspend`` wins. Each
terminal run is recorded once in ``nova_operator_db_archive_*`` (suffix ``db-archive``).
A ``retentionDays`` removed or lowered (the upstream webhook's admission warning) is a Warning
event ``DBArchiveRetentionReduced`` when the CronJob takes the new window: the live CronJob's
``RETENTION_DAYS`` is the old value, so the event comes once per change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from nova_operator import conditions, intervals, naming
from nova_operator.decisions import pod_start
from nova_operator.decisions.readiness import JobState, job_state
from nova_operator.kube.owners import controller_uid
from nova_operator.kube.resources import CRONJOBS, JOBS, NOVAS, PODS
from nova_operator.naming import Component
from nova_operator.reconcilers import stuck_pods
from nova_operator.reconcilers.claims import Claim, record_claims
from nova_operator.reconcilers.nova.context import PassContext
from nova_operator.reconcilers.priority import jobs_priority_field, missing_priority_class
from nova_operator.renderers import jobs
from nova_operator.runtime.request import Result

CONDITION: Final = conditions.DB_ARCHIVE_READY
SCHEDULED: Final = "DBArchiveScheduled"
SUSPENDED: Final = "DBArchiveSuspended"
JOB_FAILED: Final = "DBArchiveJobFailed"
SUFFIX: Final = "db-archive"
RETENTION_REDUCED: Final = "DBArchiveRetentionReduced"
CONFIG_ERROR: Final = "ConfigError"  # the spec names what cannot be rendered (a missing PriorityClass)


def _runs(ctx: PassContext, cronjob_uid: str, *, running: bool) -> list[dict[str, Any]]:
    """The CronJob's runs still running (``running``) or terminal, oldest first."""
    runs = [
        j
        for j in ctx.caches[JOBS].list(ctx.namespace, naming.labels(ctx.name, Component.DB_ARCHIVE))
        if controller_uid(j) == cronjob_uid and (job_state(j) is JobState.RUNNING) is running
    ]
    runs.sort(key=lambda j: (j["metadata"].get("creationTimestamp") or "", j["metadata"]["name"]))
    return runs


def _newest_terminal(ctx: PassContext, cronjob_uid: str) -> dict[str, Any] | None:
    runs = _runs(ctx, cronjob_uid, running=False)
    return runs[-1] if runs else None


def _stuck_run(ctx: PassContext, cronjob_uid: str) -> str:
    """ "; the running Job J: pod P cannot start: ..." for the newest running run whose pod cannot start."""
    for run in reversed(_runs(ctx, cronjob_uid, running=True)):
        stuck = pod_start.first_stuck(stuck_pods.of_owner(ctx.caches.get(PODS), run))
        if stuck is not None:
            return f"; the running Job {run['metadata']['name']}: {stuck}"
    return ""


def retention_days(cronjob: Mapping[str, Any] | None) -> int | None:
    """``RETENTION_DAYS`` of a db-archive CronJob's container (None: unset or no CronJob)."""
    template = ((((cronjob or {}).get("spec") or {}).get("jobTemplate") or {}).get("spec") or {}).get(
        "template"
    )
    for container in ((template or {}).get("spec") or {}).get("containers") or []:
        for env in container.get("env") or []:
            if env.get("name") == "RETENTION_DAYS" and str(env.get("value") or "").isdigit():
                return int(env["value"])
    return None


def retention_warning(before: int | None, after: int | None) -> str | None:
    """The upstream webhook's warning on a removed or lowered retention window (nova-crd.md §6)."""
    if before is None:
        return None
    if after is None:
        return (
            f"spec.dbArchive.retentionDays removed (was {before}): soft-deleted rows of any age are "
            "archived from now on"
        )
    if after < before:
        return (
            f"spec.dbArchive.retentionDays reduced {before} to {after}: soft-deleted rows older than "
            f"{after} days are archived from now on"
        )
    return None


async def reconcile_db_archive(ctx: PassContext) -> Result:
    settings = jobs.archive_settings(ctx.nova)
    desired = jobs.db_archive_cronjob(ctx.nova, ctx.state.config_map, checked=ctx.checked_copies)
    live = await ctx.live(CRONJOBS, desired["metadata"]["name"])
    field = jobs_priority_field(ctx.nova.spec.jobs.priority_class_name if ctx.nova.spec.jobs else None)
    if (missing := await missing_priority_class(ctx.kube, live, desired, field)) is not None:
        ctx.set(CONDITION, False, CONFIG_ERROR, missing)
        return Result(requeue_after=intervals.DEPLOYMENT_POLL)  # PriorityClasses are not watched: poll
    # no admission webhook: the warning is an event, once, when the CronJob takes the new window
    warning = retention_warning(retention_days(live), settings.retention_days) if live else None
    cronjob = await ctx.ensure(desired)
    if warning is not None:
        await ctx.emit("Warning", RETENTION_REDUCED, warning)
    newest = _newest_terminal(ctx, str(cronjob["metadata"].get("uid", "")))
    failed = newest is not None and job_state(newest) is JobState.FAILED
    if settings.suspend:
        tail = f"; the newest run {newest['metadata']['name']} failed" if failed and newest else ""
        ctx.set(CONDITION, True, SUSPENDED, f"the db-archive CronJob is suspended: nothing is archived{tail}")
    elif failed and newest is not None:
        message = (
            f"db-archive Job {newest['metadata']['name']} failed; soft-deleted rows keep accumulating "
            "until a run succeeds"
        )
        ctx.set(CONDITION, False, JOB_FAILED, message)
        await ctx.emit("Warning", JOB_FAILED, message)
    else:
        stuck = _stuck_run(ctx, str(cronjob["metadata"].get("uid", "")))  # a run whose pod cannot start
        window = f", rows older than {settings.retention_days} days" if settings.retention_days else ""
        if settings.purge_after_days is not None:
            window += f"; then purges shadow rows deleted more than {settings.purge_after_days} days ago"
        ctx.set(
            CONDITION,
            True,
            SCHEDULED,
            f"db-archive runs on schedule {settings.schedule}, "
            f"up to {settings.max_rows} rows per batch{window}{stuck}",
        )

    def record(state: JobState, seconds: float) -> None:
        result = "failed" if state is JobState.FAILED else "succeeded"
        ctx.metrics.db_archive_total.labels(ctx.name, ctx.namespace, result).inc()
        ctx.metrics.db_archive_duration.labels(ctx.name, ctx.namespace).observe(seconds)

    await record_claims(ctx, NOVAS, newest, Claim(SUFFIX, record, "DBArchiveMetricEmissionDeferred"))
    return Result()
