"""Owner references: the one place that builds them and reads them.

A child carries its CR as its controller owner (``controller: true``; Kubernetes allows one): the
garbage collector deletes it with the CR, the watches map its events back to the CR, and the
ownership check (``nova_operator.ownership``) asks who controls an object before writing it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nova_operator.kube.types import Object

__all__ = ["controlled_by", "controller_ref", "controller_uid", "owner_reference", "with_owner"]


def owner_reference(owner: Mapping[str, Any], *, controller: bool = True) -> dict[str, Any]:
    """The reference to ``owner`` (a full object) a child carries; it blocks the owner's
    foreground deletion until the child is gone."""
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
    """A copy of ``desired`` whose ownerReferences include ``owner`` as controller (any other
    reference to ``owner`` replaced, references to others kept)."""
    obj: Object = dict(desired)
    meta = dict(obj.get("metadata") or {})
    ref = owner_reference(owner)
    refs = [r for r in meta.get("ownerReferences") or [] if r.get("uid") != ref["uid"]]
    meta["ownerReferences"] = [*refs, ref]
    obj["metadata"] = meta
    return obj


def controller_ref(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``obj``'s controller owner reference, if it has one."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller"):
            return ref
    return None


def controller_uid(obj: Mapping[str, Any]) -> str | None:
    """The UID its controller owner reference names (None: no controller)."""
    ref = controller_ref(obj)
    return None if ref is None else str(ref.get("uid"))


def controlled_by(obj: Mapping[str, Any], uid: str) -> bool:
    """Whether ``obj``'s controller is the object with ``uid``."""
    return bool(uid) and controller_uid(obj) == uid
