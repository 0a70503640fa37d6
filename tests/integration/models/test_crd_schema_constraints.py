"""Every OpenAPI constraint of the spec schemas (pattern, enum, minimum, maximum, minLength,
minProperties) is enforced by the API server: for each one, an object carrying a value that
violates just that constraint is refused with the server's message for it, at its path.

The constraints are read from the generated CRDs, so a new field is swept automatically.
(The length and item bounds that only cap CEL cost are not swept.)
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from kubernetes_asyncio.client.exceptions import ApiException

from nova_operator.models.crd import render_crds
from tests.integration.models.bases import _BASES, Obj

if TYPE_CHECKING:
    from conftest import Objects

pytestmark = pytest.mark.integration


def _violation(keyword: str, bound: Any) -> tuple[Any, str]:
    """A value breaking ``keyword: bound``, and the phrase the API server answers with."""
    if keyword == "pattern":
        return "Bad\n!", f"should match '{bound}'"
    if keyword == "enum":
        return "Bogus", 'Unsupported value: "Bogus"'
    if keyword == "minimum":
        return bound - 1, f"should be greater than or equal to {bound}"
    if keyword == "maximum":
        return bound + 1, f"should be less than or equal to {bound}"
    if keyword == "minLength":
        return "", f"should be at least {bound} chars long"
    if keyword == "minProperties":
        return {}, f"should have at least {bound} properties"
    raise AssertionError(keyword)


KEYWORDS = ("pattern", "enum", "minimum", "maximum", "minLength", "minProperties")


def _constraints(schema: Obj, path: list[str]) -> Iterator[tuple[list[str], str, Any]]:
    for keyword in KEYWORDS:
        if keyword in schema:
            yield path, keyword, schema[keyword]
    for name, sub in sorted(schema.get("properties", {}).items()):
        yield from _constraints(sub, [*path, name])
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from _constraints(schema[key], [*path, "*"])


def _build(schema: Obj, path: list[str], value: Any) -> tuple[Any, str]:
    """A JSON value holding ``value`` at ``path``, and that place's instance path."""
    if not path:
        return value, ""
    head, rest = path[0], path[1:]
    if head == "*":
        if schema.get("type") == "array":
            inner, where = _build(schema["items"], rest, value)
            return [inner], f"[0]{where}"
        inner, where = _build(schema["additionalProperties"], rest, value)
        return {"k": inner}, f".k{where}"  # OpenAPI errors name a map value as .key
    inner, where = _build(schema["properties"][head], rest, value)
    return {head: inner}, f".{head}{where}"


def _merge(base: Obj, patch: Obj) -> None:
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict) and value:
            _merge(base[key], value)
        else:
            base[key] = value


def _sweep(plural: str) -> list[tuple[str, Obj, str, str]]:
    """(label, object, path the server names, phrase it answers with) per constraint."""
    (text,) = [t for n, t in render_crds().items() if n.endswith(f"_{plural}.yaml")]
    spec_schema = yaml.safe_load(text)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
        "spec"
    ]
    out = []
    for path, keyword, bound in _constraints(spec_schema, []):
        value, phrase = _violation(keyword, bound)
        patch, where = _build(spec_schema, path, value)
        body = copy.deepcopy(_BASES[plural])
        _merge(body["spec"], patch)
        out.append((f"spec{where} {keyword}", body, f"spec{where}: ", phrase))
    return out


@pytest.mark.parametrize("plural", ["novas", "novacomputes"])
async def test_every_schema_constraint_is_enforced_by_the_api_server(objects: Objects, plural: str) -> None:
    cases = _sweep(plural)
    assert len(cases) > 10
    missed = []
    for label, body, path, phrase in cases:
        refusal = await _refusal(objects, plural, body)
        if refusal is None:
            missed.append(f"{label}: admitted")
            continue
        assert refusal.status == 422, refusal.body
        text = json.loads(refusal.body or "{}")["message"]
        if path not in text or phrase not in text:
            missed.append(f"{label}: {text}")
    assert not missed, "\n".join(missed)


async def _refusal(objects: Objects, plural: str, body: Obj) -> ApiException | None:
    try:
        await objects.create(plural, body)
    except ApiException as exc:
        return exc
    return None
