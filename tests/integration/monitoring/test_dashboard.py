"""The Grafana dashboard as it ships: the same JSON in config/grafana/ and in the chart's sidecar
ConfigMap (behind ``grafanaDashboard.enabled``), and every panel query valid PromQL for the real
``promtool``. The e2e tier runs the queries against a Prometheus scraping the operator
(tests/e2e/test_prometheus.py)."""

from __future__ import annotations

import json
import pathlib

import pytest
import yaml
from simcluster.platform.controlplane import REPO
from simcluster.platform.installtools import ToolError, by_kind, helm_template, run
from simcluster.platform.prometheus import promtool

from nova_operator.install.monitoring import DASHBOARD_FILE, DASHBOARD_UID, panel_queries

SHIPPED = REPO / "config" / "grafana" / DASHBOARD_FILE


def concrete(expr: str, job: str = "nova-operator-metrics", namespace: str = "nova-system") -> str:
    """A panel query with Grafana's variables as Grafana would substitute them."""
    for var, value in (
        ("$__rate_interval", "1m"),
        ("$job", job),
        ("$namespace", namespace),
    ):
        expr = expr.replace(var, value)
    assert "$" not in expr, expr
    return expr


def test_the_chart_configmap_and_the_kustomize_one_carry_the_repo_json() -> None:
    shipped = SHIPPED.read_text()
    board = json.loads(shipped)
    assert board["uid"] == DASHBOARD_UID
    objects = helm_template("nova-operator", "nova-system", "--set", "grafanaDashboard.enabled=true")
    (cm,) = by_kind(objects, "ConfigMap")
    assert cm["metadata"]["namespace"] == "nova-system"
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(cm["data"][DASHBOARD_FILE]) == board
    (kcm,) = by_kind(
        yaml.safe_load_all(run("kubectl", "kustomize", str(REPO / "config" / "grafana"))), "ConfigMap"
    )
    assert kcm["metadata"]["labels"] == {"grafana_dashboard": "1"}
    assert json.loads(kcm["data"][DASHBOARD_FILE]) == board


def test_the_dashboard_is_off_by_default_and_follows_its_values() -> None:
    assert not by_kind(helm_template("r", "ns"), "ConfigMap")
    objects = helm_template(
        "r",
        "ns",
        "--set-json",
        'grafanaDashboard={"enabled": true, "namespace": "monitoring", "labels": {"dashboards": "nova"},'
        ' "annotations": {"grafana_folder": "OpenStack"}}',
    )
    (cm,) = by_kind(objects, "ConfigMap")
    assert cm["metadata"]["namespace"] == "monitoring"
    assert cm["metadata"]["labels"]["dashboards"] == "nova"
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"  # Helm merges maps: the default stays
    assert cm["metadata"]["annotations"] == {"grafana_folder": "OpenStack"}


@pytest.mark.parametrize(
    "bad", ['{"namespace": "Not_A_Namespace"}', '{"labels": {"a": 1}}', '{"folder": "x"}']
)
def test_the_schema_refuses_bad_dashboard_values(bad: str) -> None:
    with pytest.raises(ToolError, match="grafanaDashboard"):
        helm_template("r", "ns", "--set-json", f"grafanaDashboard={bad}")


def test_promtool_parses_every_panel_query(tmp_path: pathlib.Path) -> None:
    queries = panel_queries(json.loads(SHIPPED.read_text()))
    assert len(queries) >= 20
    rules = [
        {"record": f"nova_operator_dashboard:query_{i}", "expr": concrete(q)}
        for i, (_, q) in enumerate(queries)
    ]
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    assert f"SUCCESS: {len(rules)} rules found" in promtool("check", "rules", str(path))


def test_promtool_refuses_a_broken_query(tmp_path: pathlib.Path) -> None:
    """The check above can fail: the same path with one unbalanced query."""
    path = tmp_path / "broken.yaml"
    rule = {
        "record": "x:y",
        "expr": concrete("sum by (name) (rate(nova_operator_workqueue_adds_total[$__rate_interval])"),
    }
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": [rule]}]}))
    with pytest.raises(ToolError, match=r"parse error|unclosed"):
        promtool("check", "rules", str(path))
