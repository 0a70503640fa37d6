"""config/ and charts/nova-operator/ are what nova_operator.install generates; verify catches chart drift."""

from __future__ import annotations

import json
import pathlib

import jsonschema
import pytest
import yaml

from nova_operator import cli
from nova_operator.install import manifests
from nova_operator.install.chart import VALUES, chart_readme, values_schema
from nova_operator.install.rbac import operator_rules
from nova_operator.kube.resources import LEASES
from nova_operator.runtime.health import parse_address


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
    glob = json.loads(json.dumps(schema))["properties"]["global"]
    assert glob.pop("description")
    assert glob == {"type": "object"}


def test_the_lease_is_granted_only_in_the_operator_namespace() -> None:
    rules = operator_rules()
    assert {r for rule in rules.leader_election for r in rule["resources"]} == {LEASES.plural}
    assert LEASES.plural not in {r for rule in rules.cluster_wide for r in rule["resources"]}


def test_metrics_listen_on_the_pod_ip_only(repo_root: pathlib.Path) -> None:
    """Issue 26 item 9: /metrics is bound to the pod's IP (the kubelet expands $(POD_IP) from the
    downward API), not to every address of the pod; the probes stay where the kubelet reaches them."""
    docs = list(yaml.safe_load_all((repo_root / "config" / "manager" / "manager.yaml").read_text()))
    (deployment,) = [d for d in docs if d and d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("valueFrom") for e in container["env"]}
    assert env["POD_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert "--metrics-bind-address=$(POD_IP):8080" in container["args"]
    expanded = [a.replace("$(POD_IP)", "10.244.1.7") for a in container["args"]]
    settings = cli.parse_settings(expanded)
    assert parse_address(settings.servers.metrics_bind_address) == ("10.244.1.7", 8080)
    helpers = (repo_root / "charts" / "nova-operator" / "templates" / "_helpers.tpl").read_text()
    assert "- --metrics-bind-address=$(POD_IP):8080\n" in helpers


def test_every_value_has_a_description_and_the_pod_values_default_to_todays_deployment(
    repo_root: pathlib.Path,
) -> None:
    """Issue 40: the schema describes each top-level value; the pod's settings moved into values keep
    what the Deployment rendered before (the kustomize Deployment still carries them literally)."""
    schema = values_schema()
    undescribed = [k for k, node in schema["properties"].items() if not node.get("description")]
    assert undescribed == []
    values = yaml.safe_load((repo_root / "charts" / "nova-operator" / "values.yaml").read_text())
    docs = list(yaml.safe_load_all((repo_root / "config" / "manager" / "manager.yaml").read_text()))
    (deployment,) = [d for d in docs if d and d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert values["podSecurityContext"] == pod["securityContext"]
    assert values["securityContext"] == pod["containers"][0]["securityContext"]
    assert values["resources"] == pod["containers"][0]["resources"]
    assert values["podSecurityContext"]["runAsNonRoot"] is True
    assert values["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert (values["extraEnv"], values["extraVolumes"], values["extraVolumeMounts"]) == ([], [], [])


@pytest.mark.parametrize(
    ("key", "wrong"),
    [
        ("podSecurityContext", "restricted"),
        ("securityContext", True),
        ("resources", "1Gi"),
        ("nodeSelector", {"zone": 1}),
        ("tolerations", {"key": "ops"}),
        ("affinity", []),
        ("priorityClassName", 7),
        ("imagePullSecrets", ["regcred"]),
        ("extraEnv", {"HTTPS_PROXY": "http://proxy:3128"}),
        ("extraEnv", [{"value": "no name"}]),
        ("extraVolumes", [{"configMap": {"name": "site-ca"}}]),
        ("extraVolumeMounts", [{"name": "ca"}]),
    ],
)
def test_the_values_schema_refuses_a_wrong_type_of_each_pod_value(key: str, wrong: object) -> None:
    validator = jsonschema.Draft7Validator(values_schema())
    assert validator.is_valid({}), "the defaults alone are valid"
    assert not validator.is_valid({key: wrong})


def test_the_values_schema_takes_the_kubernetes_shapes_of_the_pod_values() -> None:
    validator = jsonschema.Draft7Validator(values_schema())
    good = {
        "podSecurityContext": {"runAsNonRoot": True, "fsGroup": 1001},
        "securityContext": {"readOnlyRootFilesystem": True},
        "extraEnv": [
            {"name": "A", "value": "b"},
            {"name": "C", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        ],
        "extraVolumes": [{"name": "ca", "configMap": {"name": "site-ca"}}],
        "extraVolumeMounts": [{"name": "ca", "mountPath": "/etc/site-ca"}],
    }
    assert list(validator.iter_errors(good)) == []


def test_the_chart_readme_lists_every_value_with_its_default_and_description() -> None:
    readme = chart_readme()
    schema = values_schema()
    for key, node in schema["properties"].items():
        if key == "global":
            continue
        (row,) = [line for line in readme.splitlines() if line.startswith(f"| `{key}` |")]
        assert node["description"] in row
        assert json.dumps(VALUES[key], separators=(", ", ": ")) in row.replace("\\|", "|")
