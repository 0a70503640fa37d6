"""Events land on the reconciled object and identical ones are folded into one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from simcluster import ControlPlane

from nova_operator.kube.client import Kube
from nova_operator.kube.resources import CONFIGMAPS, EVENTS
from nova_operator.runtime.events import EventRecorder

pytestmark = pytest.mark.integration


@pytest.fixture
async def kube(control_plane: ControlPlane) -> AsyncIterator[Kube]:
    async with await Kube.connect(kubeconfig=str(control_plane.kubeconfig), context="admin") as k:
        yield k


async def test_identical_events_fold_into_one_with_a_count(kube: Kube, namespace: str) -> None:
    obj = await kube.create(
        CONFIGMAPS, {"metadata": {"name": "subject", "namespace": namespace}, "data": {}}, namespace
    )
    clock = [datetime(2026, 11, 29, 10, 0, tzinfo=UTC)]
    rec = EventRecorder(kube, "nova-controller", now=lambda: clock[0])

    await rec.emit(obj, "Normal", "DatabaseSynced", "schema is up to date")
    clock[0] += timedelta(minutes=1)
    await rec.emit(obj, "Normal", "DatabaseSynced", "schema is up to date")
    await rec.emit(obj, "Warning", "DBSyncFailed", "db_sync job failed: BackoffLimitExceeded")

    items = (await kube.list(EVENTS, namespace))["items"]
    by_reason = {e["reason"]: e for e in items}
    assert sorted(by_reason) == ["DBSyncFailed", "DatabaseSynced"]
    synced = by_reason["DatabaseSynced"]
    assert synced["count"] == 2
    assert (synced["firstTimestamp"], synced["lastTimestamp"]) == (
        "2026-11-29T10:00:00Z",
        "2026-11-29T10:01:00Z",
    )
    assert synced["involvedObject"]["uid"] == obj["metadata"]["uid"]
    assert synced["involvedObject"]["kind"] == "ConfigMap"
    assert synced["source"]["component"] == "nova-controller"
    assert by_reason["DBSyncFailed"]["type"] == "Warning"


async def test_an_expired_event_is_recreated_and_errors_never_raise(kube: Kube, namespace: str) -> None:
    obj = await kube.create(
        CONFIGMAPS, {"metadata": {"name": "subject", "namespace": namespace}, "data": {}}, namespace
    )
    rec = EventRecorder(kube, "nova-controller")
    await rec.emit(obj, "Normal", "R", "m")
    (only,) = (await kube.list(EVENTS, namespace))["items"]
    await kube.delete(EVENTS, only["metadata"]["name"], namespace)
    await rec.emit(obj, "Normal", "R", "m")
    (again,) = (await kube.list(EVENTS, namespace))["items"]
    assert again["count"] == 1

    missing_ns = {**obj, "metadata": {**obj["metadata"], "namespace": "does-not-exist"}}
    await rec.emit(missing_ns, "Warning", "R", "m")  # logged, not raised
