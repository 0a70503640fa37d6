"""The kubelet stand-in's environment: $(VAR) expansion, envFrom/env order, references, errors."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from simcluster.realtier.kubelet import envvars, quantity

JSON = dict[str, Any]


class Objects:
    def __init__(
        self, configmaps: dict[str, JSON] | None = None, secrets: dict[str, JSON] | None = None
    ) -> None:
        self.cms, self.secrets = configmaps or {}, secrets or {}

    def configmap(self, name: str) -> JSON | None:
        return self.cms.get(name)

    def secret(self, name: str) -> JSON | None:
        return self.secrets.get(name)


def secret(**data: str) -> JSON:
    return {
        "kind": "Secret",
        "type": "Opaque",
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def pod(*containers: JSON, **status: str) -> JSON:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u-1", "labels": {"b": "2", "a": "x y"}},
        "spec": {"nodeName": "n1", "containers": list(containers)},
        "status": status,
    }


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("$(A)-$(B)", "1-two"),
        ("$(MISSING)", "$(MISSING)"),
        ("$$(A)", "$(A)"),
        ("$$$(A)", "$1"),
        ("a$b", "a$b"),
        ("$(A", "$(A"),
        ("end$", "end$"),
    ],
)
def test_expand_follows_kubernetes_rules(text: str, want: str) -> None:
    assert envvars.expand(text, {"A": "1", "B": "two"}) == want


def test_env_order_envfrom_then_env_each_value_sees_earlier_ones() -> None:
    c = {
        "name": "c",
        "envFrom": [{"configMapRef": {"name": "cm"}, "prefix": "CM_"}, {"secretRef": {"name": "s"}}],
        "env": [
            {"name": "HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "URL", "value": "http://$(HOST):$(CM_port)/$(LATER)"},
            {"name": "LATER", "value": "x"},
            {"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "s", "key": "password"}}},
        ],
    }
    objects = Objects(
        {"cm": {"data": {"port": "8774", "bad-name!": "skipped"}}}, {"s": secret(password="pw")}
    )
    env = envvars.build(pod(c, podIP="10.244.1.5"), c, objects, {}, base={"PATH": "/bin"})
    assert env == {
        "PATH": "/bin",
        "CM_port": "8774",
        "password": "pw",
        "HOST": "10.244.1.5",
        "URL": "http://10.244.1.5:8774/$(LATER)",
        "LATER": "x",
        "PASS": "pw",
    }


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "gone", "key": "k"}}}],
            'secret "gone" not found',
        ),
        (
            [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "nokey"}}}],
            "couldn't find key nokey in Secret ns/s",
        ),
        (
            [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}}],
            'configmap "cm" not found',
        ),
    ],
)
def test_missing_reference_is_a_config_error(env: list[JSON], message: str) -> None:
    c = {"name": "c", "env": env}
    with pytest.raises(envvars.ConfigError, match=message):
        envvars.build(pod(c), c, Objects(secrets={"s": secret(k="v")}), {})


def test_optional_references_are_skipped() -> None:
    c = {
        "name": "c",
        "envFrom": [{"configMapRef": {"name": "gone", "optional": True}}],
        "env": [
            {"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "nokey", "optional": True}}},
            {"name": "Y", "valueFrom": {"configMapKeyRef": {"name": "gone", "key": "k", "optional": True}}},
        ],
    }
    assert envvars.build(pod(c), c, Objects(secrets={"s": secret(k="v")}), {}) == {}


def test_field_and_resource_refs() -> None:
    c = {
        "name": "c",
        "resources": {"limits": {"memory": "1Gi"}, "requests": {"cpu": "250m"}},
        "env": [
            {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "LABEL", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['a']"}}},
            {
                "name": "MEM_MI",
                "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}},
            },
            {"name": "CPU_LIMIT", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
            {
                "name": "CPU_REQ_M",
                "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu", "divisor": "1m"}},
            },
            {"name": "CPU_REQ", "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu"}}},
        ],
    }
    env = envvars.build(pod(c), c, Objects(), {"cpu": "8", "memory": "32Gi"})
    assert env == {
        "NAME": "p",
        "NODE": "n1",
        "LABEL": "x y",
        "MEM_MI": "1024",
        "CPU_LIMIT": "8",  # no limit: the node's allocatable
        "CPU_REQ_M": "250",
        "CPU_REQ": "1",  # rounded up
    }


def test_argv_command_args_and_image_defaults() -> None:
    env = {"A": "1"}
    assert envvars.argv({"command": ["sh", "-c"], "args": ["echo $(A)"]}, env, ["ep"], ["cmd"]) == [
        "sh",
        "-c",
        "echo 1",
    ]
    assert envvars.argv({"args": ["$(A)"]}, env, ["ep"], ["cmd"]) == ["ep", "1"]
    assert envvars.argv({}, env, ["ep"], ["cmd"]) == ["ep", "cmd"]


def test_references_collects_env_and_volume_sources() -> None:
    spec_pod = {
        "spec": {
            "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "s1"}}]}],
            "containers": [
                {
                    "name": "c",
                    "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "c1", "key": "k"}}}],
                }
            ],
            "volumes": [
                {"name": "a", "configMap": {"name": "c2"}},
                {"name": "b", "secret": {"secretName": "s2"}},
                {
                    "name": "p",
                    "projected": {"sources": [{"configMap": {"name": "c3"}}, {"secret": {"name": "s3"}}]},
                },
            ],
        }
    }
    assert envvars.references(spec_pod) == ({"c1", "c2", "c3"}, {"s1", "s2", "s3"})


@pytest.mark.parametrize(
    ("text", "value"), [("500m", 0.5), ("1Gi", 2**30), ("2k", 2000), ("1e3", 1000), ("3", 3)]
)
def test_quantities(text: str, value: float) -> None:
    assert quantity.parse(text) == value


def test_bad_quantity_is_refused() -> None:
    with pytest.raises(ValueError, match="not a quantity"):
        quantity.parse("12Q")
