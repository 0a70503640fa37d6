"""Service rows of pods that are gone, with the real nova: a replaced scheduler pod registers a row
under its own name; the old pod's row turns ``down`` once nova stops hearing from it, and the
operator deletes it, leaving exactly the live pods' rows (and every nova-compute row)."""

from __future__ import annotations

import time

import pytest
from simcluster import SimHandle

from nova_operator import intervals
from tests.realnova.realcluster import GROUP, NAMESPACE, NOVA, OpenStackClient, compute_url, pods, wait_for

pytestmark = pytest.mark.realnova

SERVICE_DOWN_TIME = 60  # nova's default: a row is down this long after its last heartbeat
LOOK_INTERVAL = intervals.SERVICE_RECORDS_WAIT  # the ServiceRecords step's look while such a row is up


def _live(handle: SimHandle, role: str) -> set[str]:
    selector = f"app.kubernetes.io/instance={NOVA},app.kubernetes.io/component={role}"
    return {
        p["metadata"]["name"]
        for p in pods(handle, selector=selector)
        if not p["metadata"].get("deletionTimestamp")
    }


def _records_condition(handle: SimHandle) -> dict[str, str]:
    """The Nova's ``ServiceRecordsHealthy`` condition (what a failure message shows)."""
    nova = handle.cluster.kube.get(f"{GROUP}/namespaces/{NAMESPACE}/novas/{NOVA}")
    found = [c for c in nova["status"].get("conditions", []) if c["type"] == "ServiceRecordsHealthy"]
    return dict(found[0]) if found else {}


def test_a_replaced_schedulers_row_is_deleted_once_down_and_live_rows_stay(minimal: SimHandle) -> None:
    client = OpenStackClient(minimal, compute_url(minimal, NOVA))
    kube = minimal.cluster.kube
    (old,) = _live(minimal, "scheduler")
    computes_before = {s["id"] for s in client.services() if s["binary"] == "nova-compute"}
    grace = kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{old}")["spec"]["terminationGracePeriodSeconds"]
    deleted_at = time.monotonic()
    kube.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{old}")

    def replaced() -> str | None:
        live = _live(minimal, "scheduler") - {old}
        rows = {s["host"] for s in client.services() if s["binary"] == "nova-scheduler"}
        return next(iter(live & rows), None)

    new = wait_for(replaced, within=180, what="the new scheduler pod's own service row", handle=minimal)
    # The old pod's processes may heartbeat for its whole grace period (from 2026.1 a stopping
    # nova-scheduler first sleeps [DEFAULT] manager_shutdown_timeout, 160 s unless set); its row is
    # down service_down_time (60 s) after the last heartbeat, and the operator looks every 30 s
    # while a row is still up.
    deadline = deleted_at + grace + SERVICE_DOWN_TIME + 2 * LOOK_INTERVAL + 30
    while time.monotonic() < deadline:
        rows = {s["host"]: s for s in client.services() if s["binary"] == "nova-scheduler"}
        if old in rows:
            assert rows[new]["state"] == "up", rows  # a live row is never the one that goes
        else:
            break
        time.sleep(3)
    rows = {s["host"]: s for s in client.services() if s["binary"] == "nova-scheduler"}
    assert set(rows) == {new}, (rows, _records_condition(minimal))
    assert {s["id"] for s in client.services() if s["binary"] == "nova-compute"} == computes_before
    reasons = [
        e
        for e in kube.get(f"/api/v1/namespaces/{NAMESPACE}/events")["items"]
        if e.get("reason") == "StaleServiceDeleted" and old in e.get("message", "")
    ]
    assert len(reasons) == 1, reasons
