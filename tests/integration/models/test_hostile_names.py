"""Issue 13 item 1: every name and reference field refuses a value that is not a Kubernetes name.

The fields are read from the generated CRDs (every ``name``, ``namespace``, ``sectionName``,
``priorityClassName`` and every Secret ``key``), so a new reference field is swept too. Each
hostile value must be refused by the real API server with 422 and a message naming the field;
the models refuse the same values.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from kubernetes_asyncio.client.exceptions import ApiException
from pydantic import ValidationError

from nova_operator.models import Nova, NovaCompute
from nova_operator.models.crd import render_crds
from tests.integration.models.bases import _BASES

if TYPE_CHECKING:
    from conftest import Objects

pytestmark = pytest.mark.integration

Obj = dict[str, Any]

HOSTILE = (
    "../../victim-ns/rabbitmqclusters/prod-rabbit",
    "../../../../../../api/v1/namespaces/kube-system/secrets/x",
    "..",
    ".",
    "a/b",
    "a%2Fb",
    "Upper",
    "white space",
)
NAME_FIELDS = {"name", "namespace", "sectionName", "priorityClassName"}

BASES: dict[str, Obj] = _BASES  # the minimal objects of the schema sweep
MODELS: dict[str, type[Nova] | type[NovaCompute]] = {"novas": Nova, "novacomputes": NovaCompute}


def _name_fields(schema: Obj, path: list[str], parent: str = "") -> Iterator[list[str]]:
    for field, sub in sorted(schema.get("properties", {}).items()):
        if sub.get("type") == "string" and (
            field in NAME_FIELDS or (field == "key" and parent.lower().endswith("ref"))
        ):
            yield [*path, field]
        yield from _name_fields(sub, [*path, field], field)
    if isinstance(schema.get("items"), dict):
        yield from _name_fields(schema["items"], [*path, "*"], parent)


def _spec_schema(plural: str) -> Obj:
    (text,) = [t for n, t in render_crds().items() if n.endswith(f"_{plural}.yaml")]
    schema: Obj = yaml.safe_load(text)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    return schema["spec"]


def _fill(schema: Obj, path: list[str], value: Any) -> tuple[Any, str]:
    if not path:
        return value, ""
    head, rest = path[0], path[1:]
    if head == "*":
        inner, where = _fill(schema["items"], rest, value)
        return [inner], f"[0]{where}"
    inner, where = _fill(schema["properties"][head], rest, value)
    return {head: inner}, f".{head}{where}"


def _merge(base: Obj, patch: Obj) -> None:
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def _cases(plural: str) -> list[tuple[str, Obj]]:
    schema = _spec_schema(plural)
    out = []
    for path in _name_fields(schema, []):
        for value in HOSTILE:
            if path[-1] == "key" and value in ("Upper",):
                continue  # upper case is a valid data key
            patch, where = _fill(schema, path, value)
            body = copy.deepcopy(BASES[plural])
            _merge(body["spec"], patch)
            out.append((f"spec{where}", body))
    return out


def test_the_sweep_covers_every_reference_field() -> None:
    nova = {where for where, _ in _cases("novas")}
    compute = {where for where, _ in _cases("novacomputes")}
    for field in (
        "spec.messaging.clusterRef.name",
        "spec.apiDatabase.clusterRef.name",
        "spec.database.clusterRef.name",
        "spec.cache.clusterRef.name",
        "spec.messaging.secretRef.name",
        "spec.messaging.secretRef.key",
        "spec.serviceUser.secretRef.name",
        "spec.metadata.sharedSecretRef.name",
        "spec.secretStoreRef.name",
        "spec.gateway.parentRef.name",
        "spec.gateway.parentRef.namespace",
        "spec.api.deployment.priorityClassName",
        "spec.remoteCompute.transportURLSecretRef.name",
    ):
        assert field in nova, field
    assert "spec.novaRef.name" in compute


@pytest.mark.parametrize("plural", ["novas", "novacomputes"])
async def test_the_api_server_refuses_a_hostile_name_naming_the_field(objects: Objects, plural: str) -> None:
    cases = _cases(plural)
    admitted, unnamed = [], []
    for i, (where, body) in enumerate(cases):
        body["metadata"]["name"] = f"hostile-{i}"  # an admitted case must not collide with the next
        try:
            created = await objects.create(plural, body)
        except ApiException as exc:
            message = json.loads(exc.body or "{}").get("message", "")
            if exc.status != 422 or where not in message:
                unnamed.append(f"{where}: HTTP {exc.status}: {message}")
            continue
        admitted.append(f"{where}: {json.dumps(created['spec'])[:200]}")
    assert not admitted, "\n".join(admitted)
    assert not unnamed, "\n".join(unnamed)


@pytest.mark.parametrize("plural", ["novas", "novacomputes"])
def test_the_models_refuse_the_same_names(plural: str) -> None:
    model = MODELS[plural]
    admitted = []
    for where, body in _cases(plural):
        try:
            model.model_validate(body)
        except ValidationError:
            continue
        admitted.append(where)
    assert not admitted, admitted
