"""Models -> CustomResourceDefinition YAML.

``render_crds()`` walks the pydantic types and emits a structural OpenAPI v3 schema:

- field names are the models' camelCase aliases; ``required`` lists fields without a default;
- ``str``/``int``/``bool``, ``Literal`` (enum), ``list``, ``dict[str, X]`` (additionalProperties)
  and nested models map one to one; ``X | None`` is an optional ``X``;
- ``Field`` bounds become ``minLength``/``maxLength``, ``minItems``/``maxItems``,
  ``minProperties``/``maxProperties`` (by the schema's type), ``minimum``/``maximum``, ``pattern``;
- a scalar model default is the schema default; an object default is declared with
  ``Schema(default=...)``; ``None`` has no schema default;
- ``Rule`` markers and a model's ``__crd_rules__`` become ``x-kubernetes-validations``;
  ``Schema`` markers add any other OpenAPI key;
- a field's docstring is its ``description`` (what ``kubectl explain`` prints); a test holds
  every property to having one;
- a ``K8sType`` marker embeds a Kubernetes type vendored from upstream's OpenAPI
  (``nova_operator/data/k8s-types.json``, written by ``tools/k8sschema/vendor.py``).

Each kind declares its printer columns (``priority`` 1: only with ``-o wide``), short names and
the ``openstack`` category (``kubectl get openstack``).

``make manifests`` writes the result to ``config/crd/`` (``nova_operator.install.manifests``).
"""

from __future__ import annotations

import copy
import functools
import importlib.resources
import json
import types
import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import annotated_types
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from nova_operator.models._schema import K8sType, Rule, Schema, SchemaFrom
from nova_operator.models.nova import Nova
from nova_operator.models.novacompute import NovaCompute

GROUP = "nova.openstack.c5c3.io"
VERSION = "v1alpha1"
HEADER = "# Generated from nova_operator/models by `make manifests`; do not edit.\n"


CATEGORY = "openstack"  # `kubectl get openstack` lists every Nova and NovaCompute


class Column(NamedTuple):
    """One ``additionalPrinterColumns`` entry; priority 1 shows only with ``kubectl get -o wide``."""

    name: str
    type: str
    json_path: str
    description: str
    priority: int = 0


@dataclass(frozen=True)
class Kind:
    model: type[BaseModel]
    kind: str
    plural: str
    singular: str
    printer_columns: tuple[Column, ...]
    description: str
    short_names: tuple[str, ...] = ()

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{GROUP}"

    @property
    def file_name(self) -> str:
        return f"{GROUP}_{self.plural}.yaml"


_READY = Column(
    "Ready", "string", ".status.conditions[?(@.type=='Ready')].status", "Status of the Ready condition."
)
_REASON = Column(
    "Reason",
    "string",
    ".status.conditions[?(@.type=='Ready')].reason",
    "Reason of the Ready condition: which step holds the object back.",
)
_AGE = Column("Age", "date", ".metadata.creationTimestamp", "Time since the object was created.")

KINDS: tuple[Kind, ...] = (
    Kind(
        Nova,
        "Nova",
        "novas",
        "nova",
        (
            _READY,
            _REASON,
            Column("Release", "string", ".status.installedRelease", "The release whose schema is installed."),
            Column("Endpoint", "string", ".status.endpoint", "URL of the compute API."),
            Column(
                "Up", "integer", ".status.services.up", "Service records Nova reports up (its last look)."
            ),
            Column(
                "Down",
                "integer",
                ".status.services.down",
                "Service records Nova reports down (its last look).",
            ),
            _AGE,
            Column(
                "Phase", "string", ".status.upgradePhase", "Phase of a running release upgrade.", priority=1
            ),
            Column(
                "Target", "string", ".status.targetRelease", "The release an upgrade moves to.", priority=1
            ),
        ),
        "Nova runs the OpenStack compute control plane: the compute API, the metadata API, the "
        "scheduler, the conductor and the noVNC console proxy, and publishes the compute contract "
        "its NovaCompute pools join.",
        short_names=("nv",),
    ),
    Kind(
        NovaCompute,
        "NovaCompute",
        "novacomputes",
        "novacompute",
        (
            _READY,
            _REASON,
            Column(
                "Desired", "integer", ".status.desiredNumberScheduled", "Nodes that should run nova-compute."
            ),
            Column("Ready-Pods", "integer", ".status.numberReady", "Nodes whose nova-compute pod is ready."),
            _AGE,
            Column("Image", "string", ".status.installedImage", "The image the DaemonSet runs.", priority=1),
        ),
        "NovaCompute runs nova-compute on one node pool and joins it to one Nova in the same "
        "namespace; a node that leaves the pool is drained before its pod goes.",
        short_names=("nvc",),
    ),
)


# --- schema walk ---------------------------------------------------------------------------


def _split_annotated(tp: Any) -> tuple[Any, list[Any]]:
    """Strip ``Annotated`` and ``| None`` layers; return the bare type and all metadata (outer first)."""
    metadata: list[Any] = []
    while True:
        if typing.get_origin(tp) is typing.Annotated:
            metadata.extend(tp.__metadata__)
            tp = tp.__origin__
            continue
        if typing.get_origin(tp) in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) == 1:
                tp = args[0]
                continue
        return tp, metadata


def _flatten(metadata: Sequence[Any]) -> Iterator[Any]:
    for item in metadata:
        if isinstance(item, FieldInfo):
            yield from _flatten(item.metadata)
        else:
            yield item


def _constraints(schema: dict[str, Any], metadata: Sequence[Any]) -> None:
    kind = schema.get("type")
    size_key = {"string": "Length", "array": "Items", "object": "Properties"}.get(kind or "", "Length")
    rules: list[dict[str, Any]] = []
    for item in _flatten(metadata):
        if isinstance(item, annotated_types.MinLen):
            schema[f"min{size_key}"] = item.min_length
        elif isinstance(item, annotated_types.MaxLen):
            schema[f"max{size_key}"] = item.max_length
        elif isinstance(item, annotated_types.Ge):
            schema["minimum"] = item.ge
        elif isinstance(item, annotated_types.Le):
            schema["maximum"] = item.le
        elif isinstance(item, Rule):
            rules.append(item.to_openapi())
        elif isinstance(item, Schema):
            schema.update(item.keys)
        elif getattr(item, "pattern", None) is not None:
            schema["pattern"] = item.pattern
    if rules:
        schema["x-kubernetes-validations"] = schema.get("x-kubernetes-validations", []) + rules


def _model_rules(model: type[BaseModel]) -> list[dict[str, Any]]:
    seen: list[Rule] = []
    for klass in reversed(model.__mro__):
        for rule in klass.__dict__.get("__crd_rules__", ()):
            if rule not in seen:
                seen.append(rule)
    return [r.to_openapi() for r in seen]


def _model_schema(model: type[BaseModel]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, field in model.model_fields.items():
        alias = field.alias or name
        properties[alias] = _field_schema(field)
        if field.description:
            properties[alias]["description"] = _one_paragraph(field.description)
        if field.is_required():
            required.append(alias)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = sorted(required)
    extra = getattr(model, "__crd_schema__", None)
    if extra is not None:
        schema.update(extra.keys)
    rules = _model_rules(model)
    if rules:
        schema["x-kubernetes-validations"] = rules
    return schema


def _one_paragraph(text: str) -> str:
    """A docstring as one line: `kubectl explain` wraps descriptions itself."""
    return " ".join(text.split())


def _field_schema(field: FieldInfo) -> dict[str, Any]:
    schema = _type_schema(field.annotation, list(field.metadata))
    default = field.default
    if "default" not in schema and default is not PydanticUndefined and default is not None:
        if not isinstance(default, str | int | bool):
            raise TypeError(f"declare the schema default of {field!r} with Schema(default=...)")
        schema["default"] = default
    return schema


@functools.cache
def _k8s_types() -> dict[str, dict[str, Any]]:
    """The vendored upstream schemas (``tools/k8sschema/vendor.py``), by name."""
    text = importlib.resources.files("nova_operator").joinpath("data/k8s-types.json").read_text()
    types_: dict[str, dict[str, Any]] = json.loads(text)["types"]
    return types_


def _type_schema(tp: Any, outer: list[Any]) -> dict[str, Any]:
    bare, inner = _split_annotated(tp)
    metadata = [*inner, *outer]
    markers = {k: v for m in _flatten(metadata) if isinstance(m, Schema) for k, v in m.keys.items()}
    schema: dict[str, Any]
    origin = typing.get_origin(bare)
    typed_as = [m.model for m in _flatten(metadata) if isinstance(m, SchemaFrom)]
    vendored = [m.name for m in _flatten(metadata) if isinstance(m, K8sType)]
    if vendored:
        schema = copy.deepcopy(_k8s_types()[vendored[-1]])
    elif typed_as:
        schema = _model_schema(typed_as[-1])
    elif markers.get("x-kubernetes-int-or-string"):
        schema = {}
    elif markers.get("x-kubernetes-preserve-unknown-fields"):
        schema = {"type": "object"}
    elif origin is Literal:
        values = list(typing.get_args(bare))
        if not all(isinstance(v, str) for v in values):
            raise TypeError(f"only string enums are supported: {bare!r}")
        schema = {"type": "string", "enum": values}
    elif bare is str:
        schema = {"type": "string"}
    elif bare is bool:
        schema = {"type": "boolean"}
    elif bare is int:
        schema = {"type": "integer"}
    elif bare is float:
        schema = {"type": "number"}
    elif origin is list:
        (item,) = typing.get_args(bare)
        schema = {"type": "array", "items": _type_schema(item, [])}
    elif origin is dict:
        key, value = typing.get_args(bare)
        if key is not str:
            raise TypeError(f"map keys must be strings: {bare!r}")
        schema = {"type": "object", "additionalProperties": _type_schema(value, [])}
    elif isinstance(bare, type) and issubclass(bare, BaseModel):
        schema = _model_schema(bare)
    else:
        raise TypeError(f"no OpenAPI mapping for {bare!r}")
    _constraints(schema, metadata)
    return schema


# --- CRDs ----------------------------------------------------------------------------------


def _root_schema(model: type[BaseModel], description: str) -> dict[str, Any]:
    fields = model.model_fields

    def described(name: str, schema: dict[str, Any]) -> dict[str, Any]:
        field = fields.get(name)
        if field is None or not field.description:
            return schema
        return {**schema, "description": _one_paragraph(field.description)}

    spec, status = fields["spec"], fields["status"]
    schema: dict[str, Any] = {
        "type": "object",
        "description": description,
        "properties": {
            "apiVersion": described("api_version", {"type": "string"}),
            "kind": described("kind", {"type": "string"}),
            # Declared so the name rules can point their fieldPath at metadata.name. The API server
            # refuses any other key here (a description included) and documents ObjectMeta itself.
            "metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
            "spec": described("spec", _type_schema(spec.annotation, list(spec.metadata))),
            "status": described("status", _type_schema(status.annotation, list(status.metadata))),
        },
        "required": ["spec"],
    }
    rules = _model_rules(model)
    if rules:
        schema["x-kubernetes-validations"] = rules
    return schema


def crd_object(kind: Kind) -> dict[str, Any]:
    """The CustomResourceDefinition of one kind, as a dict."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": kind.crd_name},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind.kind,
                "listKind": f"{kind.kind}List",
                "plural": kind.plural,
                "singular": kind.singular,
                "shortNames": list(kind.short_names),
                "categories": [CATEGORY],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {
                            "name": c.name,
                            "type": c.type,
                            "jsonPath": c.json_path,
                            "description": c.description,
                            **({"priority": c.priority} if c.priority else {}),
                        }
                        for c in kind.printer_columns
                    ],
                    "schema": {"openAPIV3Schema": _root_schema(kind.model, kind.description)},
                }
            ],
        },
    }


def render_crds() -> dict[str, str]:
    """File name -> YAML text of every CRD (what ``config/crd/`` holds)."""
    # The JSON round trip unshares values reused across the schema (a Schema marker's default
    # on an inherited field), which yaml would otherwise write as &anchors and *aliases.
    return {
        kind.file_name: HEADER
        + yaml.safe_dump(json.loads(json.dumps(crd_object(kind))), sort_keys=True, width=100000)
        for kind in KINDS
    }
