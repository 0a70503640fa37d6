"""``docs/reference/{nova,novacompute}.md``: the configuration reference, read from the CRDs.

The page is rendered from ``models.crd.crd_object`` (what ``make manifests`` installs), so it
shows exactly what the API server enforces: every property with its type, default, enum, bounds,
pattern and description (the models' field docstrings), and every CEL rule with the message a
refused write gets. A Kubernetes type embedded whole (``affinity``) is named, not expanded:
``kubectl explain`` prints it. Pure: no I/O (``nova_operator.install.docs`` writes the pages).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from nova_operator.models import crd

Schema = Mapping[str, Any]

_BOUNDS = (
    ("minLength", "length ≥ {}"),
    ("maxLength", "length ≤ {}"),
    ("minItems", "items ≥ {}"),
    ("maxItems", "items ≤ {}"),
    ("minProperties", "keys ≥ {}"),
    ("maxProperties", "keys ≤ {}"),
    ("minimum", "≥ {}"),
    ("maximum", "≤ {}"),
    ("exclusiveMinimum", "> {}"),
    ("exclusiveMaximum", "< {}"),
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _code(value: Any) -> str:
    text = value if isinstance(value, str) else _json(value)
    return "`" + text.replace("`", "'") + "`" if text else '`""`'


def _json(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_json(v) for v in value) + "]"
    return str(value)


def _vendored(schema: Schema) -> str | None:
    """The name of the upstream Kubernetes type embedded here whole, if any."""
    for name, upstream in crd._k8s_types().items():
        if schema.get("properties", {}).keys() == upstream.get("properties", {}).keys() and schema.get(
            "type"
        ) == upstream.get("type"):
            return name
    return None


def _type(schema: Schema) -> str:
    if schema.get("x-kubernetes-int-or-string"):
        return "int or string"
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return "object (any fields)"
    kind = str(schema.get("type", "any"))
    if kind == "array":
        return f"[]{_type(schema.get('items', {}))}"
    if kind == "object" and "additionalProperties" in schema:
        return f"map[string]{_type(schema['additionalProperties'])}"
    return kind


def _constraints(schema: Schema) -> list[str]:
    out = []
    if "enum" in schema:
        out.append("one of " + ", ".join(_code(v) for v in schema["enum"]))
    out += [text.format(schema[key]) for key, text in _BOUNDS if key in schema]
    if "pattern" in schema:
        out.append(f"pattern {_code(schema['pattern'])}")
    if "format" in schema:
        out.append(f"format {schema['format']}")
    items = schema.get("items", {})
    if "enum" in items:
        out.append("items one of " + ", ".join(_code(v) for v in items["enum"]))
    if "pattern" in items:
        out.append(f"items match {_code(items['pattern'])}")
    if schema.get("x-kubernetes-list-type"):
        out.append(f"list type {schema['x-kubernetes-list-type']}")
    return out


def _rules(schema: Schema) -> list[str]:
    out = []
    for rule in schema.get("x-kubernetes-validations", []):
        said = rule.get("message") or rule.get("messageExpression") or "invalid"
        where = f" (on `{rule['fieldPath']}`)" if rule.get("fieldPath") else ""
        out.append(f"rule{where}: {_code(rule['rule'])} — refused with “{said}”")
    return out


def _rows(path: str, schema: Schema, required: bool) -> Iterator[tuple[str, str, str, str, str]]:
    """(field, type, required, default, description) for ``schema`` and everything under it."""
    vendored = _vendored(schema) if schema.get("type") == "object" else None
    details = _constraints(schema) + _rules(schema)
    if vendored is not None:
        details.append(f"the Kubernetes `{vendored}` schema (core/v1); `kubectl explain` lists its fields")
    description = " ".join(
        part for part in (schema.get("description", ""), *(f"{d}." for d in details)) if part
    )
    default = _code(schema["default"]) if "default" in schema else ""
    yield path, _type(schema), "yes" if required else "", default, description
    if vendored is not None:
        return
    children: Schema = schema.get("properties", {})
    need = set(schema.get("required", []))
    if schema.get("type") == "array":
        children = schema.get("items", {}).get("properties", {})
        need = set(schema.get("items", {}).get("required", []))
        yield from _nested_rules(f"{path}[]", schema.get("items", {}))
        path = f"{path}[]"
    elif "additionalProperties" in schema:
        value = schema["additionalProperties"]
        children, need = value.get("properties", {}), set(value.get("required", []))
        yield from _nested_rules(f"{path}.<key>", value)
        path = f"{path}.<key>"
    for name, child in children.items():
        yield from _rows(f"{path}.{name}", child, name in need)


def _nested_rules(path: str, schema: Schema) -> Iterator[tuple[str, str, str, str, str]]:
    """The rules of a list item or map value (they have no row of their own)."""
    rules = _rules(schema)
    if rules:
        yield path, _type(schema), "", "", " ".join(f"{r}." for r in rules)


def render(kind: crd.Kind) -> str:
    """One kind's reference page (Markdown)."""
    obj = crd.crd_object(kind)
    spec = obj["spec"]
    names, version = spec["names"], spec["versions"][0]
    root = version["schema"]["openAPIV3Schema"]
    out = [
        "<!-- Generated by make manifests from nova_operator/models "
        "(nova_operator/install/crd_reference.py); "
        "do not edit. -->\n",
        f"# {names['kind']} ({spec['group']}/{version['name']})\n",
        root.get("description", ""),
        "",
        f"- Plural `{names['plural']}`, singular `{names['singular']}`, short names "
        + ", ".join(f"`{s}`" for s in names.get("shortNames", []))
        + ", categories "
        + ", ".join(f"`{c}`" for c in names.get("categories", []))
        + f"; {spec['scope']}; status subresource.",
        f"- The CRD: `config/crd/{kind.file_name}` (also `charts/nova-operator/crds/`). "
        f"`kubectl explain {names['singular']}.spec` prints the same descriptions.",
        "",
        "## Printer columns\n",
        "| column | type | JSON path | shown | description |",
        "| --- | --- | --- | --- | --- |",
    ]
    for col in version.get("additionalPrinterColumns", []):
        shown = "`-o wide`" if col.get("priority") else "always"
        out.append(
            f"| {col['name']} | {col['type']} | `{col['jsonPath']}` | {shown} | "
            f"{_cell(col.get('description', ''))} |"
        )
    top_rules = _rules(root)
    if top_rules:
        out += ["", "## Rules on the whole object\n", *(f"- {_cell(r)}" for r in top_rules)]
    for part in ("spec", "status"):
        schema = root["properties"][part]
        out += [
            "",
            f"## {part}\n",
            _cell(schema.get("description", "")),
            "",
            "| field | type | required | default | description |",
            "| --- | --- | --- | --- | --- |",
        ]
        for path, type_, required, default, text in _rows(part, schema, part in root.get("required", [])):
            out.append(f"| `{path}` | {_cell(type_)} | {required} | {_cell(default)} | {_cell(text)} |")
    return "\n".join(out) + "\n"


def pages() -> dict[str, str]:
    """``reference/<kind>.md`` for each kind."""
    return {f"reference/{kind.kind.lower()}.md": render(kind) for kind in crd.KINDS}
