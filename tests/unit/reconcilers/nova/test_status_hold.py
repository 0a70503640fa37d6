"""Issue 27: a Nova's progress-only status writes are held and superseded by its next pass
(``reconcilers.status_hold``, ``runtime.held``); Ready, errors and state fields are written at once."""

from __future__ import annotations

import asyncio
import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from nova_operator import conditions
from nova_operator.clock import FakeClock
from nova_operator.install import reasons
from nova_operator.kube.resources import NOVAS
from nova_operator.reconcilers.nova import status_hold
from nova_operator.reconcilers.nova.reconciler import NovaReconciler
from nova_operator.runtime.held import HeldWrites
from nova_operator.runtime.request import Request
from tests.unit.reconcilers.fakes import FakeEvents, FakeKube

NS = "ns"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def cond(kind: str, status: bool, reason: str, message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": "True" if status else "False", "reason": reason, "message": message}


def status(*conds: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"conditions": list(conds), **fields}


SECRETS_OK = cond(conditions.SECRETS_READY, True, "SecretsAvailable")
NOT_READY = cond(conditions.READY, False, "NotAllReady")
WAIT_DB = cond(conditions.DATABASE_READY, False, "WaitingForDatabase")
SYNCING = cond(conditions.DATABASE_READY, False, "DBSyncInProgress")


def test_every_progress_reason_is_a_nova_false_reason() -> None:
    known = {r.reason for r in reasons.NOVA if r.status == "False"}
    assert known >= status_hold.PROGRESS


def test_a_new_novas_first_report_and_a_wait_moving_on_are_progress() -> None:
    assert status_hold.progress_only({}, status(SECRETS_OK, WAIT_DB, NOT_READY, observedGeneration=1))
    before = status(SECRETS_OK, WAIT_DB, NOT_READY, observedGeneration=1)
    assert status_hold.progress_only(before, status(SECRETS_OK, SYNCING, NOT_READY, observedGeneration=1))
    # routes written, not accepted yet; the API's endpoint reported
    route = cond(conditions.HTTP_ROUTE_READY, False, "HTTPRouteNotAccepted")
    api = cond(conditions.DEPLOYMENT_READY, True, "DeploymentReady")
    assert status_hold.progress_only(
        before, status(SECRETS_OK, WAIT_DB, api, route, NOT_READY, endpoint="http://x")
    )


@pytest.mark.parametrize(
    ("before", "after"),
    [
        # turning Ready, and losing Ready
        (status(SECRETS_OK, NOT_READY), status(SECRETS_OK, cond(conditions.READY, True, "AllReady"))),
        (
            status(SECRETS_OK, cond(conditions.READY, True, "AllReady")),
            status(SECRETS_OK, WAIT_DB, NOT_READY),
        ),
        # an error or a user's gate
        (
            status(SECRETS_OK, NOT_READY),
            status(SECRETS_OK, cond(conditions.DATABASE_READY, False, "DBSyncFailed"), NOT_READY),
        ),
        (
            status(NOT_READY),
            status(cond(conditions.SECRETS_READY, False, "WaitingForDBCredentials"), NOT_READY),
        ),
        # DatabaseSynced is announced on the transition as persisted
        (
            status(SYNCING, NOT_READY),
            status(cond(conditions.DATABASE_READY, True, "DatabaseSynced"), NOT_READY),
        ),
        # state the next pass reads back
        (status(SYNCING, NOT_READY), status(SYNCING, NOT_READY, installedRelease="2025.2")),
        (status(SYNCING, NOT_READY), status(SYNCING, NOT_READY, upgradePhase="Expanding")),
        # a condition removed
        (status(SECRETS_OK, SYNCING, NOT_READY), status(SECRETS_OK, NOT_READY)),
    ],
)
def test_what_is_written_at_once(before: dict[str, Any], after: dict[str, Any]) -> None:
    assert not status_hold.progress_only(before, after)


def nova(st: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": NOVAS.api_version,
        "kind": "Nova",
        "metadata": {"name": "nova", "namespace": NS, "uid": "u", "generation": 1, "resourceVersion": "5"},
        "spec": {},
        **({"status": st} if st is not None else {}),
    }


def reconciler(clock: FakeClock) -> tuple[NovaReconciler, FakeKube]:
    kube = FakeKube()
    rec = NovaReconciler(kube, {}, events=FakeEvents(), now=lambda: NOW)  # type: ignore[arg-type]
    rec.held = HeldWrites(hold=1.0, longest=10.0, clock=clock)
    return rec, kube


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_progress_report_is_held_then_written_when_no_pass_comes() -> None:
    clock = FakeClock()
    rec, kube = reconciler(clock)
    obj = kube.put(NOVAS, nova())
    await rec._report(obj, status(SECRETS_OK, WAIT_DB), {}, 1, held=True)
    assert kube.writes() == []
    clock.advance(1.0)
    await settle()
    assert kube.writes() == [("patch/status", str(NOVAS), "nova")]
    written = kube.store[(str(NOVAS), NS, "nova")]["status"]
    assert conditions.find(written["conditions"], conditions.DATABASE_READY)["reason"] == "WaitingForDatabase"
    assert conditions.find(written["conditions"], conditions.READY)["status"] == "False"


async def test_the_next_pass_drops_the_held_report() -> None:
    clock = FakeClock()
    rec, kube = reconciler(clock)
    obj = kube.put(NOVAS, nova())
    await rec._report(obj, status(SECRETS_OK, WAIT_DB), {}, 1, held=True)
    del kube.store[(str(NOVAS), NS, "nova")]  # the next pass finds the Nova gone: nothing to run
    await rec.reconcile(Request(NS, "nova"))
    clock.advance(5.0)
    await settle()
    assert kube.writes() == []


@pytest.mark.parametrize("error", [False, True])
async def test_ready_and_a_failed_pass_are_written_at_once(error: bool) -> None:
    clock = FakeClock()
    rec, kube = reconciler(clock)
    before = status(SECRETS_OK, WAIT_DB, NOT_READY, observedGeneration=1)
    obj = kube.put(NOVAS, nova(copy.deepcopy(before)))
    after = (
        status(SECRETS_OK, SYNCING)  # progress, but the pass raised
        if error
        else status(*[cond(t, True, "Ok") for t in conditions.NOVA_READY_INPUTS])
    )
    await rec._report(obj, after, before, 1, held=not error)
    assert kube.writes() == [("patch/status", str(NOVAS), "nova")]
    assert len(rec.held or []) == 0
