"""The operator's alerts, as the chart (``helm template``) and config/prometheus (``kubectl
kustomize``) ship them, checked and unit-tested by the real ``promtool``: each rule fires on
the series an on-call person must act on and stays quiet on a healthy operator's series.

The input series carry the target labels a ServiceMonitor gives the operator's metrics (job =
the metrics Service, namespace = the operator's; the Nova's own namespace as
``exported_namespace``), so a selector that misses the shipped objects' job fails here.
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
import yaml
from simcluster.platform.controlplane import REPO
from simcluster.platform.installtools import by_kind, helm_template, run
from simcluster.platform.prometheus import promtool

Obj = dict[str, Any]

SOURCES = {
    # release nova-operator in nova-system: fullname nova-operator, Service nova-operator-metrics
    "chart": ("nova-operator-metrics", "nova-system"),
    "kustomize": ("nova-operator-controller-manager-metrics-service", "nova-system"),
}


def shipped_groups(source: str) -> list[Obj]:
    if source == "chart":
        objects = helm_template("nova-operator", "nova-system", "--set", "prometheusRule.enabled=true")
    else:
        objects = [
            d
            for d in yaml.safe_load_all(run("kubectl", "kustomize", str(REPO / "config" / "prometheus")))
            if d
        ]
    (rule,) = by_kind(objects, "PrometheusRule")
    return list(rule["spec"]["groups"])


@pytest.fixture(scope="module", params=sorted(SOURCES))
def rules_file(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, pathlib.Path]:
    source = str(request.param)
    path = tmp_path_factory.mktemp(source) / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": shipped_groups(source)}))
    return source, path


def series(family: str, values: str, source: str, **labels: str) -> Obj:
    job, namespace = SOURCES[source]
    all_labels = {"job": job, "namespace": namespace, "instance": "10.0.0.1:8080", **labels}
    inner = ", ".join(f'{k}="{v}"' for k, v in all_labels.items())
    return {"series": f"{family}{{{inner}}}", "values": values}


NOVA = {"nova": "nova", "exported_namespace": "openstack"}

# alert -> (input series builder, eval time, expected alerts when firing) for each case.
Case = tuple[list[tuple[str, str, dict[str, str]]], str, list[Obj]]


def _nova_alert(severity: str, summary: str, description: str) -> list[Obj]:
    return [
        {
            "exp_labels": {"severity": severity, **NOVA},
            "exp_annotations": {"summary": summary, "description": description},
        }
    ]


DB_SYNC = _nova_alert(
    "critical",
    "A db-sync or schema-upgrade Job of Nova openstack/nova failed.",
    "The Nova's database schema is not where its release needs it: read the failed Job's logs; "
    "the DatabaseReady condition says which Job.",
)
DB_ARCHIVE = _nova_alert(
    "warning",
    "A db-archive run of Nova openstack/nova failed.",
    "Soft-deleted rows keep accumulating until a run succeeds: read the failed Job's logs "
    "(DBArchiveReady condition).",
)


def job_cases(family: str, expected: list[Obj]) -> dict[str, Case]:
    ok = (family, "0+1x30", {**NOVA, "result": "succeeded"})
    return {
        # the first failure creates the series (increase() alone would not see it)
        "first failure": ([ok, (family, "_x10 1x20", {**NOVA, "result": "failed"})], "12m", expected),
        "another failure": ([ok, (family, "1x10 2x20", {**NOVA, "result": "failed"})], "12m", expected),
        "healthy": ([ok, (family, "0x30", {**NOVA, "result": "failed"})], "25m", []),
        "failure long ago": ([ok, (family, "1x30", {**NOVA, "result": "failed"})], "25m", []),
    }


CASES: dict[str, dict[str, Case]] = {
    "NovaOperatorDown": {
        "no pod up": (
            [("up", "0x10", {})],
            "10m",
            [
                {
                    "exp_labels": {"severity": "critical"},
                    "exp_annotations": {
                        "summary": "No nova-operator pod is scraped: nothing reconciles Novas and pools.",
                        "description": "Check the operator's Deployment, its pods' logs and the metrics "
                        "Service.",
                    },
                }
            ],
        ),
        "one of two pods up": ([("up", "0x10", {"pod": "a"}), ("up", "1x10", {"pod": "b"})], "10m", []),
        "down for less than 5 minutes": ([("up", "1x6 0x4", {})], "10m", []),
    },
    "NovaOperatorNoLeader": {
        "no replica leads": (
            [
                ("nova_operator_leader_election_master_status", "0x10", {"pod": p, "name": "lease"})
                for p in "ab"
            ],
            "10m",
            [
                {
                    "exp_labels": {"severity": "critical"},
                    "exp_annotations": {
                        "summary": "No nova-operator replica holds the leader lease: nothing reconciles.",
                        "description": "The replicas run but none acquired the Lease: check their logs for "
                        "lease errors and the API server's reachability.",
                    },
                }
            ],
        ),
        "one replica leads": (
            [
                ("nova_operator_leader_election_master_status", "0x10", {"pod": "a", "name": "lease"}),
                ("nova_operator_leader_election_master_status", "1x10", {"pod": "b", "name": "lease"}),
            ],
            "10m",
            [],
        ),
        "hand-over under 5 minutes": (
            [("nova_operator_leader_election_master_status", "1x5 0x2 1x3", {"pod": "a", "name": "lease"})],
            "10m",
            [],
        ),
    },
    "NovaOperatorReconcileErrors": {
        "errors for 25 minutes": (
            [("nova_operator_controller_reconcile_errors_total", "0+1x30", {"controller": "nova"})],
            "25m",
            [
                {
                    "exp_labels": {"severity": "warning", "controller": "nova"},
                    "exp_annotations": {
                        "summary": "The nova controller keeps failing reconciles.",
                        "description": "Reconciles of nova have raised for 15 minutes: see the operator's "
                        "error logs and the Warning events.",
                    },
                }
            ],
        ),
        "a burst that stopped": (
            [("nova_operator_controller_reconcile_errors_total", "0+1x3 3x27", {"controller": "nova"})],
            "25m",
            [],
        ),
        "no errors": (
            [("nova_operator_controller_reconcile_errors_total", "0x30", {"controller": "nova"})],
            "25m",
            [],
        ),
    },
    "NovaOperatorWorkqueueStuck": {
        "one key held for 20 minutes": (
            [("nova_operator_workqueue_longest_running_processor_seconds", "0+60x20", {"name": "nova"})],
            "20m",
            [
                {
                    "exp_labels": {"severity": "warning", "name": "nova"},
                    "exp_annotations": {
                        "summary": "A nova worker has held one key for 20m 0s: a reconcile hangs.",
                        "description": "The key is not reconciled again until that reconcile returns; a hung "
                        "API or OpenStack call is the usual cause. Restarting the leader frees it.",
                    },
                }
            ],
        ),
        "short reconciles": (
            [
                (
                    "nova_operator_workqueue_longest_running_processor_seconds",
                    "0 5 0 12 0 3 0x14",
                    {"name": "nova"},
                )
            ],
            "20m",
            [],
        ),
        "a slow reconcile that finished": (
            [("nova_operator_workqueue_longest_running_processor_seconds", "0+60x12 0x8", {"name": "nova"})],
            "20m",
            [],
        ),
    },
    "NovaOperatorWatchRestartStorm": {
        "two restarts a minute": (
            [
                (
                    "nova_operator_informer_watch_restarts_total",
                    "0+2x30",
                    {"resource": "pods", "reason": "error"},
                )
            ],
            "25m",
            [
                {
                    "exp_labels": {"severity": "warning", "resource": "pods"},
                    "exp_annotations": {
                        "summary": "Watches of pods re-open over and over (20 in 10 minutes).",
                        "description": "The cache of pods may be stale: check the API server and anything "
                        "between it and the operator (proxies, NetworkPolicies).",
                    },
                }
            ],
        ),
        "watches closing on their timeout": (
            [
                (
                    "nova_operator_informer_watch_restarts_total",
                    "0+0.2x30",
                    {"resource": r, "reason": "closed"},
                )
                for r in ("pods", "jobs.batch", "deployments.apps")
            ],
            "25m",
            [],
        ),
    },
    "NovaNotReady": {
        "not Ready for 20 minutes": (
            [("nova_operator_nova_ready", "0x20", NOVA)],
            "20m",
            _nova_alert(
                "warning",
                "Nova openstack/nova has not been Ready for 15 minutes.",
                "kubectl -n openstack describe nova nova: the Ready condition's reason names the "
                "failing part.",
            ),
        ),
        "Ready again": ([("nova_operator_nova_ready", "0x10 1x10", NOVA)], "20m", []),
        "not Ready for 10 minutes": ([("nova_operator_nova_ready", "1x10 0x10", NOVA)], "20m", []),
    },
    "NovaDBSyncFailed": job_cases("nova_operator_db_sync_total", DB_SYNC),
    "NovaDBArchiveFailed": job_cases("nova_operator_db_archive_total", DB_ARCHIVE),
}


def test_promtool_checks_the_shipped_rules(rules_file: tuple[str, pathlib.Path]) -> None:
    _, path = rules_file
    out = promtool("check", "rules", str(path))
    assert f"SUCCESS: {len(CASES)} rules found" in out


def test_every_shipped_alert_has_cases() -> None:
    (group,) = shipped_groups("chart")
    assert {r["alert"] for r in group["rules"]} == set(CASES)


@pytest.mark.parametrize(("alert", "case"), [(a, c) for a, cases in CASES.items() for c in cases])
def test_alert_fires_only_when_it_should(rules_file: tuple[str, pathlib.Path], alert: str, case: str) -> None:
    source, path = rules_file
    inputs, at, expected = CASES[alert][case]
    test = {
        "rule_files": [str(path)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "name": f"{alert}: {case}",
                "interval": "1m",
                "input_series": [series(name, values, source, **labels) for name, values, labels in inputs],
                "alert_rule_test": [{"eval_time": at, "alertname": alert, "exp_alerts": expected}],
            }
        ],
    }
    test_file = path.parent / f"test-{alert}-{case.replace(' ', '-')}.yaml"
    test_file.write_text(yaml.safe_dump(test, sort_keys=False))
    promtool("test", "rules", str(test_file))
