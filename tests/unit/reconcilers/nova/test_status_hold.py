"""Issue 27: which of a Nova's status writes only report progress (``reconcilers.status_hold``).

Such a write is held and superseded by the Nova's next pass; Ready, errors and state fields are
written at once. The reconciler's holding and writing run on the real API server
(``tests/integration/nova/test_status_hold.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from nova_operator import conditions
from nova_operator.install import reasons
from nova_operator.reconcilers.nova import status_hold


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
