"""Server-side apply with one field manager, owner references, and write-free steady state.

``apply(kube, desired, owner=..., cached=...)``:

1. sets a controller owner reference to ``owner`` (when given, and in the same namespace),
2. returns ``cached`` untouched when it already carries every desired field (``carries``),
   so a converged object costs no request at all,
3. otherwise sends one server-side apply as ``FIELD_MANAGER`` with ``force`` (the operator
   owns what it renders), retrying a few times on 409 Conflict (a create race).

``carries`` is a subset check: every field in ``desired`` must be present and equal in
the live object; fields the server or other managers added are ignored. Lists compare
element by element. A field the operator stops rendering is not noticed by the skip;
such removals need a real apply, which happens on the next change of any rendered field.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from nova_operator.kube.client import Kube, Object
from nova_operator.kube.errors import Conflict, NotFound
from nova_operator.kube.resources import ResourceRef, ref_for

FIELD_MANAGER = "nova-operator"
CONFLICT_RETRIES = 3


def owner_reference(owner: Mapping[str, Any], *, controller: bool = True) -> dict[str, Any]:
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def with_owner(desired: Mapping[str, Any], owner: Mapping[str, Any]) -> Object:
    """A copy of ``desired`` whose ownerReferences include ``owner`` as controller."""
    obj: Object = dict(desired)
    meta = dict(obj.get("metadata") or {})
    ref = owner_reference(owner)
    refs = [r for r in meta.get("ownerReferences") or [] if r.get("uid") != ref["uid"]]
    meta["ownerReferences"] = [*refs, ref]
    obj["metadata"] = meta
    return obj


def carries(live: Any, desired: Any) -> bool:
    """True when ``live`` contains every field of ``desired`` with an equal value.

    An empty or null desired field counts as carried when the live object omits it (the
    API server drops empty maps and lists), so such fields do not cause a write per pass.
    Values are compared as JSON: render canonical forms (``"1"`` not ``"1000m"``).
    """
    if isinstance(desired, Mapping):
        if not isinstance(live, Mapping):
            return False
        return all(carries(live[k], v) if k in live else v in (None, {}, []) for k, v in desired.items())
    if isinstance(desired, list):
        if not isinstance(live, list) or len(live) != len(desired):
            return False
        return all(carries(lv, dv) for lv, dv in zip(live, desired, strict=True))
    if isinstance(desired, bool) or isinstance(live, bool):
        return live is desired
    return bool(live == desired)


async def apply(
    kube: Kube,
    desired: Mapping[str, Any],
    *,
    owner: Mapping[str, Any] | None = None,
    cached: Mapping[str, Any] | None = None,
    ref: ResourceRef | None = None,
    force: bool = True,
) -> Object:
    """Make the object ``desired`` describes carry its fields; return the live object."""
    body = with_owner(desired, owner) if owner is not None else dict(desired)
    if cached is not None and carries(cached, body):
        return dict(cached)
    ref = ref or ref_for(body["apiVersion"], body["kind"])
    namespace = body.get("metadata", {}).get("namespace")
    for attempt in range(CONFLICT_RETRIES + 1):
        try:
            return await kube.apply(ref, body, field_manager=FIELD_MANAGER, namespace=namespace, force=force)
        except Conflict:
            if attempt == CONFLICT_RETRIES or not force:
                raise
            await asyncio.sleep(0.05 * 2**attempt)
    raise AssertionError("unreachable")


async def apply_status(
    kube: Kube, obj: Mapping[str, Any], status: Mapping[str, Any], *, ref: ResourceRef | None = None
) -> Object | None:
    """Apply ``status`` to ``obj``'s status subresource unless ``obj`` already carries it."""
    if carries(obj.get("status") or {}, status):
        return None
    ref = ref or ref_for(obj["apiVersion"], obj["kind"])
    meta = obj["metadata"]
    body = {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "metadata": {
            "name": meta["name"],
            **({"namespace": meta["namespace"]} if meta.get("namespace") else {}),
        },
        "status": dict(status),
    }
    return await kube.apply(
        ref, body, field_manager=FIELD_MANAGER, namespace=meta.get("namespace"), subresource="status"
    )


async def delete_if_present(
    kube: Kube, ref: ResourceRef, name: str, namespace: str | None = None, *, uid: str | None = None
) -> bool:
    """Delete; False when it was already gone."""
    try:
        await kube.delete(ref, name, namespace, uid=uid)
    except NotFound:
        return False
    return True
