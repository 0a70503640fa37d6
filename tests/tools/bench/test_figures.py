"""The benchmark's arithmetic: audit lines, histogram quantiles, nearest-rank percentiles, the comparison."""

from __future__ import annotations

import json
import math
import os
import pathlib
import time
from typing import Any

from bench import audit, figures, floor, proc, promtext, report

OPERATOR = "system:serviceaccount:nova-system:nova-operator"


def line(verb: str, resource: str, *, code: int = 200, sub: str = "", stage: str = "ResponseComplete") -> str:
    ref = {"resource": resource, "namespace": "bench-000", "name": "nova", "apiGroup": "x"}
    if sub:
        ref["subresource"] = sub
    return json.dumps(
        {
            "stage": stage,
            "verb": verb,
            "user": {"username": OPERATOR},
            "objectRef": ref,
            "responseStatus": {"code": code},
            "requestReceivedTimestamp": "2026-12-01T08:00:01.250000Z",
        }
    )


def test_audit_lines_become_requests_and_an_unfinished_line_waits(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "audit.log"
    path.write_text(
        "\n".join(
            [
                line("patch", "novas", sub="status"),
                line("patch", "deployments", code=201),
                line("get", "novas", stage="ResponseStarted"),
                line("update", "leases"),
            ]
        )
        + "\n"
        + line("get", "novas")[:40]  # being written: not parsed until its newline arrives
    )
    log = audit.AuditLog(path)
    got = log.refresh()
    assert [(r.verb, r.resource, r.created) for r in got] == [
        ("patch", "novas/status", False),
        ("patch", "deployments", True),
        ("update", "leases", False),
    ]
    assert got[0].at == 1796112001.25
    assert [r.resource for r in audit.without_leases(got)] == ["novas/status", "deployments"]
    with path.open("a") as fh:
        fh.write(line("get", "novas")[40:] + "\n")
    (late,) = log.refresh()
    assert (late.verb, late.is_read, late.is_write) == ("get", True, False)
    assert audit.by_verb_and_resource(log.requests)["patch novas/status"] == 1


METRICS = """# HELP x Duration
x_bucket{controller="nova",le="0.1"} 50
x_bucket{controller="nova",le="1.0"} 90
x_bucket{controller="nova",le="+Inf"} 100
x_bucket{controller="other",le="0.1"} 7
x_count{controller="nova"} 100
"""


def test_histogram_quantiles_interpolate_within_the_bucket_as_promql_does() -> None:
    h = promtext.histogram(METRICS, "x", controller="nova")
    assert h == {0.1: 50.0, 1.0: 90.0, math.inf: 100.0}
    assert promtext.quantile(h, 0.5) == 0.1
    assert promtext.quantile(h, 0.7) == 0.1 + 0.9 * 0.5
    assert promtext.quantile(h, 0.99) == 1.0  # in the +Inf bucket: the last finite bound
    assert promtext.quantile(promtext.minus(h, h), 0.5) is None
    assert promtext.total(METRICS, "x_bucket", le="0.1") == 57.0


def test_nearest_rank_percentiles() -> None:
    values = [float(v) for v in range(1, 21)]
    assert figures.pct(values, 0.5) == 10.0
    assert figures.pct(values, 0.95) == 19.0
    assert figures.pct(values, 1.0) == 20.0
    assert figures.pct([], 0.5) is None
    assert figures.spread([0.5, 0.25]) == {"count": 2, "p50": 0.25, "p95": 0.5, "max": 0.5}


def test_compare_shows_both_runs_and_the_relative_change() -> None:
    a = {"novas": 100, "ready": {"last": 127.0}, "stages": {"ready": {"began": None, "ended": 122.0}}}
    b = {"novas": 100, "ready": {"last": 63.5}, "stages": {"ready": {"began": None, "ended": 60.0}}}
    table = report.compare(a, b, ("main", "branch"))
    assert "| all Ready: last (s) | 127.0 | 63.5 | -63.5 (-50%) |" in table
    assert "| stage Ready (s) | - → 122.0 | - → 60.0 |  |" in table


def test_the_cpu_window_counts_what_a_process_spent_and_how_busy_the_machine_was() -> None:
    window = proc.CpuWindow({"me": os.getpid(), "gone": 2**22 + 7})
    window.start()
    deadline = time.process_time() + 0.2
    while time.process_time() < deadline:  # spend CPU
        pass
    seconds = window.stop()
    assert seconds["me"] >= 0.1
    assert seconds["gone"] == 0.0  # a process that is not there spent nothing
    assert 0.0 < window.machine_busy <= 1.0


def test_a_child_is_replayed_without_what_the_api_server_set() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "nova-db-sync",
            "namespace": "bench-100",
            "uid": "u",
            "resourceVersion": "7",
            "generation": 1,
            "creationTimestamp": "2026-12-01T08:00:00Z",
            "managedFields": [{}],
            "ownerReferences": [{"kind": "Nova"}],
            "labels": {"app": "nova", "controller-uid": "u", "batch.kubernetes.io/controller-uid": "u"},
        },
        "spec": {
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}},
            "template": {"metadata": {"labels": {"app": "nova", "controller-uid": "u"}}, "spec": {}},
        },
        "status": {"succeeded": 1},
    }
    out = floor.portable("Job", job)
    assert out["metadata"] == {"name": "nova-db-sync", "labels": {"app": "nova"}}
    assert "selector" not in out["spec"]
    assert out["spec"]["template"]["metadata"]["labels"] == {"app": "nova"}
    assert "status" not in out
    assert job["metadata"]["uid"] == "u"  # the template itself is left as it was
    service = {
        "metadata": {"name": "nova"},
        "spec": {"clusterIP": "10.96.0.9", "clusterIPs": ["10.96.0.9"], "ports": [{"port": 8774}]},
    }
    assert floor.portable("Service", service)["spec"] == {"ports": [{"port": 8774}]}


def test_the_floor_table_names_each_process() -> None:
    table = report.floor_table(
        {
            "novas": 100,
            "objects_per_namespace": 27,
            "creates_seconds": 20.5,
            "all_ready": {"first": 3.0, "median": 21.0, "last": 30.25},
            "machine": {"busy_fraction": 0.97, "cpu_seconds": {"kube-apiserver": 40.5, "etcd": 6.0}},
        }
    )
    assert "| all available: first / median / last (s) | 3 / 21.0 / 30.2 |" in table  # the run table's format
    assert "| kube-apiserver CPU (s) | 40.5 |" in table
    assert "| etcd CPU (s) | 6 |" in table


def request(at: float, verb: str, resource: str, namespace: str, user: str = OPERATOR) -> audit.Request:
    return audit.Request(
        at=at, user=user, verb=verb, resource=resource, namespace=namespace, name="x", code=201
    )


def test_first_write_runs_from_the_novas_create_to_its_first_child_write() -> None:
    log = audit.AuditLog(pathlib.Path("/nonexistent"))
    log.requests = [
        request(10.5, "patch", "novas", "bench-000"),  # the finalizer: the Nova itself, not a child
        request(10.6, "create", "events", "bench-000"),  # an event is no child
        request(10.7, "get", "secrets", "bench-000"),  # a read is no write
        request(11.0, "patch", "secrets", "bench-000"),  # the first child write
        request(12.0, "patch", "configmaps", "bench-000"),
        request(30.0, "patch", "secrets", "bench-001"),
        request(31.0, "patch", "secrets", "bench-002", user="someone-else"),
    ]
    created = {"bench-000": 10.0, "bench-001": 10.0, "bench-002": 10.0}
    got = figures.first_write(log, created, ["bench-000", "bench-001", "bench-002"])
    assert got == {"count": 2, "p50": 1.0, "p95": 20.0, "max": 20.0, "missing": 1}


def test_the_headline_is_the_run_against_its_floor() -> None:
    result: dict[str, Any] = {
        "ready": {"median": 40.0, "last": 50.0},
        "machine": {"cpu_seconds_converge": {"kube-apiserver": 60.0, "operator": 15.0}},
    }
    assert "not measured" in report.headline(result)
    found = {
        "finished": True,
        "novas": 100,
        "all_ready": {"median": 30.0, "last": 40.0},
        "machine": {"cpu_seconds": {"kube-apiserver": 40.0, "etcd": 10.0}},
    }
    figures.with_floor(result, found, "bench-floor-100.json")
    assert result["versus_floor"] == {"last": 1.25, "median": 1.333, "cpu": 1.5}
    assert result["floor"]["source"] == "bench-floor-100.json"
    assert report.headline(result) == (
        "all Ready (last) / floor all available (last): 50.0 s / 40.0 s = 1.25; "
        "median: 40.0 s / 30.0 s = 1.333; CPU: 1.5"
    )
    table = report.table(result)
    assert "| all Ready last / floor all available last | 1.25 |" in table
    unfinished = figures.with_floor({"ready": {"last": 50.0}}, {"finished": False, "all_ready": {}}, "f")
    assert unfinished["versus_floor"] == {"last": None, "median": None, "cpu": None}
