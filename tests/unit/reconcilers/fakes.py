"""Shared helpers of the tests beside this module (not a test module)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from nova_operator.kube.errors import Conflict, NotFound
from nova_operator.kube.resources import ResourceRef
from nova_operator.kube.types import Object
from nova_operator.metrics import Metrics


def _merge(target: Object, patch: Mapping[str, Any]) -> None:
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        elif isinstance(v, Mapping) and isinstance(target.get(k), dict):
            _merge(target[k], v)
        else:
            target[k] = copy.deepcopy(v)


class FakeKube:
    """get / create / patch / patch_status / delete on a dict store, with resourceVersion preconditions."""

    def __init__(self) -> None:
        self.metrics = Metrics()
        self.store: dict[tuple[str, str, str], Object] = {}
        self.calls: list[tuple[str, str, str]] = []
        self._rv = 100
        self.fail_patch: type[Exception] | None = None

    def put(self, ref: ResourceRef, obj: Object) -> Object:
        self._rv += 1
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["resourceVersion"] = str(self._rv)
        meta = obj["metadata"]
        self.store[(str(ref), meta.get("namespace", ""), meta["name"])] = obj
        return copy.deepcopy(obj)

    async def get(self, ref: ResourceRef, name: str, namespace: str | None = None) -> Object:
        self.calls.append(("get", str(ref), name))
        try:
            return copy.deepcopy(self.store[(str(ref), namespace or "", name)])
        except KeyError:
            raise NotFound("not found") from None

    async def create(self, ref: ResourceRef, body: Mapping[str, Any], namespace: str | None = None) -> Object:
        self.calls.append(("create", str(ref), body["metadata"]["name"]))
        return self.put(ref, dict(body))

    async def patch(
        self,
        ref: ResourceRef,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> Object:
        self.calls.append(("patch" if subresource is None else f"patch/{subresource}", str(ref), name))
        if self.fail_patch is not None:
            raise self.fail_patch("injected")
        key = (str(ref), namespace or "", name)
        if key not in self.store:
            raise NotFound("not found")
        obj = copy.deepcopy(self.store[key])
        want = (patch.get("metadata") or {}).get("resourceVersion")
        if want is not None and want != obj["metadata"]["resourceVersion"]:
            raise Conflict("the object has been modified")
        patch = copy.deepcopy(dict(patch))
        patch.get("metadata", {}).pop("resourceVersion", None)
        _merge(obj, patch)
        return self.put(ref, obj)

    async def patch_status(
        self, ref: ResourceRef, name: str, patch: Mapping[str, Any], namespace: str | None = None
    ) -> Object:
        return await self.patch(ref, name, patch, namespace, subresource="status")

    async def apply(
        self,
        ref: ResourceRef,
        body: Mapping[str, Any],
        *,
        field_manager: str,
        namespace: str | None = None,
        force: bool = True,
        subresource: str | None = None,
    ) -> Object:
        self.calls.append(("apply", str(ref), body["metadata"]["name"]))
        key = (str(ref), namespace or "", body["metadata"]["name"])
        want = (body.get("metadata") or {}).get("resourceVersion")
        if want is not None and key in self.store and want != self.store[key]["metadata"]["resourceVersion"]:
            self.calls[-1] = ("refused apply", str(ref), body["metadata"]["name"])  # nothing written
            raise Conflict("the object has been modified")  # as the API server: none to check on a create
        obj = copy.deepcopy(self.store.get(key) or {})
        _merge(obj, copy.deepcopy(dict(body)))
        obj["metadata"].setdefault("uid", f"uid-{body['metadata']['name']}")
        return self.put(ref, obj)

    async def list(self, ref: ResourceRef, namespace: str | None = None, **_: Any) -> Object:
        self.calls.append(("list", str(ref), namespace or ""))
        items = [
            copy.deepcopy(o)
            for (r, ns, _n), o in self.store.items()
            if r == str(ref) and ns == (namespace or ns)
        ]
        return {"metadata": {"resourceVersion": str(self._rv)}, "items": items}

    async def delete(self, ref: ResourceRef, name: str, namespace: str | None = None, **_: Any) -> None:
        self.calls.append(("delete", str(ref), name))
        if self.store.pop((str(ref), namespace or "", name), None) is None:
            raise NotFound("not found")

    def writes(self) -> list[tuple[str, str, str]]:
        return [c for c in self.calls if c[0] not in ("get", "list", "refused apply")]


class FakeEvents:
    def __init__(self) -> None:
        self.emitted: list[tuple[str, str, str]] = []

    async def emit(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        self.emitted.append((type_, reason, message))
