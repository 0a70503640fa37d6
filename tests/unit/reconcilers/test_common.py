"""The generic pass helpers: finalizer, status write skipped when unchanged, exactly-once Job recording."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from nova_operator.decisions.readiness import JobState
from nova_operator.kube.resources import NOVAS
from nova_operator.reconcilers.claims import Claim, record_terminal_claims
from nova_operator.reconcilers.finalizers import ensure_finalizer, remove_finalizer
from nova_operator.reconcilers.status import (
    finish_pass,
    keep_transition_times,
    snapshot_status,
    status_patch,
    write_status,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
INPUTS = ("SecretsReady",)


def _cr(kube: Any) -> Any:
    return kube.put(
        NOVAS,
        {
            "apiVersion": NOVAS.api_version,
            "kind": "Nova",
            "metadata": {"name": "n", "namespace": "ns", "generation": 2},
        },
    )


def _job(uid: str, cond: str = "Complete") -> dict[str, Any]:
    return {
        "metadata": {"uid": uid, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "status": {
            "conditions": [{"type": cond, "status": "True", "lastTransitionTime": "2026-01-01T00:00:42Z"}]
        },
    }


async def test_a_finalizer_is_added_once_and_released(kube: Any) -> None:
    obj = _cr(kube)
    assert await ensure_finalizer(kube, NOVAS, obj, "f")
    assert not await ensure_finalizer(kube, NOVAS, obj, "f")
    assert (await kube.get(NOVAS, "n", "ns"))["metadata"]["finalizers"] == ["f"]
    assert await remove_finalizer(kube, NOVAS, obj, "f")
    assert (await kube.get(NOVAS, "n", "ns"))["metadata"]["finalizers"] == []


async def test_status_is_written_only_when_it_changed(kube: Any) -> None:
    obj = _cr(kube)
    snap = snapshot_status(obj)
    status = snapshot_status(obj)
    assert finish_pass(status, snap, ready_inputs=INPUTS, generation=2, now=NOW)
    assert await write_status(kube, NOVAS, obj, status, snap)
    stored = (await kube.get(NOVAS, "n", "ns"))["status"]
    assert stored["observedGeneration"] == 2
    assert stored["conditions"][0]["type"] == "Ready"
    assert stored["conditions"][0]["status"] == "False"
    kube.calls.clear()
    again, status = snapshot_status(obj), snapshot_status(obj)
    assert not finish_pass(status, again, ready_inputs=INPUTS, generation=2, now=NOW)
    assert not await write_status(kube, NOVAS, obj, status, again)
    assert kube.writes() == []


def test_a_removed_status_field_is_sent_as_null() -> None:
    assert status_patch({"a": 1, "b": 2}, {"a": 1}) == {"b": None}


async def _record_once(
    kube: Any, obj: Any, job: Any, *, suffix: str, record: Any, events: Any, deferral_reason: str
) -> bool:
    """One claim of a terminal Job: whether it recorded now."""
    claim = Claim(suffix, record, deferral_reason)
    return (await record_terminal_claims(kube, NOVAS, obj, job, [claim], events))[suffix]


async def test_a_terminal_job_is_recorded_once_per_uid(kube: Any, events: Any) -> None:
    obj = _cr(kube)
    seen: list[tuple[JobState, float]] = []

    def record(state: JobState, seconds: float) -> None:
        seen.append((state, seconds))

    kw: dict[str, Any] = {"suffix": "db-sync", "record": record, "events": events, "deferral_reason": "D"}
    assert await _record_once(kube, obj, _job("u1"), **kw)
    assert not await _record_once(kube, obj, _job("u1"), **kw)
    assert seen == [(JobState.COMPLETE, 42.0)]
    stored = await kube.get(NOVAS, "n", "ns")
    assert stored["metadata"]["annotations"] == {"cobaltcore.c5c3.io/last-db-sync-job-uid": "u1"}
    assert obj["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    running = {"metadata": {"uid": "u2"}, "status": {}}
    assert not await _record_once(kube, obj, running, **kw)
    assert await _record_once(kube, obj, _job("u2", "Failed"), **kw)
    assert seen[-1][0] is JobState.FAILED


async def test_a_stale_resource_version_defers_the_recording(kube: Any, events: Any) -> None:
    obj = _cr(kube)
    kube.put(NOVAS, {**obj, "spec": {"changed": True}})  # someone else wrote: obj is stale now
    seen: list[JobState] = []
    ok = await _record_once(
        kube,
        obj,
        _job("u1"),
        suffix="db-archive",
        record=lambda s, _: seen.append(s),
        events=events,
        deferral_reason="DBArchiveMetricEmissionDeferred",
    )
    assert not ok
    assert seen == []
    assert events.emitted[0][:2] == ("Warning", "DBArchiveMetricEmissionDeferred")


async def test_the_recorders_of_one_job_claim_it_with_one_patch_and_each_records_once(
    kube: Any, events: Any
) -> None:
    obj = _cr(kube)
    seen: list[str] = []
    claims = [
        Claim("db-sync", lambda s, _: seen.append("metric"), "DBSyncMetricEmissionDeferred"),
        Claim("db-sync-cells", lambda s, _: seen.append("cells"), "CellsReportEmissionDeferred"),
    ]
    kube.calls.clear()
    claimed = await record_terminal_claims(kube, NOVAS, obj, _job("u1"), claims, events)
    assert claimed == {"db-sync": True, "db-sync-cells": True}
    assert seen == ["metric", "cells"]
    assert [c for c in kube.calls if c[0] == "patch"] == [("patch", str(NOVAS), "n")]
    stored = (await kube.get(NOVAS, "n", "ns"))["metadata"]
    assert stored["annotations"] == {
        "cobaltcore.c5c3.io/last-db-sync-job-uid": "u1",
        "cobaltcore.c5c3.io/last-db-sync-cells-job-uid": "u1",
    }
    assert obj["metadata"]["resourceVersion"] == stored["resourceVersion"]
    kube.calls.clear()
    again = await record_terminal_claims(kube, NOVAS, obj, _job("u1"), claims, events)
    assert again == {"db-sync": False, "db-sync-cells": False}
    assert kube.writes() == []
    assert seen == ["metric", "cells"]


async def test_a_claim_already_stored_is_left_out_of_the_patch(kube: Any, events: Any) -> None:
    obj = _cr(kube)
    seen: list[str] = []
    metric = Claim("db-sync", lambda s, _: seen.append("metric"), "D1")
    cells = Claim("db-sync-cells", lambda s, _: seen.append("cells"), "D2")
    await record_terminal_claims(kube, NOVAS, obj, _job("u1"), [metric], events)
    claimed = await record_terminal_claims(kube, NOVAS, obj, _job("u1"), [metric, cells], events)
    assert claimed == {"db-sync": False, "db-sync-cells": True}
    assert seen == ["metric", "cells"]


async def test_a_failed_claim_patch_records_nothing_and_defers_every_recorder(kube: Any, events: Any) -> None:
    obj = _cr(kube)
    kube.put(NOVAS, {**obj, "spec": {"changed": True}})  # obj is stale: the precondition fails
    seen: list[str] = []
    claims = [
        Claim("db-sync", lambda s, _: seen.append("metric"), "DBSyncMetricEmissionDeferred"),
        Claim("db-sync-cells", lambda s, _: seen.append("cells"), "CellsReportEmissionDeferred"),
    ]
    claimed = await record_terminal_claims(kube, NOVAS, obj, _job("u1"), claims, events)
    assert claimed == {"db-sync": False, "db-sync-cells": False}
    assert seen == []
    assert [e[:2] for e in events.emitted] == [
        ("Warning", "DBSyncMetricEmissionDeferred"),
        ("Warning", "CellsReportEmissionDeferred"),
    ]


def test_a_condition_that_flips_and_flips_back_within_a_pass_keeps_its_transition_time() -> None:
    old = {"type": "SecretsReady", "status": "False", "lastTransitionTime": "2025-01-01T00:00:00Z"}
    snapshot = {"conditions": [old]}
    status = {"conditions": [{**old, "lastTransitionTime": "2026-01-01T00:00:00Z", "message": "new"}]}
    keep_transition_times(status, snapshot)
    assert status["conditions"][0]["lastTransitionTime"] == "2025-01-01T00:00:00Z"
    flipped = {"conditions": [{**old, "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    keep_transition_times(flipped, snapshot)
    assert flipped["conditions"][0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
