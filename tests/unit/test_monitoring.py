"""The alerts and the dashboard read only families the operator exports, with their labels."""

from __future__ import annotations

import re

import pytest

from nova_operator.install.monitoring import NOVA_NAMESPACE, alert_rules, dashboard, panel_queries, selector
from nova_operator.metrics import Metrics
from nova_operator.reconcilers.metrics import operator_families

FAMILY = re.compile(r"\b(nova_operator_[a-z_]+)")
BY = re.compile(r"\bby \(([^)]*)\)")


SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}


def exported() -> dict[str, set[str]]:
    """Sample name -> its label names, for every family the operator process registers."""
    out: dict[str, set[str]] = {}
    for value in operator_families(Metrics()):
        labels = set(value._labelnames)  # prometheus-client keeps them private
        if "namespace" in labels:  # the Nova's namespace, renamed by the scrape (honorLabels off)
            labels.add(NOVA_NAMESPACE)
        (family,) = value.describe()
        for suffix in SUFFIXES[family.type]:
            out[family.name + suffix] = labels | ({"le"} if suffix == "_bucket" else set())
    return out


def check(expr: str, families: dict[str, set[str]]) -> None:
    used = FAMILY.findall(expr)
    assert used, expr
    for name in used:
        assert name in families, f"{name} is not exported: {expr}"
    scrape = {"job", "namespace", "instance", "pod"}
    for group in BY.findall(expr):
        for label in (x.strip() for x in group.split(",")):
            assert any(label in families[n] for n in used) or label in scrape, f"no {label} label: {expr}"


def test_every_alert_reads_exported_families_and_labels() -> None:
    families = exported()
    for rule in alert_rules(selector("j", "ns")):
        if "nova_operator_" in rule["expr"]:
            check(rule["expr"], families)


def test_every_panel_reads_exported_families_and_labels() -> None:
    families = exported()
    for _, expr in panel_queries(dashboard()):
        check(expr, families)


def test_the_check_catches_unknown_families_and_labels() -> None:
    families = exported()
    with pytest.raises(AssertionError, match="not exported"):
        check("sum by (controller) (rate(nova_operator_controller_reconciles_total[5m]))", families)
    with pytest.raises(AssertionError, match="no verb label"):
        check("sum by (verb) (rate(nova_operator_controller_reconcile_total[5m]))", families)
