"""``bench writes``' arithmetic: the CRD without its CEL rules, the count of rules, the budget line."""

from __future__ import annotations

import pathlib

import yaml
from bench import writes

CRD = pathlib.Path(__file__).resolve().parents[3] / "config" / "crd" / "nova.openstack.c5c3.io_novas.yaml"


def test_the_crd_without_cel_keeps_everything_else_and_no_stale_version() -> None:
    crd = yaml.safe_load(CRD.read_text())
    crd["metadata"]["resourceVersion"] = "42"
    stripped = writes.without_cel(crd)
    assert writes.cel_rules(crd) > 100  # the shipped CRD carries its rules
    assert writes.cel_rules(stripped) == 0
    assert "x-kubernetes-validations" not in yaml.safe_dump(stripped)
    assert stripped["metadata"] == {"name": crd["metadata"]["name"]}
    schema = stripped["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    original = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert schema["properties"].keys() == original["properties"].keys()


def test_rules_are_counted_at_every_depth() -> None:
    doc = {
        "x-kubernetes-validations": [{"rule": "a"}, {"rule": "b"}],
        "properties": {"x": {"items": [{"x-kubernetes-validations": [{"rule": "c"}]}]}},
    }
    assert writes.cel_rules(doc) == 3
    assert writes.cel_rules(writes.without_cel(doc)) == 0


def test_the_budget_is_one_create_two_patches_and_three_status_writes_per_nova() -> None:
    per_write = {"nova create": 8.0, "nova patch": 10.0, "nova status patch": 9.0, "configmap create": 99.0}
    assert writes.budget_seconds(per_write, 100) == (8.0 + 2 * 10.0 + 3 * 9.0) * 100 / 1000
    assert writes.budget_seconds(per_write, 0) == 0


def test_the_table_names_every_write_and_the_budget() -> None:
    found = {
        "novas": 100,
        "cel_rules": 131,
        "idle_ms_per_second": 14.0,
        "per_write_ms": {"nova create": 8.62, "configmap create": 1.35},
        "budget_seconds": 5.53,
        "budget_seconds_no_cel": 4.09,
    }
    text = writes.table(found)
    assert "| nova create | 8.62 |" in text
    assert "| configmap create | 1.35 |" in text
    assert "5.53 CPU-s" in text
    assert "4.09 without the CRD's 131 CEL rules" in text
