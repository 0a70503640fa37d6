"""A real Prometheus scrapes the operator during an install on the simulated cluster.

The operator runs as its own process with leader election, as in test_scenarios.py (both use the
tier's harness, ``tests/e2e/harness.py``), and a Prometheus (tools/prometheus/build.sh) scrapes its
metrics port every second with the target labels a ServiceMonitor gives it (job = the chart's metrics Service,
namespace = the operator's, ``honor_labels`` off). Everything is asserted through Prometheus'
HTTP API: the reconcile, queue, API-request, db-sync, db-archive, leader and readiness series
with their labels, every dashboard panel query (non-empty, no error) and every alert expression
(valid, and quiet on this healthy install).
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
from simcluster import SimHandle
from simcluster.client import jsonlog
from simcluster.platform.prometheus import Prometheus

from nova_operator.install.monitoring import (
    DASHBOARD_FILE,
    NOVA_NAMESPACE,
    alert_rules,
    panel_queries,
    selector,
)
from nova_operator.metrics import RESULTS
from nova_operator.runtime.informer import WATCH_RESTART_REASONS
from tests.e2e import harness as sc

pytestmark = pytest.mark.e2e


JOB = "nova-operator-metrics"  # the chart's metrics Service for release nova-operator
OPERATOR_NAMESPACE = "nova-system"
SEL = selector(JOB, OPERATOR_NAMESPACE)
CRONJOBS = "/apis/batch/v1/namespaces/{ns}/cronjobs"
Series = dict[str, Any]


def labels_of(prom: Prometheus, expr: str) -> list[dict[str, str]]:
    return [r["metric"] for r in prom.query(expr)]


def value(prom: Prometheus, expr: str) -> float:
    result = prom.query(expr)
    assert len(result) == 1, f"{expr}: {result}"
    return float(result[0]["value"][1])


def run_db_archive(s: Any) -> str:
    """A run of the Nova's db-archive CronJob now, as ``kubectl create job --from=cronjob/...`` makes it."""
    cronjob = s.kube.get(s.path(CRONJOBS, f"{sc.NAME}-db-archive"))
    template = cronjob["spec"]["jobTemplate"]
    name = f"{sc.NAME}-db-archive-manual"
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": s.ns,
            "labels": dict(template["metadata"].get("labels") or {}),
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "CronJob",
                    "name": cronjob["metadata"]["name"],
                    "uid": cronjob["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": template["spec"],
    }
    s.kube.post(s.path(sc.JOBS), job)
    return name


def concrete(expr: str, ns: str) -> str:
    """A panel query as Grafana sends it for this scrape ($__rate_interval: 4 scrapes of 1 s and more)."""
    for var, val in (("$__rate_interval", "15s"), ("$job", JOB), ("$namespace", ns)):
        expr = expr.replace(var, val)
    assert "$" not in expr, expr
    return expr


def test_prometheus_scrapes_the_operator_during_an_install(
    sim_module: SimHandle, tmp_path: pathlib.Path, summary_line: Any
) -> None:
    sc.prepare(sim_module)
    s = sc.Scenario(sim_module, sc.new_namespace(sim_module, "prom"))
    prom: Prometheus | None = None
    try:
        # at debug level: every reconcile logs, so the log check below sees reconcile lines
        op = s.start_operator("0", leader_elect=True, extra=("--log-level", "debug"))
        target = f"127.0.0.1:{s.metrics_ports[op.name]}"
        prom = Prometheus(
            tmp_path / "prometheus", JOB, [target], labels={"namespace": OPERATOR_NAMESPACE, "pod": op.name}
        )
        s.install()
        s.wait_ready(sc.INSTALL_WITHIN, "the sample Nova Ready")
        archive = run_db_archive(s)
        sc.wait_for(
            lambda: sc.job_finished(s.kube.get(s.path(sc.JOBS, archive))) == "Complete",
            60,
            "the db-archive run done",
        )
        nova = f'nova="{sc.NAME}", {NOVA_NAMESPACE}="{s.ns}"'
        archived = f'nova_operator_db_archive_total{{{SEL}, {nova}, result="succeeded"}} == 1'
        sc.wait_for(lambda: prom.query(archived) if prom else None, 60, "the db-archive run scraped")
        ready = f"nova_operator_nova_ready{{{SEL}, {nova}}} == 1"
        sc.wait_for(lambda: prom.query(ready) if prom else None, 30, "the Nova's readiness scraped")

        (up,) = prom.targets()
        assert up["health"] == "up", up
        assert up["labels"] == {
            "job": JOB,
            "instance": target,
            "namespace": OPERATOR_NAMESPACE,
            "pod": op.name,
        }

        # reconciles: every controller with every result, the Nova's reconciled
        per_controller: dict[str, set[str]] = {}
        for m in labels_of(prom, f"nova_operator_controller_reconcile_total{{{SEL}}}"):
            per_controller.setdefault(m["controller"], set()).add(m["result"])
        assert "nova" in per_controller
        assert all(results == set(RESULTS) for results in per_controller.values()), per_controller
        assert value(prom, f'sum(nova_operator_controller_reconcile_total{{{SEL}, controller="nova"}})') > 0
        reconcile_count = f'nova_operator_controller_reconcile_time_seconds_count{{{SEL}, controller="nova"}}'
        assert value(prom, reconcile_count) > 0
        steps = {
            m["sub_reconciler"]
            for m in labels_of(prom, f"nova_operator_reconcile_duration_seconds_count{{{SEL}}}")
        }
        assert {"Secrets", "Database", "Deployment", "DBArchive"} <= steps

        # the work queue of each controller
        def queues(family: str) -> set[str]:
            assert prom is not None
            return {m["name"] for m in labels_of(prom, f"nova_operator_workqueue_{family}{{{SEL}}}")}

        for family in ("depth", "adds_total", "retries_total", "longest_running_processor_seconds"):
            assert set(per_controller) <= queues(family), family  # from registration on
        for family in ("queue_duration_seconds_count", "work_duration_seconds_count"):
            assert "nova" in queues(family), family  # from the first key taken
        assert value(prom, f'nova_operator_workqueue_adds_total{{{SEL}, name="nova"}}') > 0

        # API requests by verb, resource and code
        requests = labels_of(prom, f"nova_operator_api_requests_total{{{SEL}}} > 0")
        assert all({"verb", "resource", "code"} <= set(m) for m in requests)
        verbs = {m["verb"] for m in requests}
        assert {"list", "watch", "apply"} <= verbs, verbs
        assert any(m["resource"] == "novas.nova.openstack.c5c3.io/status" for m in requests)
        assert value(prom, f'sum(nova_operator_api_request_duration_seconds_count{{{SEL}, verb="list"}})') > 0

        # the Nova's Jobs: db-sync once, the db-archive run once, both succeeded
        assert value(prom, f'nova_operator_db_sync_total{{{SEL}, {nova}, result="succeeded"}}') == 1
        assert value(prom, f"nova_operator_db_sync_duration_seconds_count{{{SEL}, {nova}}}") == 1
        assert not prom.query(f'nova_operator_db_sync_total{{{SEL}, result="failed"}}')
        assert value(prom, f"nova_operator_db_archive_duration_seconds_count{{{SEL}, {nova}}}") == 1

        # watch restarts: every reason's series from the informer's start (the dashboard panel reads it)
        restarts = labels_of(
            prom,
            f'nova_operator_informer_watch_restarts_total{{{SEL}, resource="novas.nova.openstack.c5c3.io"}}',
        )
        assert {m["reason"] for m in restarts} == set(WATCH_RESTART_REASONS)

        # the leader, and the Nova Ready
        leader = labels_of(prom, f"nova_operator_leader_election_master_status{{{SEL}}} == 1")
        assert [m["name"] for m in leader] == [sc.LEASE_NAME]
        assert value(prom, f"sum(nova_operator_nova_ready{{{SEL}}})") == 1

        # the controller-runtime and client-go names, for the dashboards that read those
        assert value(
            prom, f'controller_runtime_reconcile_total{{{SEL}, controller="nova", result="success"}}'
        ) == (
            value(
                prom,
                f'nova_operator_controller_reconcile_total{{{SEL}, controller="nova", result="success"}}',
            )
        )
        standard = {
            f'controller_runtime_reconcile_time_seconds_count{{{SEL}, controller="nova"}}',
            f'controller_runtime_max_concurrent_reconciles{{{SEL}, controller="novacompute"}}',
            f'workqueue_adds_total{{{SEL}, name="nova", controller="nova"}}',
            f'workqueue_queue_duration_seconds_count{{{SEL}, name="nova", controller="nova"}}',
            f'workqueue_longest_running_processor_seconds{{{SEL}, name="nova", controller="nova"}}',
            f'leader_election_master_status{{{SEL}, name="{sc.LEASE_NAME}"}} == 1',
            f'sum(rest_client_requests_total{{{SEL}, method="GET", code="200", host=~"127.0.0.1:[0-9]+"}})',
            f'sum(rest_client_requests_total{{{SEL}, method="PATCH"}})',
        }
        missing = [expr for expr in sorted(standard) if not prom.query(expr)]
        assert not missing, missing

        # every dashboard panel answers: a rate() needs two samples inside its window, so wait until
        # the window holds four scrapes (Prometheus may have started scraping only just now)
        sc.wait_for(
            lambda: prom.query(f"count_over_time(up{{{SEL}}}[15s]) >= 4") if prom else None,
            30,
            "four scrapes inside the panels' rate window",
        )
        board = json.loads((sc.REPO / "config" / "grafana" / DASHBOARD_FILE).read_text())
        empty = [
            title
            for title, expr in panel_queries(board)
            if not prom.query(concrete(expr, OPERATOR_NAMESPACE))
        ]
        assert not empty, f"panels without data: {empty}"

        # every alert expression is valid here, and a healthy install fires none of the paging ones
        quiet = {
            "NovaOperatorDown",
            "NovaOperatorNoLeader",
            "NovaNotReady",
            "NovaDBSyncFailed",
            "NovaDBArchiveFailed",
        }
        for rule in alert_rules(SEL):
            result = prom.query(rule["expr"])
            if rule["alert"] in quiet:
                assert not result, (rule["alert"], result)
        checked = f"{len(panel_queries(board))} panel queries and {len(alert_rules(SEL))} alert expressions"
        summary_line(f"prometheus: {checked} answered")

        # the operator's whole output (stdout and stderr), start to SIGTERM, is JSON lines
        assert op.stop() == 0
        lines = jsonlog.records(op.log.read_text())
        assert lines, "the operator logged nothing"
        reconciles = [e for e in lines if e.get("reconcile_id")]
        assert any(e["controller"] == "nova" and e["name"] == sc.NAME for e in reconciles)
        assert all({"controller", "namespace", "name"} <= set(e) for e in reconciles)
        messages = {e["msg"] for e in lines}
        assert {"starting", "caches synced", "starting controllers", "signal received, stopping"} <= messages
    finally:
        if prom is not None:
            prom.stop()
        s.stop_operators()
        sc.drop_namespace(sim_module, s.ns)
