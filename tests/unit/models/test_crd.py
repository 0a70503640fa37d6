"""The CRD generator: config/crd/ is what the models generate, and the CRDs have the contract's shape."""

from __future__ import annotations

import pathlib
from typing import Annotated, Any, Literal

import pydantic
import pytest
import yaml
from pydantic import Field

from nova_operator.models import crd
from nova_operator.models._schema import CRDModel, Rule, Schema

REPO = pathlib.Path(__file__).resolve().parents[3]


def _crd(plural: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(crd.render_crds()[f"nova.openstack.c5c3.io_{plural}.yaml"])
    return doc


def _version(plural: str) -> dict[str, Any]:
    version: dict[str, Any] = _crd(plural)["spec"]["versions"][0]
    return version


def test_config_crd_holds_exactly_what_the_models_generate() -> None:
    on_disk = {p.name: p.read_text() for p in (REPO / "config" / "crd").glob("nova.openstack.c5c3.io_*.yaml")}
    assert on_disk == crd.render_crds()


def test_render_is_deterministic() -> None:
    assert crd.render_crds() == crd.render_crds()


_READY = ("Ready", "string", ".status.conditions[?(@.type=='Ready')].status", 0)
_REASON = ("Reason", "string", ".status.conditions[?(@.type=='Ready')].reason", 0)
_AGE = ("Age", "date", ".metadata.creationTimestamp", 0)


@pytest.mark.parametrize(
    ("plural", "kind", "singular", "short", "columns"),
    [
        (
            "novas",
            "Nova",
            "nova",
            ["nv"],
            [
                _READY,
                _REASON,
                ("Release", "string", ".status.installedRelease", 0),
                ("Endpoint", "string", ".status.endpoint", 0),
                ("Up", "integer", ".status.services.up", 0),
                ("Down", "integer", ".status.services.down", 0),
                _AGE,
                ("Phase", "string", ".status.upgradePhase", 1),
                ("Target", "string", ".status.targetRelease", 1),
            ],
        ),
        (
            "novacomputes",
            "NovaCompute",
            "novacompute",
            ["nvc"],
            [
                _READY,
                _REASON,
                ("Desired", "integer", ".status.desiredNumberScheduled", 0),
                ("Ready-Pods", "integer", ".status.numberReady", 0),
                _AGE,
                ("Image", "string", ".status.installedImage", 1),
            ],
        ),
    ],
)
def test_identity_printer_columns_and_status_subresource(
    plural: str, kind: str, singular: str, short: list[str], columns: list[tuple[str, str, str, int]]
) -> None:
    doc = _crd(plural)
    assert doc["metadata"]["name"] == f"{plural}.nova.openstack.c5c3.io"
    assert doc["spec"]["group"] == "nova.openstack.c5c3.io"
    assert doc["spec"]["scope"] == "Namespaced"
    assert doc["spec"]["names"] == {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": plural,
        "singular": singular,
        "shortNames": short,
        "categories": ["openstack"],
    }
    (version,) = doc["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    printed = version["additionalPrinterColumns"]
    assert [(c["name"], c["type"], c["jsonPath"], c.get("priority", 0)) for c in printed] == columns
    for column in printed:
        # a name with a blank splits into two headers for `awk` and `kubectl get | column`
        assert " " not in column["name"], column
        assert column["description"].strip(), column


def test_required_spec_fields() -> None:
    nova = _version("novas")["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert nova["required"] == [
        "apiDatabase",
        "cache",
        "database",
        "image",
        "keystoneEndpoint",
        "messaging",
        "metadata",
        "openStackRelease",
        "serviceUser",
    ]
    compute = _version("novacomputes")["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert compute["required"] == ["nodeSelector", "novaRef"]
    assert compute["properties"]["nodeSelector"]["minProperties"] == 1


def test_conditions_are_a_list_map_keyed_by_type() -> None:
    for plural in ("novas", "novacomputes"):
        conditions = _version(plural)["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"][
            "conditions"
        ]
        assert conditions["x-kubernetes-list-type"] == "map"
        assert conditions["x-kubernetes-list-map-keys"] == ["type"]
        assert conditions["items"]["required"] == [
            "lastTransitionTime",
            "message",
            "reason",
            "status",
            "type",
        ]


def test_schema_defaults_leave_nil_representable_where_the_contract_says_so() -> None:
    spec = _version("novas")["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    deployment = spec["api"]["properties"]["deployment"]["properties"]
    assert deployment["replicas"]["default"] == 3
    for field in ("terminationGracePeriodSeconds", "preStopSleepSeconds"):
        assert "default" not in deployment[field]
    for block in (
        "dbArchive",
        "jobs",
        "gateway",
        "networkPolicy",
        "autoscaling",
        "remoteCompute",
        "secretStoreRef",
    ):
        assert "default" not in spec[block]
    assert "default" not in spec["consoleProxy"]["properties"]["deployment"]
    assert (
        spec["scheduler"]["properties"]["deployment"]["properties"]["terminationGracePeriodSeconds"][
            "default"
        ]
        == 200
    )
    assert spec["apiDatabase"]["properties"]["clusterRef"]["x-kubernetes-map-type"] == "atomic"
    assert spec["apiDatabase"]["properties"]["clusterRef"]["properties"]["name"]["default"] == ""


def test_out_of_scope_fields_stay_out() -> None:
    text = "".join(crd.render_crds().values())
    assert "targetClusterRef" not in text
    assert "verticalAutoscaling" not in text


def _walk_schemas(schema: dict[str, Any]) -> list[dict[str, Any]]:
    out = [schema]
    for sub in schema.get("properties", {}).values():
        out += _walk_schemas(sub)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            out += _walk_schemas(schema[key])
    return out


def test_schema_is_structural_every_node_has_a_type_or_is_int_or_string() -> None:
    for plural in ("novas", "novacomputes"):
        for node in _walk_schemas(_version(plural)["schema"]["openAPIV3Schema"]):
            assert "type" in node or node.get("x-kubernetes-int-or-string"), node
            assert not ({"anyOf", "oneOf", "allOf", "$ref"} & node.keys()), node


def _kind_with_spec(spec_type: Any) -> crd.Kind:
    model = pydantic.create_model(
        "Probe",
        __base__=CRDModel,
        spec=(spec_type, ...),
        status=(dict[str, str] | None, None),
    )
    return crd.Kind(model, "Probe", "probes", "probe", (), "probe")


def _spec_schema(spec_type: Any) -> dict[str, Any]:
    schema: dict[str, Any] = crd.crd_object(_kind_with_spec(spec_type))["spec"]["versions"][0]["schema"][
        "openAPIV3Schema"
    ]["properties"]["spec"]
    return schema


class _Defaults(CRDModel):
    __crd_rules__ = (Rule("self.a <= 5", "a must be at most 5"),)

    a: Annotated[int, Field(ge=1, le=9), Schema(format="int32")] = 3
    b: Annotated[list[Annotated[str, Field(min_length=1)]], Field(max_length=4)] | None = None
    c: Annotated[dict[str, int], Field(min_length=1)] | None = None
    d: Literal["x", "y"] = "x"
    e: Annotated[int | str, Schema(x_kubernetes_int_or_string=True)] | None = None


class _Child(_Defaults):
    __crd_rules__ = (Rule("self.d == 'x'", "d must be x"),)


def test_generator_maps_types_bounds_defaults_and_inherits_rules() -> None:
    schema = _spec_schema(_Child)
    assert schema["properties"]["a"] == {
        "type": "integer",
        "format": "int32",
        "minimum": 1,
        "maximum": 9,
        "default": 3,
    }
    assert schema["properties"]["b"] == {
        "type": "array",
        "maxItems": 4,
        "items": {"type": "string", "minLength": 1},
    }
    assert schema["properties"]["c"] == {
        "type": "object",
        "minProperties": 1,
        "additionalProperties": {"type": "integer"},
    }
    assert schema["properties"]["d"] == {"type": "string", "enum": ["x", "y"], "default": "x"}
    assert schema["properties"]["e"] == {"x-kubernetes-int-or-string": True}
    assert "required" not in schema
    assert [r["message"] for r in schema["x-kubernetes-validations"]] == [
        "a must be at most 5",
        "d must be x",
    ]


@pytest.mark.parametrize("bad", [set[str], dict[int, str], Literal[1, 2], float | str])
def test_generator_refuses_types_it_cannot_map(bad: Any) -> None:
    with pytest.raises(TypeError):
        _spec_schema(bad)


class _ObjectDefault(CRDModel):
    inner: _Defaults = pydantic.Field(default_factory=_Defaults)


class _SchemaObjectDefault(CRDModel):
    inner: Annotated[_Defaults, Schema(default={})] = pydantic.Field(default_factory=_Defaults)


def test_an_object_default_must_be_declared_for_the_schema() -> None:
    assert "default" not in _spec_schema(_ObjectDefault)["properties"]["inner"]
    assert _spec_schema(_SchemaObjectDefault)["properties"]["inner"]["default"] == {}


class _ListDefault(CRDModel):
    items: list[str] = ["a"]


def test_a_non_scalar_default_without_a_schema_default_is_refused() -> None:
    with pytest.raises(TypeError, match="Schema"):
        _spec_schema(_ListDefault)


def test_yaml_has_no_anchors_or_aliases() -> None:
    for text in crd.render_crds().values():
        assert "&id" not in text
        assert "*id" not in text


def _properties(schema: dict[str, Any], path: str) -> list[tuple[str, dict[str, Any]]]:
    """Every (path, schema) under ``properties``, at any depth (through items and map values)."""
    out: list[tuple[str, dict[str, Any]]] = []
    for name, sub in schema.get("properties", {}).items():
        out.append((f"{path}.{name}", sub))
        out += _properties(sub, f"{path}.{name}")
    for key, suffix in (("items", "[]"), ("additionalProperties", "{}")):
        if isinstance(schema.get(key), dict):
            out += _properties(schema[key], path + suffix)
    return out


@pytest.mark.parametrize("plural", ["novas", "novacomputes"])
def test_every_property_has_a_description(plural: str) -> None:
    root = _version(plural)["schema"]["openAPIV3Schema"]
    assert root["description"].strip()
    # metadata is the one exception: the API server refuses any key in it but name and documents
    # ObjectMeta itself (`kubectl explain nova.metadata`).
    properties = [p for p in _properties(root, plural) if not p[0].startswith(f"{plural}.metadata")]
    assert len(properties) >= 50
    missing = [path for path, sub in properties if not str(sub.get("description", "")).strip()]
    assert missing == [], f"{len(missing)} of {len(properties)} properties have no description"


class _Described(CRDModel):
    plain: str = "x"
    """One line."""
    wrapped: int | None = None
    """A docstring that runs
    over two lines."""
    bare: bool = False


def test_a_field_docstring_is_its_description_in_one_paragraph() -> None:
    properties = _spec_schema(_Described)["properties"]
    assert properties["plain"]["description"] == "One line."
    assert properties["wrapped"]["description"] == "A docstring that runs over two lines."
    assert "description" not in properties["bare"]


@pytest.mark.parametrize("plural", ["novas", "novacomputes"])
def test_extra_config_default_host_is_refused_by_a_cel_rule(plural: str) -> None:
    """[DEFAULT] host would give every replica one service host: the CRD refuses it, saying why."""
    extra = _version(plural)["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["extraConfig"]
    rules = [r for r in extra["x-kubernetes-validations"] if r.get("fieldPath") == "['DEFAULT']['host']"]
    assert len(rules) == 1, extra["x-kubernetes-validations"]
    (rule,) = rules
    assert rule["rule"] == "!('DEFAULT' in self) || !('host' in self['DEFAULT'])"
    assert rule["reason"] == "FieldValueForbidden"
    assert rule["message"].startswith("host is managed via ")
    if plural == "novas":
        assert "one shared host collapses the replicas of each role into one service row" in rule["message"]
