"""The pass helpers both controllers share, on the real API server (issue 39, item 6).

Finalizers (``reconcilers.finalizers``), the one pass finish and status write
(``reconcilers.status``) and the exactly-once Job claims (``reconcilers.claims``) act on a Nova
stored by kube-apiserver: its optimistic-lock preconditions, merge patches and status subresource
answer, not a stand-in's. Writes are counted from the client's own request metrics.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from nova_operator.decisions.readiness import JobState
from nova_operator.kube import Kube
from nova_operator.kube.errors import Conflict
from nova_operator.kube.resources import NOVAS
from nova_operator.kube.types import Object
from nova_operator.metrics import WRITE_VERBS
from nova_operator.reconcilers.claims import Claim, record_terminal_claims
from nova_operator.reconcilers.finalizers import ensure_finalizer, has_finalizer, remove_finalizer
from nova_operator.reconcilers.status import finish_pass, snapshot_status, write_status
from nova_operator.runtime.events import EventRecorder
from tests.integration.nova.inputs import events_of, nova_body

NOW = datetime(2026, 1, 1, tzinfo=UTC)
INPUTS = ("SecretsReady",)
FINALIZER = "nova.openstack.c5c3.io/finalizer"


async def stored_nova(admin: Kube, ns: str) -> Object:
    return await admin.create(NOVAS, nova_body(), ns)


async def someone_else_writes(admin: Kube, ns: str) -> None:
    """Another client changes the Nova: the copy a pass holds is stale from now on."""
    await admin.patch(NOVAS, "nova", {"metadata": {"labels": {"edited": "by-someone-else"}}}, ns)


def writes(kube: Kube) -> int:
    return kube.metrics.api_request_count(WRITE_VERBS)


def terminal_job(uid: str, condition: str = "Complete") -> Object:
    return {
        "metadata": {"uid": uid, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "status": {
            "conditions": [
                {"type": condition, "status": "True", "lastTransitionTime": "2026-01-01T00:00:42Z"}
            ]
        },
    }


async def test_a_finalizer_is_added_once_and_released(admin: Kube, namespace: str) -> None:
    obj = await stored_nova(admin, namespace)
    assert await ensure_finalizer(admin, NOVAS, obj, FINALIZER)
    before = writes(admin)
    assert not await ensure_finalizer(admin, NOVAS, obj, FINALIZER)  # present: no request at all
    assert writes(admin) == before
    live = await admin.get(NOVAS, "nova", namespace)
    assert live["metadata"]["finalizers"] == [FINALIZER]
    assert obj["metadata"]["resourceVersion"] == live["metadata"]["resourceVersion"]
    assert await remove_finalizer(admin, NOVAS, obj, FINALIZER)
    assert not has_finalizer(await admin.get(NOVAS, "nova", namespace), FINALIZER)


async def test_a_finalizer_patch_on_a_stale_copy_is_refused_by_the_server(
    admin: Kube, namespace: str
) -> None:
    obj = await stored_nova(admin, namespace)
    await someone_else_writes(admin, namespace)
    with pytest.raises(Conflict):  # the resourceVersion precondition: the pass is retried
        await ensure_finalizer(admin, NOVAS, obj, FINALIZER)
    assert not has_finalizer(await admin.get(NOVAS, "nova", namespace), FINALIZER)


async def test_the_status_is_finished_once_and_written_only_when_it_changed(
    admin: Kube, namespace: str
) -> None:
    obj = await stored_nova(admin, namespace)
    snap, status = snapshot_status(obj), snapshot_status(obj)
    assert finish_pass(status, snap, ready_inputs=INPUTS, generation=1, now=NOW)
    assert await write_status(admin, NOVAS, obj, status, snap)
    stored = (await admin.get(NOVAS, "nova", namespace))["status"]
    assert stored["observedGeneration"] == 1
    assert [(c["type"], c["status"]) for c in stored["conditions"]] == [("Ready", "False")]
    assert obj["status"] == status
    before = writes(admin)
    again, status = snapshot_status(obj), snapshot_status(obj)
    assert not finish_pass(status, again, ready_inputs=INPUTS, generation=1, now=NOW)
    assert not await write_status(admin, NOVAS, obj, status, again)
    assert writes(admin) == before  # a converged pass sends nothing


async def test_a_status_field_the_pass_removed_is_gone_from_the_server(admin: Kube, namespace: str) -> None:
    obj = await stored_nova(admin, namespace)
    snap, status = snapshot_status(obj), {"observedGeneration": 1, "upgradePhase": "Expanding"}
    assert await write_status(admin, NOVAS, obj, status, snap)
    snap, status = snapshot_status(obj), {"observedGeneration": 1}
    assert await write_status(admin, NOVAS, obj, status, snap)
    assert "upgradePhase" not in (await admin.get(NOVAS, "nova", namespace))["status"]


async def test_a_terminal_job_is_recorded_once_per_uid(admin: Kube, namespace: str) -> None:
    obj = await stored_nova(admin, namespace)
    events = EventRecorder(admin, "test")
    seen: list[tuple[JobState, float]] = []
    claim = Claim("db-sync", lambda state, seconds: seen.append((state, seconds)), "D")

    async def once(job: Object) -> bool:
        return (await record_terminal_claims(admin, NOVAS, obj, job, [claim], events))["db-sync"]

    assert await once(terminal_job("u1"))
    assert not await once(terminal_job("u1"))
    assert seen == [(JobState.COMPLETE, 42.0)]
    stored = await admin.get(NOVAS, "nova", namespace)
    assert stored["metadata"]["annotations"] == {"cobaltcore.c5c3.io/last-db-sync-job-uid": "u1"}
    assert obj["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    assert not await once({"metadata": {"uid": "u2"}, "status": {}})  # running: nothing yet
    assert await once(terminal_job("u2", "Failed"))
    assert seen[-1][0] is JobState.FAILED


async def test_the_recorders_of_one_job_claim_it_with_one_patch_and_each_records_once(
    admin: Kube, namespace: str
) -> None:
    obj = await stored_nova(admin, namespace)
    events = EventRecorder(admin, "test")
    seen: list[str] = []
    claims = [
        Claim("db-sync", lambda s, _: seen.append("metric"), "DBSyncMetricEmissionDeferred"),
        Claim("db-sync-cells", lambda s, _: seen.append("cells"), "CellsReportEmissionDeferred"),
    ]
    before = writes(admin)
    claimed = await record_terminal_claims(admin, NOVAS, obj, terminal_job("u1"), claims, events)
    assert claimed == {"db-sync": True, "db-sync-cells": True}
    assert seen == ["metric", "cells"]
    assert writes(admin) == before + 1  # one patch for both recorders
    stored = (await admin.get(NOVAS, "nova", namespace))["metadata"]
    assert stored["annotations"] == {
        "cobaltcore.c5c3.io/last-db-sync-job-uid": "u1",
        "cobaltcore.c5c3.io/last-db-sync-cells-job-uid": "u1",
    }
    before = writes(admin)
    again = await record_terminal_claims(admin, NOVAS, obj, terminal_job("u1"), claims, events)
    assert again == {"db-sync": False, "db-sync-cells": False}
    assert writes(admin) == before
    assert seen == ["metric", "cells"]


async def test_a_claim_already_stored_is_left_out_of_the_patch(admin: Kube, namespace: str) -> None:
    obj = await stored_nova(admin, namespace)
    events = EventRecorder(admin, "test")
    seen: list[str] = []
    metric = Claim("db-sync", lambda s, _: seen.append("metric"), "D1")
    cells = Claim("db-sync-cells", lambda s, _: seen.append("cells"), "D2")
    await record_terminal_claims(admin, NOVAS, obj, terminal_job("u1"), [metric], events)
    claimed = await record_terminal_claims(admin, NOVAS, obj, terminal_job("u1"), [metric, cells], events)
    assert claimed == {"db-sync": False, "db-sync-cells": True}
    assert seen == ["metric", "cells"]


async def test_a_claim_on_a_stale_copy_records_nothing_and_defers_every_recorder(
    admin: Kube, namespace: str
) -> None:
    obj = await stored_nova(admin, namespace)
    await someone_else_writes(admin, namespace)  # the server refuses the claim's precondition
    seen: list[str] = []
    claims = [
        Claim("db-sync", lambda s, _: seen.append("metric"), "DBSyncMetricEmissionDeferred"),
        Claim("db-sync-cells", lambda s, _: seen.append("cells"), "CellsReportEmissionDeferred"),
    ]
    events = EventRecorder(admin, "test")
    claimed = await record_terminal_claims(admin, NOVAS, obj, terminal_job("u1"), claims, events)
    assert claimed == {"db-sync": False, "db-sync-cells": False}
    assert seen == []
    stored = await admin.get(NOVAS, "nova", namespace)
    assert "cobaltcore.c5c3.io/last-db-sync-job-uid" not in (stored["metadata"].get("annotations") or {})
    reasons = sorted((t, r) for t, r, _ in await events_of(admin, namespace))
    assert reasons == [
        ("Warning", "CellsReportEmissionDeferred"),
        ("Warning", "DBSyncMetricEmissionDeferred"),
    ]
