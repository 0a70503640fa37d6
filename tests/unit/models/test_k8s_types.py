"""The vendored Kubernetes schemas (nova_operator/data/k8s-types.json) and what the CRDs embed of them."""

from __future__ import annotations

import json
from typing import Any

import yaml
from k8sschema import vendor

from nova_operator.models import crd


def test_vendored_schemas_are_what_upstream_openapi_generates() -> None:
    # A stale file fails here; `python tools/k8sschema/vendor.py` rewrites it.
    assert vendor.OUT.read_text() == vendor.render()


def test_first_sentence_keeps_abbreviations_and_a_bare_required() -> None:
    assert vendor.first_sentence("Describes rules (e.g. co-locate this pod). More text.") == (
        "Describes rules (e.g. co-locate this pod)."
    )
    assert vendor.first_sentence("Required. A list of node selector terms. The terms are ORed.") == (
        "Required. A list of node selector terms."
    )


def _spec(plural: str) -> dict[str, Any]:
    doc = yaml.safe_load(crd.render_crds()[f"nova.openstack.c5c3.io_{plural}.yaml"])
    spec: dict[str, Any] = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec


def test_every_affinity_has_the_upstream_schema_not_preserve_unknown_fields() -> None:
    spec = _spec("novas")["properties"]
    blocks = [spec[b]["properties"]["deployment"] for b in ("api", "metadata", "scheduler", "conductor")]
    blocks += [spec["consoleProxy"]["properties"]["deployment"], spec["jobs"]]
    upstream = json.loads(vendor.OUT.read_text())["types"]["affinity"]
    for block in blocks:
        affinity = block["properties"]["affinity"]
        assert "x-kubernetes-preserve-unknown-fields" not in affinity
        assert affinity["description"]
        assert {k: v for k, v in affinity.items() if k != "description"} == upstream
    term = upstream["properties"]["podAntiAffinity"]["properties"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["items"]
    assert term["required"] == ["topologyKey"]
    assert term["properties"]["labelSelector"]["x-kubernetes-map-type"] == "atomic"


def test_each_crd_fits_a_client_side_kubectl_apply() -> None:
    # `kubectl apply` (client-side, what `make install` runs) copies the whole object into the
    # last-applied-configuration annotation, and the API server caps annotations at 256 KiB.
    for name, text in crd.render_crds().items():
        size = len(json.dumps(yaml.safe_load(text), separators=(",", ":")))
        assert size < 256 * 1024 - 8 * 1024, (name, size)
