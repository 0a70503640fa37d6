"""The controller-runtime and client-go names, derived at scrape time from the nova_operator_* families."""

from __future__ import annotations

import asyncio

from nova_operator.clock import FakeClock
from nova_operator.metrics import Metrics
from nova_operator.runtime.workqueue import WorkQueue


def sample(m: Metrics, family: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(family, labels)


def test_controller_runtime_families_follow_the_operator_ones() -> None:
    m = Metrics()
    m.register_controller("nova", 3)
    m.reconcile_total.labels("nova", "success").inc(4)
    m.reconcile_total.labels("nova", "error").inc()
    m.reconcile_total.labels("nova", "terminal_error").inc(2)
    m.reconcile_errors.labels("nova").inc(3)
    m.reconcile_time.labels("nova").observe(0.3)
    m.active_workers.labels("nova").set(1)
    cr = "controller_runtime_"
    assert sample(m, cr + "reconcile_total", controller="nova", result="success") == 4
    assert sample(m, cr + "reconcile_total", controller="nova", result="error") == 3  # terminal ones too
    assert sample(m, cr + "reconcile_total", controller="nova", result="terminal_error") is None
    assert sample(m, cr + "reconcile_errors_total", controller="nova") == 3
    assert sample(m, cr + "reconcile_time_seconds_count", controller="nova") == 1
    assert sample(m, cr + "reconcile_time_seconds_bucket", controller="nova", le="0.25") == 0
    assert sample(m, cr + "reconcile_time_seconds_bucket", controller="nova", le="0.5") == 1
    assert sample(m, cr + "reconcile_time_seconds_sum", controller="nova") == 0.3
    assert sample(m, cr + "active_workers", controller="nova") == 1
    assert sample(m, cr + "max_concurrent_reconciles", controller="nova") == 3


async def test_workqueue_families_carry_name_and_controller() -> None:
    clock, m = FakeClock(), Metrics()
    q: WorkQueue[str] = WorkQueue(name="nova", clock=clock, metrics=m)
    q.add("a")
    q.add("b")
    assert await asyncio.wait_for(q.get(), 1) == "a"
    clock.advance(7)
    q.add_rate_limited("c")
    queue = {"name": "nova", "controller": "nova"}
    assert sample(m, "workqueue_depth", **queue, priority="") == 1
    assert sample(m, "workqueue_adds_total", **queue) == 2
    assert sample(m, "workqueue_retries_total", **queue) == 1
    assert sample(m, "workqueue_queue_duration_seconds_count", **queue) == 1
    assert sample(m, "workqueue_longest_running_processor_seconds", **queue) == 7
    assert sample(m, "workqueue_unfinished_work_seconds", **queue) == 7
    q.done("a")
    assert sample(m, "workqueue_work_duration_seconds_count", **queue) == 1
    assert sample(m, "workqueue_longest_running_processor_seconds", **queue) == 0


def test_leader_and_rest_client_families() -> None:
    m = Metrics()
    m.api_host = "10.0.0.1:6443"
    m.leader.labels("nova-operator-leader").set(1)
    for verb, resource, code in [
        ("get", "pods", "200"),
        ("list", "jobs.batch", "200"),
        ("watch", "pods", "200"),
        ("apply", "deployments.apps", "200"),
        ("patch", "novas.nova.openstack.c5c3.io/status", "409"),
        ("create", "events", "201"),
        ("delete", "jobs.batch", "404"),
    ]:
        m.api_requests.labels(verb, resource, code).inc()
        m.api_request_duration.labels(verb, resource).observe(0.02)
    assert sample(m, "leader_election_master_status", name="nova-operator-leader") == 1
    host = {"host": "10.0.0.1:6443"}
    assert sample(m, "rest_client_requests_total", code="200", method="GET", **host) == 3
    assert sample(m, "rest_client_requests_total", code="200", method="PATCH", **host) == 1
    assert sample(m, "rest_client_requests_total", code="409", method="PATCH", **host) == 1
    assert sample(m, "rest_client_requests_total", code="201", method="POST", **host) == 1
    assert sample(m, "rest_client_requests_total", code="404", method="DELETE", **host) == 1
    assert sample(m, "rest_client_request_duration_seconds_count", verb="GET", **host) == 3
    assert sample(m, "rest_client_request_duration_seconds_bucket", verb="PATCH", le="0.025", **host) == 2


def test_the_operator_families_stay_and_nothing_is_exported_twice() -> None:
    m = Metrics()
    m.register_controller("nova", 1)
    text = m.render().decode()
    assert "nova_operator_controller_reconcile_total{" in text
    assert "controller_runtime_reconcile_total{" in text
    types = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")]
    assert len(types) == len(set(types))
