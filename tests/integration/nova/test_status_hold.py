"""Issue 27 on the real API server: a Nova's progress-only status write is held and superseded by
its next pass; Ready and a failed pass's report are written at once.

``NovaReconciler._report`` runs over a Nova stored by kube-apiserver; the held writes follow a
``FakeClock`` the test advances, and the status patches are recorded by a wrapper around the real
client (``Recorder``) with the server's answers.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from nova_operator import conditions
from nova_operator.clock import FakeClock
from nova_operator.kube import Kube
from nova_operator.kube.resources import NOVAS
from nova_operator.kube.types import Object
from nova_operator.metrics import WRITE_VERBS
from nova_operator.reconcilers.nova.reconciler import NovaReconciler
from nova_operator.runtime.held import HeldWrites
from nova_operator.runtime.request import Request
from tests.integration.nova.passes import NOW, Emitted, stored_nova
from tests.integration.nova.requests import Recorder


def cond(kind: str, status: bool, reason: str, message: str = "") -> dict[str, Any]:
    """A condition as a step sets it (the CRD requires lastTransitionTime)."""
    return {
        "type": kind,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2025-12-31T00:00:00Z",
    }


def status(*conds: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"conditions": list(conds), **fields}


SECRETS_OK = cond(conditions.SECRETS_READY, True, "SecretsAvailable")
NOT_READY = cond(conditions.READY, False, "NotAllReady")
WAIT_DB = cond(conditions.DATABASE_READY, False, "WaitingForDatabase")
SYNCING = cond(conditions.DATABASE_READY, False, "DBSyncInProgress")


def reconciler(kube: Kube, clock: FakeClock) -> NovaReconciler:
    rec = NovaReconciler(kube, {}, events=Emitted(), now=lambda: NOW)
    rec.held = HeldWrites(hold=1.0, longest=10.0, clock=clock)
    return rec


NOVA_RESOURCE = f"{NOVAS.plural}.{NOVAS.group}"  # the client's resource label of a Nova request
STATUS_WRITE = ("patch", f"{NOVA_RESOURCE}/status")


def written(kube: Recorder) -> list[tuple[str, str]]:
    """(verb, resource) of every write request sent."""
    return [(v, r) for v, r, _, _ in kube.calls if v in WRITE_VERBS]


async def settle() -> None:
    """A few turns of the loop: a write the clock made due has been sent (it is recorded when sent)."""
    for _ in range(5):
        await asyncio.sleep(0)


async def with_status(admin: Kube, ns: str, st: dict[str, Any]) -> Object:
    """The stored Nova with ``st`` written to its status (as an earlier pass left it)."""
    await stored_nova(admin, ns)
    stamped = copy.deepcopy(st)
    for c in stamped["conditions"]:
        c["observedGeneration"] = 1
    return await admin.patch_status(NOVAS, "nova", {"status": stamped}, ns)


async def test_a_progress_report_is_held_then_written_when_no_pass_comes(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    clock = FakeClock()
    rec = reconciler(ours, clock)
    obj = await stored_nova(admin, namespace)
    await rec._report(obj, status(SECRETS_OK, WAIT_DB), {}, 1, held=True)
    await settle()
    assert written(ours) == []
    clock.advance(1.0)
    await settle()
    assert written(ours) == [STATUS_WRITE]
    assert rec.held is not None
    assert not await rec.held.take(Request(namespace, "nova"))  # being sent: waited for, not dropped
    assert ours.calls[-1][3] == "200"
    stored = (await admin.get(NOVAS, "nova", namespace))["status"]["conditions"]
    assert (conditions.find(stored, conditions.DATABASE_READY) or {}).get("reason") == "WaitingForDatabase"
    assert (conditions.find(stored, conditions.READY) or {}).get("status") == "False"


async def test_the_next_pass_drops_the_held_report(admin: Kube, ours: Recorder, namespace: str) -> None:
    clock = FakeClock()
    rec = reconciler(ours, clock)
    obj = await stored_nova(admin, namespace)
    await rec._report(obj, status(SECRETS_OK, WAIT_DB), {}, 1, held=True)
    await admin.delete(NOVAS, "nova", namespace)  # the next pass finds the Nova gone: nothing to run
    await rec.reconcile(Request(namespace, "nova"))
    clock.advance(5.0)
    await settle()
    assert written(ours) == []
    assert [(v, r) for v, r, _, _ in ours.calls] == [("get", NOVA_RESOURCE)]  # the pass's read, answered 404
    assert ours.calls[0][3] == "404"


@pytest.mark.parametrize("error", [False, True])
async def test_ready_and_a_failed_pass_are_written_at_once(
    admin: Kube, ours: Recorder, namespace: str, error: bool
) -> None:
    clock = FakeClock()
    rec = reconciler(ours, clock)
    before = status(SECRETS_OK, WAIT_DB, NOT_READY, observedGeneration=1)
    obj = await with_status(admin, namespace, before)
    snapshot = copy.deepcopy(obj["status"])
    after = (
        status(SECRETS_OK, SYNCING)  # progress, but the pass raised
        if error
        else status(*[cond(t, True, "Ok") for t in conditions.NOVA_READY_INPUTS])
    )
    await rec._report(obj, after, snapshot, 1, held=not error)
    assert written(ours) == [STATUS_WRITE]
    assert ours.calls[-1][3] == "200"  # sent and answered before _report returned
    assert len(rec.held or []) == 0
    stored = (await admin.get(NOVAS, "nova", namespace))["status"]["conditions"]
    assert (conditions.find(stored, conditions.READY) or {}).get("status") == ("False" if error else "True")
