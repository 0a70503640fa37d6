"""config/ and charts/nova-operator/ are what nova_operator.install generates; verify catches chart drift."""

from __future__ import annotations

import json
import pathlib

from nova_operator import manifests
from nova_operator.install.chart import values_schema
from nova_operator.install.rbac import operator_rules
from nova_operator.kube.resources import LEASES


def test_committed_config_and_chart_are_current(repo_root: pathlib.Path) -> None:
    assert manifests.verify(repo_root / "config", repo_root / "charts" / "nova-operator") == []


def test_verify_reports_a_changed_missing_or_extra_chart_file(tmp_path: pathlib.Path) -> None:
    config, chart = tmp_path / "config", tmp_path / "chart"
    manifests.write(config, chart)
    assert manifests.verify(config, chart) == []
    schema = chart / "values.schema.json"
    schema.write_text(
        schema.read_text().replace('"additionalProperties": false', '"additionalProperties": true', 1)
    )
    (chart / "templates" / "extra.yaml").write_text("kind: Nothing\n")
    (chart / "templates" / "pdb.yaml").unlink()
    diffs = "".join(manifests.verify(config, chart))
    assert f"+++ {schema} (generated)" in diffs
    assert f"{chart / 'templates' / 'extra.yaml'}: not generated from the code" in diffs
    assert f"+++ {chart / 'templates' / 'pdb.yaml'} (generated)" in diffs
    assert manifests.main(["write", str(config), str(chart)]) == 0
    assert manifests.verify(config, chart) == []
    assert not (chart / "templates" / "extra.yaml").exists()


def test_every_object_level_of_the_values_refuses_unknown_keys() -> None:
    def walk(node: dict[str, object], path: str) -> None:
        if node.get("type") == "object" and "properties" in node:
            assert node.get("additionalProperties") is False, path
            for key, child in node["properties"].items():  # type: ignore[attr-defined]
                walk(child, f"{path}.{key}")

    schema = values_schema()
    walk(schema, "values")
    assert json.loads(json.dumps(schema))["properties"]["global"] == {"type": "object"}


def test_the_lease_is_granted_only_in_the_operator_namespace() -> None:
    rules = operator_rules()
    assert {r for rule in rules.leader_election for r in rule["resources"]} == {LEASES.plural}
    assert LEASES.plural not in {r for rule in rules.cluster_wide for r in rule["resources"]}
