"""Step 6, ``Database`` (``DatabaseReady``): MariaDB objects, db-sync Job, cells, release (reconciler.md §5).

1. Provisioning, per managed block (``nova_api`` first, then the cell block with cell0): the
   ``MariaDB`` must be Ready (``ClusterNotReady``); then every ``Database``, ``User`` and
   ``Grant`` of the Nova is applied in the same pass, in the layers of the spec's creation order
   (the schemas, then the Users, then the Grants, each layer at once), and the step waits once
   (``WaitingForDatabase``: the Databases first, then the Users and Grants).
   The MariaDB operator orders them itself (a Grant waits for its Database and User), so
   holding a User back until its Database is Ready only adds a round trip per object. They
   are watched by owner when the cluster serves the kinds; the 30 s wait is the fallback.
2. ``WaitingForConfig`` while the Config step produced no ConfigMap.
3. ``dispatch``: the image/release lockstep check, then either the steady-state db-sync Job
   (fresh install, same release, patch bump) or the release upgrade (expand / migrate /
   contract, ``reconcilers.upgrade``), which the step list hands in as ``upgrade_flow``.
4. The db-sync Job: created with its pod-spec hash; replaced when the hash changed; a Job
   that failed with the current template is a permanent failure (error, Warning event).
   On completion: ``DatabaseSynced``, ``status.installedRelease``, and the cells report of
   the Job's pod into ``status.cells`` (once per Job UID).

Every terminal Job observed is handed to the exactly-once recorder (suffix ``db-sync``) for
``nova_operator_db_sync_total`` / ``_duration_seconds``, even when it is about to be replaced.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from nova_operator import conditions, intervals, ownership
from nova_operator.decisions import cells, pod_start, releases
from nova_operator.decisions.readiness import JobState, custom_resource_ready, job_state
from nova_operator.kube.errors import Conflict
from nova_operator.kube.owners import controller_uid, owner_reference, with_owner
from nova_operator.kube.resources import JOBS, MARIADBS, NOVAS, PODS, ref_for
from nova_operator.pipeline import all_in_order
from nova_operator.reconcilers import stuck_pods
from nova_operator.reconcilers.claims import Claim, job_uid_annotation, record_claims
from nova_operator.reconcilers.nova.context import PassContext
from nova_operator.reconcilers.priority import jobs_priority_field, missing_priority_class
from nova_operator.renderers import jobs, mariadb
from nova_operator.renderers.workload import image_ref
from nova_operator.runtime.request import Result

CONDITION: Final = conditions.DATABASE_READY
CLUSTER_NOT_READY: Final = "ClusterNotReady"
WAITING_FOR_DATABASE: Final = "WaitingForDatabase"
WAITING_FOR_CONFIG: Final = "WaitingForConfig"
IMAGE_RELEASE_MISMATCH: Final = "ImageReleaseMismatch"
DB_SYNC_IN_PROGRESS: Final = "DBSyncInProgress"
DB_SYNC_FAILED: Final = "DBSyncFailed"
DATABASE_SYNCED: Final = "DatabaseSynced"
CELLS_REPORT_UNAVAILABLE: Final = "CellsReportUnavailable"
CONFIG_ERROR: Final = "ConfigError"  # the spec names what cannot be rendered (a missing PriorityClass)

DB_SYNC: Final = "db-sync"
DB_SYNC_CELLS: Final = "db-sync-cells"


class DBSyncFailed(Exception):
    """The db-sync Job failed with the current template (the work queue backs off)."""


def _wait(ctx: PassContext, reason: str, message: str, after: float = intervals.DATABASE_WAIT) -> Result:
    ctx.set(CONDITION, False, reason, message)
    return Result(requeue_after=after)


# -- 5.1 provisioning --------------------------------------------------------------------------


def _by_block(ctx: PassContext) -> list[tuple[str, list[dict[str, Any]]]]:
    """The MariaDB objects in creation order, grouped by the MariaDB cluster they live on."""
    objects = mariadb.mariadb_objects(ctx.nova)
    spec = ctx.nova.spec
    groups: list[tuple[str, list[dict[str, Any]]]] = []
    api_name = f"{ctx.name}-api"
    for block, cluster in ((spec.api_database, "api"), (spec.database, "cell")):
        if block.cluster_ref is None:
            continue
        mine = [
            o
            for o in objects
            if (o["metadata"]["name"] == api_name) == (cluster == "api")
            and o["spec"]["mariaDbRef"]["name"] == block.cluster_ref.name
        ]
        groups.append((block.cluster_ref.name, mine))
    return groups


_LAYERS: Final = ("Database", "User", "Grant")
"""The creation order of §5.1 as layers: every schema, then the Users, then the Grants."""


async def _apply_in_layers(ctx: PassContext, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Apply ``objects`` a layer at a time, each layer's objects at once; the live objects in input order.

    No Grant is sent before the schema it names or its User has been applied (§5.1), and an object
    of one layer needs nothing of another of the same layer: three round trips instead of eight.
    What the objects are now is looked up first, all at once (``peek``: from the caches; a name
    they do not hold, as none of a new Nova's, is written create-first and read only when an object
    already holds it): a layer's writes touch no object of a later layer.
    """
    refs = [ref_for(o["apiVersion"], o["kind"]) for o in objects]
    current = await all_in_order(
        *(ctx.peek(ref, o["metadata"]["name"]) for ref, o in zip(refs, objects, strict=True))
    )
    live: dict[int, dict[str, Any]] = {}
    for layer in (*_LAYERS, None):
        indexes = [
            i
            for i, o in enumerate(objects)
            if (o["kind"] == layer if layer is not None else o["kind"] not in _LAYERS)
        ]
        sent = await all_in_order(*(ctx.ensure_over(current[i], objects[i], ref=refs[i]) for i in indexes))
        live.update(zip(indexes, sent, strict=True))
    return [live[i] for i in range(len(objects))]


async def _provision(ctx: PassContext) -> Result | None:
    """Apply every MariaDB object of the managed blocks in one pass, then wait once.

    Each block's cluster gate is read first, in block order; a block whose MariaDB is not Ready
    stops the step (``ClusterNotReady``) after the earlier blocks' objects are applied. The objects
    go out in the layers of ``_apply_in_layers`` (§5.1: no Grant before its schema or its User);
    the wait names what is not Ready yet, the Databases before the Users and Grants.
    """
    objects: list[dict[str, Any]] = []
    closed: str | None = None
    for cluster, mine in _by_block(ctx):
        server = await ctx.live(MARIADBS, cluster)
        if server is None or not custom_resource_ready(server):
            closed = cluster
            break
        objects += mine
    live = await _apply_in_layers(ctx, objects)
    if closed is not None:
        return _wait(ctx, CLUSTER_NOT_READY, f"MariaDB {ctx.namespace}/{closed} is not Ready")
    databases = [o for o in live if o["kind"] == "Database"]
    others = [o for o in live if o["kind"] != "Database"]
    for group, what in ((databases, "Database CR not ready"), (others, "User or Grant not ready")):
        pending = [f"{o['kind']} {o['metadata']['name']}" for o in group if not custom_resource_ready(o)]
        if pending:
            return _wait(ctx, WAITING_FOR_DATABASE, f"{what}: {', '.join(pending)}")
    return None


# -- 5.3 dispatch ------------------------------------------------------------------------------


def lockstep_problem(ctx: PassContext) -> str | None:
    release = ctx.nova.spec.open_stack_release
    tag = releases.image_tag(image_ref(ctx.nova))
    if releases.lockstep_mismatch(image_tag_value=tag, release=release):
        return f"image tag {tag} does not match spec.openStackRelease {release}"
    return None


UpgradeFlow = Callable[[PassContext, str, str], Awaitable[Result]]
"""The release upgrade (``reconcilers.upgrade.run_upgrade``), handed in by the step list so that
this step does not import another step module."""


async def dispatch(ctx: PassContext, upgrade_flow: UpgradeFlow) -> Result:
    status = ctx.status
    installed = str(status.get("installedRelease") or "")
    target = ctx.nova.spec.open_stack_release
    if status.get("upgradePhase"):
        if target != installed and (problem := lockstep_problem(ctx)) is not None:
            return _wait(ctx, IMAGE_RELEASE_MISMATCH, problem)
        return await upgrade_flow(ctx, installed, target)
    if (problem := lockstep_problem(ctx)) is not None:
        return _wait(ctx, IMAGE_RELEASE_MISMATCH, problem)
    if releases.needs_upgrade(installed, target):
        return await upgrade_flow(ctx, installed, target)
    return await db_sync(ctx)


# -- 5.4 / 5.6 the db-sync Job -----------------------------------------------------------------


async def run_job(
    ctx: PassContext, desired: Mapping[str, Any]
) -> tuple[JobState | None, Mapping[str, Any] | None]:
    """One pass of "run the Job": (state or None for not done, the Job observed at the start)."""
    name = desired["metadata"]["name"]
    observed = ctx.cached(JOBS, name)
    if observed is None:
        with contextlib.suppress(Conflict):  # an old Job of that name is still terminating
            await ctx.ensure(desired, ref=JOBS)
        return None, None
    # another owner's Job, or an uncontrolled one not labelled as this Nova's: left alone, reported
    ownership.refuse_unless_ours(observed, ctx.obj, ctx.marks, kind="Job")
    if controller_uid(observed) is None:  # adopt this Nova's orphan (reconciler.md §5.4 step 3)
        await ctx.kube.patch(
            JOBS,
            name,
            {"metadata": {"ownerReferences": [owner_reference(ctx.obj)]}},
            ctx.namespace,
        )
    state = job_state(observed)
    if state is JobState.RUNNING:
        return None, observed
    want = desired["metadata"]["annotations"][jobs.POD_SPEC_HASH]
    have = ((observed.get("metadata") or {}).get("annotations") or {}).get(jobs.POD_SPEC_HASH)
    if have != want:
        await ctx.kube.delete(JOBS, name, ctx.namespace, propagation="Background")
        with contextlib.suppress(Conflict):
            await ctx.kube.create(JOBS, with_owner(desired, ctx.obj), ctx.namespace)
        return None, observed
    return state, observed


def job_running(ctx: PassContext, message: str, job: Mapping[str, Any] | None) -> str:
    """``message``, naming a pod of ``job`` that cannot start (``decisions.pod_start``) if one is."""
    return pod_start.annotate(message, stuck_pods.of_owner(ctx.caches.get(PODS), job))


def _job_failure(job: Mapping[str, Any]) -> str:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Failed" and c.get("status") == "True":
            return str(c.get("message") or c.get("reason") or "failed")
    return "failed"


def _metric_claim(ctx: PassContext, suffix: str) -> Claim:
    """``nova_operator_db_sync_total`` / ``_duration_seconds`` for a terminal migration Job (§14.2)."""

    def record(state: JobState, seconds: float) -> None:
        result = "failed" if state is JobState.FAILED else "succeeded"
        ctx.metrics.db_sync_total.labels(ctx.name, ctx.namespace, result).inc()
        ctx.metrics.db_sync_duration.labels(ctx.name, ctx.namespace).observe(seconds)

    return Claim(suffix, record, "DBSyncMetricEmissionDeferred")


async def record_job_metrics(ctx: PassContext, job: Mapping[str, Any] | None, suffix: str = DB_SYNC) -> None:
    """The metrics once per terminal Job UID (§14.2): the db-sync Job and the three upgrade phase Jobs
    (``suffix`` names which)."""
    await record_claims(ctx, NOVAS, job, _metric_claim(ctx, suffix))


_UNREADABLE: set[str] = set()
"""db-sync Job UIDs whose cells report this process found unreadable (not read again here)."""


def _cells_claim(ctx: PassContext, job: Mapping[str, Any]) -> Claim:
    """``status.cells`` from the termination message of the completed Job's pod (§5.5)."""
    uid = str((job.get("metadata") or {}).get("uid") or "")

    async def record(state: JobState, seconds: float) -> None:
        name = job["metadata"]["name"]
        # A failed lookup (the API server restarting, a timeout) is no verdict on the report: it ends
        # the pass, and the next one reads the report again (claimed, status.cells still empty).
        listed = await ctx.kube.list(
            PODS, ctx.namespace, label_selector=f"batch.kubernetes.io/job-name={name}"
        )
        pod = cells.report_pod(list(listed.get("items") or []))
        found = cells.parse_cells_report(cells.termination_message(pod) if pod is not None else None)
        if not found:
            _UNREADABLE.add(uid)
            await ctx.emit(
                "Normal",
                CELLS_REPORT_UNAVAILABLE,
                f"Job {name} left no readable cell report; status.cells left unchanged",
            )
            return
        ctx.status["cells"] = found

    return Claim(DB_SYNC_CELLS, record, "CellsReportEmissionDeferred")


async def _record_completed(ctx: PassContext, job: Mapping[str, Any]) -> None:
    """A completed db-sync Job: its metric and its cells report, each once per Job UID, one claim patch.

    The cells report is read again when the Job's UID is claimed but ``status.cells`` is empty and the
    report was not found unreadable here: the pass that claimed it never wrote its status (a crash, a
    failed write).
    """
    uid = str((job.get("metadata") or {}).get("uid") or "")
    cells_claim = _cells_claim(ctx, job)
    claimed = await record_claims(ctx, NOVAS, job, _metric_claim(ctx, DB_SYNC), cells_claim)
    annotations = ctx.obj["metadata"].get("annotations") or {}
    if (
        not claimed[DB_SYNC_CELLS]
        and uid
        and uid not in _UNREADABLE
        and not ctx.status.get("cells")
        and annotations.get(job_uid_annotation(DB_SYNC_CELLS)) == uid
    ):
        # Claimed, but the cells never reached the status (the process was killed between the
        # dedupe patch and the status write, or that write failed): read the report again.
        outcome = cells_claim.record(job_state(job), 0.0)
        if outcome is not None:
            await outcome


async def db_sync(ctx: PassContext) -> Result:
    desired = jobs.db_sync_job(ctx.nova, ctx.state.config_map, checked=ctx.checked_copies)
    if ctx.cached(JOBS, desired["metadata"]["name"]) is None:  # about to create it: its class must exist
        field = jobs_priority_field(ctx.nova.spec.jobs.priority_class_name if ctx.nova.spec.jobs else None)
        if (missing := await missing_priority_class(ctx.kube, None, desired, field)) is not None:
            return _wait(ctx, CONFIG_ERROR, missing, after=intervals.DEPLOYMENT_POLL)
    state, observed = await run_job(ctx, desired)
    if state is JobState.COMPLETE and observed is not None:
        await _record_completed(ctx, observed)  # the metric and the cells report: one claim patch
    else:
        await record_job_metrics(ctx, observed)
    if state is None:
        return _wait(ctx, DB_SYNC_IN_PROGRESS, job_running(ctx, "db_sync job is running", observed))
    assert observed is not None
    if state is JobState.FAILED:
        message = f"db_sync job failed: {_job_failure(observed)}"
        ctx.set(CONDITION, False, DB_SYNC_FAILED, message)
        await ctx.emit("Warning", DB_SYNC_FAILED, message)
        raise DBSyncFailed(message)
    previous = ctx.condition(CONDITION)
    transitioned = previous is None or previous.get("status") != "True"
    ctx.set(CONDITION, True, DATABASE_SYNCED, "schema is up to date")
    ctx.status["installedRelease"] = ctx.nova.spec.open_stack_release
    if transitioned:  # choice (§5.4): on the transition only, so a converged pass writes nothing
        await ctx.emit("Normal", DATABASE_SYNCED, "schema is up to date")
    return Result()


async def reconcile_database(ctx: PassContext, *, upgrade_flow: UpgradeFlow) -> Result:
    if (waiting := await _provision(ctx)) is not None:
        return waiting
    if not ctx.state.config_map:
        return _wait(ctx, WAITING_FOR_CONFIG, "waiting for the config ConfigMap")
    return await dispatch(ctx, upgrade_flow)
