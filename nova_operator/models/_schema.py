"""Markers the CRD generator reads from the models, and the base class of every CRD type.

The models are the single source of the API: field names (camelCase aliases), types,
bounds, defaults and the CEL rules. ``crd.py`` walks them; nothing here does I/O.

- ``Rule`` is one ``x-kubernetes-validations`` entry. Put it in ``Annotated[...]`` to attach
  it to a field's schema, or in a model's ``__crd_rules__`` to attach it to the object.
- ``Schema`` carries extra OpenAPI keys (``format``, ``maxItems``, ``default``, list/map
  types, ...) for a field, or (as ``__crd_schema__``) for a model.

Model defaults and schema defaults are kept equal on purpose: a field either has the same
default in both, or defaults to ``None`` and has no schema default. That is what makes
``model_validate`` / ``model_dump(by_alias=True, exclude_none=True)`` lossless for what
the API server stores. An object default (``{}``) is declared with ``Schema(default=...)``
next to a ``default_factory``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


@dataclass(frozen=True)
class Rule:
    """One CEL rule (``x-kubernetes-validations`` item)."""

    rule: str
    message: str = ""
    message_expression: str = ""
    field_path: str = ""
    reason: str = ""
    optional_old_self: bool = False

    def to_openapi(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rule": self.rule}
        if self.message:
            out["message"] = self.message
        if self.message_expression:
            out["messageExpression"] = self.message_expression
        if self.field_path:
            out["fieldPath"] = self.field_path
        if self.reason:
            out["reason"] = self.reason
        if self.optional_old_self:
            out["optionalOldSelf"] = True
        return out


class Schema:
    """Extra OpenAPI keys merged into a field's (or, as ``__crd_schema__``, a model's) schema."""

    __slots__ = ("keys",)

    def __init__(self, **keys: Any) -> None:
        self.keys: Mapping[str, Any] = {_openapi_key(k): v for k, v in keys.items()}

    def __repr__(self) -> str:
        return f"Schema({dict(self.keys)!r})"


class SchemaFrom:
    """The CRD schema of this field is that of ``model``, while Python keeps the plain JSON dict.

    For Kubernetes types the operator copies verbatim into what it renders (a spread
    constraint, an HPA behavior): the API server validates them against the typed schema
    (which CEL rules can read), and renderers get the camelCase dict as stored.
    """

    __slots__ = ("model",)

    def __init__(self, model: type[BaseModel]) -> None:
        self.model = model

    def __repr__(self) -> str:
        return f"SchemaFrom({self.model.__name__})"


class K8sType:
    """The CRD schema of this field is a Kubernetes type vendored from upstream's OpenAPI.

    ``nova_operator/data/k8s-types.json`` (written by ``tools/k8sschema/vendor.py``) holds it;
    Python keeps the plain JSON dict, which the renderers copy verbatim into the pod spec.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"K8sType({self.name!r})"


def _openapi_key(name: str) -> str:
    # x_kubernetes_list_type -> x-kubernetes-list-type; max_items -> maxItems
    if name.startswith("x_"):
        return name.replace("_", "-")
    return to_camel(name)


class CRDModel(BaseModel):
    """Base of every spec/status type: camelCase on the wire, unknown fields refused.

    The API server prunes fields its schema does not declare, so anything it returns is
    declared here; refusing unknown fields catches typos in code and tests.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        # A field's docstring (the string literal under it) is its description in the CRD,
        # what `kubectl explain` prints.
        use_attribute_docstrings=True,
    )

    __crd_rules__: ClassVar[tuple[Rule, ...]] = ()
    __crd_schema__: ClassVar[Schema | None] = None
