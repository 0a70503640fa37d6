"""Every rendered Kubernetes object: schema-valid, pinned by goldens, free of secrets, deterministic."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import kubernetes_validate
import pytest
import yaml

from nova_operator.models.nova import Nova

Render = Callable[[Nova], dict[str, Any]]
K8S_VERSION = "1.37"
# Custom resources kubernetes-validate has no schema for (Gateway API, mariadb-operator).
CRD_KINDS = {"HTTPRoute", "Database", "User", "Grant"}


def test_every_core_object_passes_kubernetes_validate(nova: Nova, render_all: Render) -> None:
    objects = render_all(nova)
    checked = 0
    for key, obj in objects.items():
        if obj["kind"] in CRD_KINDS:
            continue
        try:
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as err:  # pragma: no cover - the failure message
            pytest.fail(f"{key}: {err.message} at {list(err.path)}")
        checked += 1
    assert checked >= 19


def test_custom_resources_carry_their_group_versions(nova: Nova, render_all: Render) -> None:
    for obj in render_all(nova).values():
        if obj["kind"] == "HTTPRoute":
            assert obj["apiVersion"] == "gateway.networking.k8s.io/v1"
        elif obj["kind"] in CRD_KINDS:
            assert obj["apiVersion"] == "k8s.mariadb.com/v1alpha1"


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (scripts, INI files) as literal blocks, so a golden diff reads like the file."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value and not any(line != line.rstrip() for line in value.splitlines()) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def _dump(obj: dict[str, Any]) -> str:
    text = yaml.dump(obj, Dumper=_Dumper, sort_keys=False, width=1000, default_flow_style=False)
    assert yaml.safe_load(text) == obj
    return text


def test_every_object_matches_its_pinned_golden(
    nova: Nova, sample: str, render_all: Render, golden: Callable[[str, str], None]
) -> None:
    for key, obj in render_all(nova).items():
        kind, name = key.split("/", 1)
        if kind == "ConfigMap":
            name = "config"  # its name carries the content hash, pinned by the novaconf goldens
        golden(f"objects/{sample}/{kind}-{name}.yaml", _dump(obj))


def _forms(value: str) -> set[str]:
    forms = {value, quote(value, safe=""), quote(value, safe="-_.~$&+,;="), json.dumps(value)[1:-1]}
    forms.add(base64.b64encode(value.encode()).decode())
    return {f for f in forms if len(f) >= 6}


_CREDENTIAL_KEYS = {"connection", "transport_url", "password", "metadata_proxy_shared_secret", "ca.crt"}


def _needles(objects: dict[str, Any], secret_values: dict[str, str]) -> set[str]:
    """The referenced Secrets' values plus every credential the derived Secrets hold (DSNs, URLs)."""
    needles = set(secret_values.values())
    for obj in objects.values():
        if obj["kind"] == "Secret":
            for key, encoded in obj["data"].items():
                if key in _CREDENTIAL_KEYS:
                    needles.add(base64.b64decode(encoded).decode())
    return needles


def _leaks(objects: dict[str, Any], needles: set[str]) -> list[str]:
    """``<object>: <needle>`` for every non-Secret object that carries a needle in any form."""
    found = []
    for key, obj in objects.items():
        if obj["kind"] == "Secret":
            continue
        haystacks = [json.dumps(obj), _dump(obj), *_strings(obj)]  # every script and argument as is
        for needle in sorted(needles):
            if any(form in haystack for form in _forms(needle) for haystack in haystacks):
                found.append(f"{key}: {needle[:12]}...")
    return found


def test_no_config_script_or_job_carries_a_secret_value(
    nova: Nova, render_all: Render, secret_values: dict[str, str]
) -> None:
    objects = render_all(nova)
    needles = _needles(objects, secret_values)
    assert len(needles) > len(secret_values)  # the derived DSNs and URLs are searched for too
    assert sum(o["kind"] != "Secret" for o in objects.values()) >= 15
    assert _leaks(objects, needles) == []


def test_the_leak_scan_would_see_a_leak(
    nova: Nova, render_all: Render, secret_values: dict[str, str]
) -> None:
    objects = render_all(nova)
    needles = _needles(objects, secret_values)
    [cm_key] = [k for k in objects if k.startswith("ConfigMap/")]
    leaky = copy.deepcopy(objects)
    leaky[cm_key]["data"]["nova.conf"] += (
        f"[neutron]\nmetadata_proxy_shared_secret = {secret_values['metadata_secret']}\n"
    )
    job = leaky["Job/nova-db-sync"]["spec"]["template"]["spec"]["containers"][0]
    dsn = base64.b64decode(objects["Secret/nova-db-connection"]["data"]["connection"]).decode()
    job["command"][-1] += f"\nnova-manage cell_v2 create_cell --database_connection '{dsn}'"
    assert len(_leaks(leaky, needles)) >= 3  # the shared secret, the DSN and the password inside it


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_renderers_are_deterministic_and_do_not_mutate_the_cr(nova: Nova, render_all: Render) -> None:
    before = copy.deepcopy(nova.model_dump(by_alias=True))
    first = json.dumps(render_all(nova), sort_keys=True)
    second = json.dumps(render_all(nova), sort_keys=True)
    assert first == second
    assert nova.model_dump(by_alias=True) == before
