"""The DBArchive step (``DBArchiveReady``) on the real API server: a suspended CronJob, and the
upstream webhook's warning on a lowered or removed retention window, as an event once.
"""

from __future__ import annotations

from nova_operator import conditions
from nova_operator.kube import Kube
from nova_operator.kube.resources import (
    CRONJOBS,
    NOVAS,
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
