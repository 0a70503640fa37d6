"""spec.policy rendered (issue 38 item 3): policy.yaml and the policy.conf overlay in the config
ConfigMap, read by the compute API and the metadata API only."""

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
    data = novaconf.config_data(_inputs(policy=tuple(sorted(RULES.items()))))
    assert yaml.safe_load(data["policy.yaml"]) == RULES
    assert data["policy.conf"] == "[oslo_policy]\npolicy_file = /etc/nova/nova.conf.d/policy.yaml\n"
    assert "oslo_policy" not in data["nova.conf"]  # the scheduler and the conductor never read it


def test_a_check_string_oslo_policy_must_read_as_written_survives_yaml() -> None:
    awkward = {"a:b": "'quoted' or \"double\" and not role:x #tail", "c": "@", "d": "!", "e": ""}
    data = novaconf.config_data(_inputs(policy=tuple(sorted(awkward.items()))))
    assert yaml.safe_load(data["policy.yaml"]) == awkward


def test_without_spec_policy_there_is_no_policy_file() -> None:
    assert not {"policy.yaml", "policy.conf"} & set(novaconf.config_data(_inputs()))
    # an empty policy ConfigMap still renders a (empty) file: the overrides were removed on purpose
    assert yaml.safe_load(novaconf.config_data(_inputs(policy=()))["policy.yaml"]) == {}


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


def _mounted(deployment: dict[str, Any]) -> list[str]:
    volume = next(v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "config")
    return [item["key"] for item in volume["configMap"]["items"]]


def _files(deployment: dict[str, Any]) -> str:
    env = {e["name"]: e.get("value") for e in _container(deployment)["env"]}
    return str(env.get("OS_NOVA_CONFIG_FILES") or "")


def test_the_api_and_metadata_pods_read_the_policy_when_their_config_map_carries_it(nova: Nova) -> None:
    keys = ("conductor.conf", "metadata.conf", "nova.conf", "novncproxy.conf", "policy.conf", "policy.yaml")
    with_policy = workload.WorkloadInputs(config_map="nova-config-1", config_keys=keys)
    without = workload.WorkloadInputs(config_map="nova-config-0", config_keys=keys[:4])
    for role in (Component.API, Component.METADATA):
        rendered = workload.deployment(nova, role, with_policy)
        assert {"policy.conf", "policy.yaml"} <= set(_mounted(rendered))
        assert _files(rendered).endswith(";policy.conf")  # read last: its policy_file wins
        plain = workload.deployment(nova, role, without)
        assert not {"policy.conf", "policy.yaml"} & set(_mounted(plain))
        assert "policy.conf" not in _files(plain)
    for role in (Component.SCHEDULER, Component.CONDUCTOR):
        assert not {"policy.conf", "policy.yaml"} & set(
            _mounted(workload.deployment(nova, role, with_policy))
        )
