"""The DBArchive step (``DBArchiveReady``) on the real API server: a suspended CronJob, and the
upstream webhook's warning on a lowered or removed retention window, as an event once; a running
archive Job whose pod cannot start, named.
"""

from __future__ import annotations

from nova_operator import conditions
from nova_operator.kube import Kube
from nova_operator.kube.resources import (
    CRONJOBS,
    JOBS,
    NOVAS,
    PODS,
)
from nova_operator.reconcilers.nova import (
    db_archive,
)
from nova_operator.runtime.cache import Cache
from tests.integration.nova.passes import Emitted, make_ctx, stored_nova
from tests.integration.nova.reasons_kit import (
    reason,
    with_config,
)
from tests.integration.nova.requests import Recorder
from tests.integration.stuck_pod import SECRET, owner_of, stuck_pod


async def test_a_suspended_archive_is_db_archive_suspended(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    ctx = await with_config(make_ctx(ours, await stored_nova(admin, namespace, dbArchive={"suspend": True})))
    assert (await db_archive.reconcile_db_archive(ctx)).requeue_after is None
    status, why, message = reason(ctx, conditions.DB_ARCHIVE_READY)
    assert (status, why) == ("True", "DBArchiveSuspended")
    assert "suspended" in message
    stored_cronjob = await admin.get(CRONJOBS, "nova-db-archive", namespace)
    assert stored_cronjob["spec"]["suspend"] is True


async def archive_pass(
    admin: Kube, ours: Recorder, namespace: str, events: Emitted, retention: int | None
) -> None:
    """The user sets (or removes) the retention window; a pass of the archive step follows."""
    window = {"dbArchive": {"retentionDays": retention} if retention is not None else None}
    nova = await admin.patch(NOVAS, "nova", {"spec": window}, namespace)
    cronjobs = Cache(str(CRONJOBS))
    for obj in (await admin.list(CRONJOBS, namespace))["items"]:
        cronjobs.upsert(obj)
    ctx = await with_config(make_ctx(ours, nova, events=events, caches={CRONJOBS: cronjobs}))
    await db_archive.reconcile_db_archive(ctx)


async def test_a_lowered_or_removed_retention_window_is_warned_once(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    await stored_nova(admin, namespace)
    events = Emitted()
    for retention in (30, 30, 60):  # raised: no warning
        await archive_pass(admin, ours, namespace, events, retention)
    assert [e for e in events.emitted if e[1] == "DBArchiveRetentionReduced"] == []
    for retention in (7, 7, None):  # the same window again: no second event
        await archive_pass(admin, ours, namespace, events, retention)
    warned = [(t, m) for t, r, m in events.emitted if r == "DBArchiveRetentionReduced"]
    assert warned == [
        (
            "Warning",
            "spec.dbArchive.retentionDays reduced 60 to 7: soft-deleted rows older than 7 days are archived "
            "from now on",
        ),
        (
            "Warning",
            "spec.dbArchive.retentionDays removed (was 7): soft-deleted rows of any age are archived "
            "from now on",
        ),
    ]


async def test_a_running_archive_job_whose_pod_cannot_start_is_named(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    """Issue 37 item 5: the CronJob's newest running Job, its pod stuck, is named in the message."""
    nova = await stored_nova(admin, namespace)
    ctx = await with_config(make_ctx(ours, nova))
    await db_archive.reconcile_db_archive(ctx)
    scheduled = reason(ctx, conditions.DB_ARCHIVE_READY)
    cronjob = await admin.get(CRONJOBS, "nova-db-archive", namespace)
    template = cronjob["spec"]["jobTemplate"]
    run = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "nova-db-archive-29400000",
            "labels": template["metadata"]["labels"],
            "ownerReferences": [{**owner_of(cronjob), "controller": True}],
        },
        "spec": template["spec"],
    }
    job = await admin.create(JOBS, run, namespace)
    image = template["spec"]["template"]["spec"]["containers"][0]["image"]
    pod_labels = template["spec"]["template"]["metadata"]["labels"]
    await stuck_pod(
        admin,
        namespace,
        "nova-db-archive-29400000-q8v4c",
        labels=pod_labels,
        owner=owner_of(job),
        reason="ErrImagePull",
        image=image,
    )
    caches = {}
    for ref in (CRONJOBS, JOBS, PODS):
        caches[ref] = Cache(str(ref))
        for obj in (await admin.list(ref, namespace))["items"]:
            caches[ref].upsert(obj)
    ctx = await with_config(make_ctx(ours, nova, caches=caches))
    await db_archive.reconcile_db_archive(ctx)
    status, why, message = reason(ctx, conditions.DB_ARCHIVE_READY)
    assert (status, why) == ("True", "DBArchiveScheduled")  # the spec's reason: a run is not a failure
    assert message == (
        f"{scheduled[2]}; the running Job nova-db-archive-29400000: pod nova-db-archive-29400000-q8v4c "
        f"cannot start: ErrImagePull (image {image})"
    )
    assert SECRET not in message
