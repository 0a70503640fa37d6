"""spec.policy rendered (issue 38 item 3): policy.yaml and the policy.conf overlay in a ConfigMap of
their own, ``{name}-policy-<hash>``, mounted by the compute API and the metadata API only: a policy
change leaves the config ConfigMap (every role's and db-sync's) as it was."""

from __future__ import annotations

import dataclasses
from typing import Any

import yaml

from nova_operator.models.nova import Nova
from nova_operator.naming import Component
from nova_operator.renderers import novaconf, workload
from nova_operator.renderers.novaconf import ConfInputs

RULES = {
    "os_compute_api:servers:create": "role:admin",
    "os_compute_api:os-hypervisors:list": "role:admin or role:reader",
}


def _inputs(**changes: object) -> ConfInputs:
    inputs = ConfInputs(name="nova", namespace="openstack", keystone_endpoint="http://ks:5000/v3")
    return dataclasses.replace(inputs, **changes)  # type: ignore[arg-type]


def test_the_rules_are_rendered_into_policy_yaml_and_an_overlay_naming_it() -> None:
    data = novaconf.policy_data(_inputs(policy=tuple(sorted(RULES.items()))))
    assert yaml.safe_load(data["policy.yaml"]) == RULES
    assert data["policy.conf"] == "[oslo_policy]\npolicy_file = /etc/nova/policy-override/policy.yaml\n"
    assert sorted(data) == ["policy.conf", "policy.yaml"]


def test_a_check_string_oslo_policy_must_read_as_written_survives_yaml() -> None:
    awkward = {"a:b": "'quoted' or \"double\" and not role:x #tail", "c": "@", "d": "!", "e": ""}
    data = novaconf.policy_data(_inputs(policy=tuple(sorted(awkward.items()))))
    assert yaml.safe_load(data["policy.yaml"]) == awkward


def test_without_spec_policy_there_is_no_policy_file() -> None:
    assert novaconf.policy_data(_inputs()) == {}
    # an empty policy ConfigMap still renders a (empty) file: the overrides were removed on purpose
    assert yaml.safe_load(novaconf.policy_data(_inputs(policy=()))["policy.yaml"]) == {}


def test_a_policy_change_changes_the_policy_config_map_only(nova: Nova) -> None:
    """The config ConfigMap (whose name every role and db-sync mount) does not follow the policy."""
    one, other = (_inputs(policy=((name, check),)) for name, check in RULES.items())
    assert novaconf.config_data(one) == novaconf.config_data(other) == novaconf.config_data(_inputs())
    assert not {"policy.yaml", "policy.conf"} & set(novaconf.config_data(one))
    first = novaconf.policy_map(nova, novaconf.policy_data(one))
    second = novaconf.policy_map(nova, novaconf.policy_data(other))
    assert first["metadata"]["name"] != second["metadata"]["name"]
    assert first["metadata"]["name"].startswith(f"{nova.metadata.name}-policy-")
    assert first["metadata"]["labels"]["cobaltcore.c5c3.io/config-base"] == f"{nova.metadata.name}-policy"
    assert first["immutable"] is True


def _with_policy(nova: Nova, policy: dict[str, Any]) -> Nova:
    raw = nova.model_dump(by_alias=True, exclude_none=True)
    raw["spec"]["policy"] = policy
    return Nova.model_validate(raw)


def test_policy_rules_come_from_the_map_or_from_the_config_map_read(nova: Nova) -> None:
    assert novaconf.policy_rules(nova) is None
    mapped = _with_policy(nova, {"rules": RULES})
    assert novaconf.conf_inputs(mapped).policy == tuple(sorted(RULES.items()))
    referenced = _with_policy(nova, {"configMapRef": {"name": "nova-policy"}})
    assert referenced.spec.policy is not None
    assert referenced.spec.policy.config_map_ref is not None
    assert referenced.spec.policy.config_map_ref.key == "policy.yaml"
    assert novaconf.conf_inputs(referenced, policy_from_config_map={"x": "y"}).policy == (("x", "y"),)
    assert novaconf.conf_inputs(referenced).policy == ()


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    return dict(deployment["spec"]["template"]["spec"]["containers"][0])


def _mounted(deployment: dict[str, Any], volume: str = "config") -> list[str]:
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    found = next((v for v in volumes if v["name"] == volume), None)
    return [item["key"] for item in found["configMap"]["items"]] if found else []


def _files(deployment: dict[str, Any]) -> str:
    env = {e["name"]: e.get("value") for e in _container(deployment)["env"]}
    return str(env.get("OS_NOVA_CONFIG_FILES") or "")


def _template(deployment: dict[str, Any]) -> Any:
    return deployment["spec"]["template"]


def test_the_api_and_metadata_pods_alone_mount_the_policy_config_map(nova: Nova) -> None:
    with_policy = workload.WorkloadInputs(config_map="nova-config-1", policy_map="nova-policy-1")
    changed = workload.WorkloadInputs(config_map="nova-config-1", policy_map="nova-policy-2")
    without = workload.WorkloadInputs(config_map="nova-config-1")
    for role in (Component.API, Component.METADATA):
        rendered = workload.deployment(nova, role, with_policy)
        assert _mounted(rendered, "policy") == ["policy.conf", "policy.yaml"]
        mounts = {m["name"]: m["mountPath"] for m in _container(rendered)["volumeMounts"]}
        assert mounts["policy"] == "/etc/nova/policy-override"
        assert _files(rendered).endswith(";/etc/nova/policy-override/policy.conf")  # last: it wins
        assert not {"policy.conf", "policy.yaml"} & set(_mounted(rendered))
        assert _template(workload.deployment(nova, role, changed)) != _template(rendered)  # it rolls
        plain = workload.deployment(nova, role, without)
        assert _mounted(plain, "policy") == []
        assert "policy.conf" not in _files(plain)
    for role in (Component.SCHEDULER, Component.CONDUCTOR, Component.NOVNCPROXY):
        rendered = workload.deployment(nova, role, with_policy)
        assert _mounted(rendered, "policy") == []
        # a policy change leaves these pod templates as they are: no roll
        assert _template(workload.deployment(nova, role, changed)) == _template(rendered)
        assert _template(workload.deployment(nova, role, without)) == _template(rendered)
