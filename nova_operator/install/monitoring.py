"""What an operator team watches: the alert rules of the PrometheusRule and the Grafana dashboard.

Both are data, rendered once for the chart (``install.chart``) and once for ``config/``
(``install.kustomize``), so the two never drift. Every expression reads the families of
``nova_operator.metrics`` through a selector on the scrape job and the operator's namespace,
as the prometheus-operator labels a ServiceMonitor's targets (``job`` = the metrics Service,
``namespace`` = the operator's). That ServiceMonitor keeps ``honorLabels`` off, so the per-Nova
``namespace`` label of ``nova_operator_db_*`` and ``nova_operator_nova_ready`` arrives as
``exported_namespace`` (``NOVA_NAMESPACE``).
"""

from __future__ import annotations

import json
import re
from typing import Any

NOVA_NAMESPACE = "exported_namespace"
DASHBOARD_UID = "nova-operator"  # reconciler spec §14.2
DASHBOARD_FILE = "nova-operator.json"
# The dashboard's template variables, as its queries use them (tests substitute them).
DASHBOARD_SELECTOR = 'job="$job", namespace="$namespace"'

Rule = dict[str, Any]

# Thresholds of the rules (the runbook texts below name them).
STUCK_SECONDS = 600  # one key held by a worker longer than this: a reconcile hangs
WATCH_RESTARTS_PER_10M = 10  # watches re-open every 5-10 min per resource when healthy


def selector(job: str, namespace: str) -> str:
    return f'job="{job}", namespace="{namespace}"'


def _job_failed(family: str, sel: str) -> str:
    """A failed run in the last 15 min, also when it created the series (``increase`` sees a new
    series' first sample as its start, so the first failure after a restart would go unseen)."""
    failed = f'{family}{{{sel}, result="failed"}}'
    return (
        f"sum by (nova, {NOVA_NAMESPACE}) (({failed} unless {failed} offset 15m)"
        f" or increase({failed}[15m])) > 0"
    )


def alert_rules(sel: str) -> list[Rule]:
    """The rules of group ``nova-operator``; ``sel`` selects the operator's scrape targets."""
    nova = f"{{{{ $labels.{NOVA_NAMESPACE} }}}}/{{{{ $labels.nova }}}}"
    return [
        {
            "alert": "NovaOperatorDown",
            "expr": f"absent(up{{{sel}}} == 1)",
            "for": "5m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "No nova-operator pod is scraped: nothing reconciles Novas and pools.",
                "description": "Check the operator's Deployment, its pods' logs and the metrics Service.",
            },
        },
        {
            "alert": "NovaOperatorNoLeader",
            "expr": f"max(nova_operator_leader_election_master_status{{{sel}}}) < 1",
            "for": "5m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "No nova-operator replica holds the leader lease: nothing reconciles.",
                "description": "The replicas run but none acquired the Lease: check their logs for "
                "lease errors and the API server's reachability.",
            },
        },
        {
            "alert": "NovaOperatorReconcileErrors",
            "expr": "sum by (controller) "
            f"(rate(nova_operator_controller_reconcile_errors_total{{{sel}}}[5m])) > 0",
            "for": "15m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "The {{ $labels.controller }} controller keeps failing reconciles.",
                "description": "Reconciles of {{ $labels.controller }} have raised for 15 minutes: "
                "see the operator's error logs and the Warning events.",
            },
        },
        {
            "alert": "NovaOperatorWorkqueueStuck",
            "expr": "max by (name) "
            f"(nova_operator_workqueue_longest_running_processor_seconds{{{sel}}}) > {STUCK_SECONDS}",
            "for": "5m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "A {{ $labels.name }} worker has held one key for "
                "{{ $value | humanizeDuration }}: a reconcile hangs.",
                "description": "The key is not reconciled again until that reconcile returns; a "
                "hung API or OpenStack call is the usual cause. Restarting the leader frees it.",
            },
        },
        {
            "alert": "NovaOperatorWatchRestartStorm",
            "expr": "sum by (resource) (increase(nova_operator_informer_watch_restarts_total"
            f"{{{sel}}}[10m])) > {WATCH_RESTARTS_PER_10M}",
            "for": "10m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "Watches of {{ $labels.resource }} re-open over and over "
                "({{ $value | humanize }} in 10 minutes).",
                "description": "The cache of {{ $labels.resource }} may be stale: check the API "
                "server and anything between it and the operator (proxies, NetworkPolicies).",
            },
        },
        {
            "alert": "NovaNotReady",
            "expr": f"max by (nova, {NOVA_NAMESPACE}) (nova_operator_nova_ready{{{sel}}}) == 0",
            "for": "15m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": f"Nova {nova} has not been Ready for 15 minutes.",
                "description": f"kubectl -n {{{{ $labels.{NOVA_NAMESPACE} }}}} describe nova "
                "{{ $labels.nova }}: the Ready condition's reason names the failing part.",
            },
        },
        {
            "alert": "NovaDBSyncFailed",
            "expr": _job_failed("nova_operator_db_sync_total", sel),
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": f"A db-sync or schema-upgrade Job of Nova {nova} failed.",
                "description": "The Nova's database schema is not where its release needs it: read "
                "the failed Job's logs; the DatabaseReady condition says which Job.",
            },
        },
        {
            "alert": "NovaDBArchiveFailed",
            "expr": _job_failed("nova_operator_db_archive_total", sel),
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": f"A db-archive run of Nova {nova} failed.",
                "description": "Soft-deleted rows keep accumulating until a run succeeds: read the "
                "failed Job's logs (DBArchiveReady condition).",
            },
        },
    ]


def helm_escape(rules: list[Rule]) -> list[Rule]:
    """The rules with Prometheus' ``{{ ... }}`` templates quoted for Helm (printed as they are)."""

    def esc(text: str) -> str:
        return re.sub(r"\{\{.*?\}\}", lambda m: "{{ `" + m[0] + "` }}", text)

    return [{**r, "annotations": {k: esc(v) for k, v in r["annotations"].items()}} for r in rules]


# -- the dashboard -----------------------------------------------------------------------------

Panel = tuple[str, str, list[tuple[str, str]]]  # title, unit, [(expr, legend)]


def _q(expr: str) -> str:
    return expr.replace("SEL", DASHBOARD_SELECTOR)


def _rate(family: str, by: str) -> str:
    return _q(f"sum by ({by}) (rate({family}{{SEL}}[$__rate_interval]))")


def _total(family: str, by: str) -> str:
    """Runs since the leader started, not ``increase`` over the range: a Job's series starts at its
    first run, which ``increase`` would not count (a single failed db-sync would show as none)."""
    return _q(f"sum by ({by}) ({family}{{SEL}})")


def _quantile(q: float, family: str, by: str) -> str:
    return _q(f"histogram_quantile({q}, sum by ({by}, le) (rate({family}_bucket{{SEL}}[$__rate_interval])))")


def _mean(family: str, by: str) -> str:
    return f"{_total(family + '_sum', by)} / {_total(family + '_count', by)}"


PER_NOVA = f"{NOVA_NAMESPACE}, nova"
NOVA_LEGEND = f"{{{{{NOVA_NAMESPACE}}}}}/{{{{nova}}}}"


def _job_panels(job: str) -> list[Panel]:
    """Runs by result and their mean duration, per Nova, of ``nova_operator_<job>_*``."""
    legend, title = NOVA_LEGEND, job.replace("_", "-")
    return [
        (
            f"{title} runs by result (since the leader started)",
            "short",
            [(_total(f"nova_operator_{job}_total", f"{PER_NOVA}, result"), f"{legend} {{{{result}}}}")],
        ),
        (f"{title} mean duration", "s", [(_mean(f"nova_operator_{job}_duration_seconds", PER_NOVA), legend)]),
    ]


CONTROLLER_TIME = "nova_operator_controller_reconcile_time_seconds"
ROWS: list[tuple[str, list[Panel]]] = [
    (
        "Novas and leader",
        [
            ("Ready Novas", "short", [(_q("sum(nova_operator_nova_ready{SEL})"), "Ready")]),
            ("Novas not Ready", "short", [(_q("sum(1 - nova_operator_nova_ready{SEL})"), "not Ready")]),
            (
                "Ready by Nova",
                "short",
                [(_q(f"max by ({PER_NOVA}) (nova_operator_nova_ready{{SEL}})"), NOVA_LEGEND)],
            ),
            (
                "Leader",
                "short",
                [
                    (
                        _q("max by (instance) (nova_operator_leader_election_master_status{SEL})"),
                        "{{instance}}",
                    )
                ],
            ),
        ],
    ),
    (
        "Controllers",
        [
            (
                "Reconciles by controller and result",
                "ops",
                [
                    (
                        _rate("nova_operator_controller_reconcile_total", "controller, result"),
                        "{{controller}} {{result}}",
                    )
                ],
            ),
            (
                "Reconcile errors by controller",
                "ops",
                [(_rate("nova_operator_controller_reconcile_errors_total", "controller"), "{{controller}}")],
            ),
            (
                "Reconcile duration (p50, p99)",
                "s",
                [
                    (_quantile(0.5, CONTROLLER_TIME, "controller"), "{{controller}} p50"),
                    (_quantile(0.99, CONTROLLER_TIME, "controller"), "{{controller}} p99"),
                ],
            ),
            (
                "Workers busy and configured",
                "short",
                [
                    (
                        _q("sum by (controller) (nova_operator_controller_active_workers{SEL})"),
                        "{{controller}} busy",
                    ),
                    (
                        _q("max by (controller) (nova_operator_controller_max_concurrent_reconciles{SEL})"),
                        "{{controller}} max",
                    ),
                ],
            ),
        ],
    ),
    (
        "Steps",
        [
            (
                "Step duration (p95)",
                "s",
                [
                    (
                        _quantile(0.95, "nova_operator_reconcile_duration_seconds", "sub_reconciler"),
                        "{{sub_reconciler}}",
                    )
                ],
            ),
            (
                "Step errors",
                "ops",
                [
                    (
                        _rate("nova_operator_reconcile_errors_total", "sub_reconciler, condition_type"),
                        "{{sub_reconciler}} ({{condition_type}})",
                    )
                ],
            ),
        ],
    ),
    (
        "Work queues",
        [
            (
                "Queue depth",
                "short",
                [(_q("sum by (name) (nova_operator_workqueue_depth{SEL})"), "{{name}}")],
            ),
            (
                "Adds and retries",
                "ops",
                [
                    (_rate("nova_operator_workqueue_adds_total", "name"), "{{name}} adds"),
                    (_rate("nova_operator_workqueue_retries_total", "name"), "{{name}} retries"),
                ],
            ),
            (
                "Queue latency and work duration (p99)",
                "s",
                [
                    (
                        _quantile(0.99, "nova_operator_workqueue_queue_duration_seconds", "name"),
                        "{{name}} waiting",
                    ),
                    (
                        _quantile(0.99, "nova_operator_workqueue_work_duration_seconds", "name"),
                        "{{name}} working",
                    ),
                ],
            ),
            (
                "Longest running processor",
                "s",
                [
                    (
                        _q("max by (name) (nova_operator_workqueue_longest_running_processor_seconds{SEL})"),
                        "{{name}}",
                    )
                ],
            ),
        ],
    ),
    (
        "Kubernetes API",
        [
            (
                "API requests by verb and code",
                "reqps",
                [(_rate("nova_operator_api_requests_total", "verb, code"), "{{verb}} {{code}}")],
            ),
            (
                "API request latency by verb (p99)",
                "s",
                [(_quantile(0.99, "nova_operator_api_request_duration_seconds", "verb"), "{{verb}}")],
            ),
            (
                "Cache events and relists",
                "ops",
                [
                    (_rate("nova_operator_informer_events_total", "resource"), "{{resource}} events"),
                    (
                        _q("sum by (resource) (nova_operator_informer_relists_total{SEL})"),
                        "{{resource}} relists",
                    ),
                ],
            ),
            (
                # Watches end normally every 5-10 min ("closed"); anything else is trouble, and a
                # storm of it is the NovaOperatorWatchRestartStorm alert (per resource).
                "Watch restarts by reason",
                "ops",
                [(_rate("nova_operator_informer_watch_restarts_total", "reason"), "{{reason}}")],
            ),
        ],
    ),
    ("Database Jobs", [panel for job in ("db_sync", "db_archive") for panel in _job_panels(job)]),
]


def _variable(name: str, label: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "query": {"query": query, "refId": name},
        "definition": query,
        "refresh": 2,
        "sort": 1,
        "includeAll": False,
        "multi": False,
    }


def dashboard() -> dict[str, Any]:
    """The Grafana dashboard (uid ``nova-operator``): one row per concern, 4 panels a row at most."""
    ds = {"type": "prometheus", "uid": "${datasource}"}
    panels: list[dict[str, Any]] = []
    pid, y = 1, 0
    for row, row_panels in ROWS:
        panels.append(
            {
                "id": pid,
                "type": "row",
                "title": row,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
                "panels": [],
            }
        )
        pid, y = pid + 1, y + 1
        width = 24 // len(row_panels)
        for i, (title, unit, queries) in enumerate(row_panels):
            panels.append(
                {
                    "id": pid,
                    "type": "timeseries",
                    "title": title,
                    "datasource": ds,
                    "gridPos": {"h": 8, "w": width, "x": i * width, "y": y},
                    "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                    "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
                    "targets": [
                        {"refId": chr(ord("A") + n), "datasource": ds, "expr": expr, "legendFormat": legend}
                        for n, (expr, legend) in enumerate(queries)
                    ],
                }
            )
            pid += 1
        y += 8
    any_series = "nova_operator_controller_reconcile_total"
    return {
        "uid": DASHBOARD_UID,
        "title": "Nova operator",
        "description": "Reconciles, steps, work queues, API requests and database Jobs of nova-operator.",
        "tags": ["nova-operator", "openstack", "kubernetes"],
        "editable": True,
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "templating": {
            "list": [
                {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus"},
                _variable("namespace", "Namespace", f"label_values({any_series}, namespace)"),
                _variable("job", "Job", f'label_values({any_series}{{namespace="$namespace"}}, job)'),
            ]
        },
        "annotations": {"list": []},
        "panels": panels,
    }


def dashboard_json() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


def panel_queries(board: dict[str, Any]) -> list[tuple[str, str]]:
    """``(panel title, expr)`` of every query of every panel."""
    return [(p["title"], t["expr"]) for p in board["panels"] for t in p.get("targets", [])]
