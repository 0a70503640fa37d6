"""A CR's finalizer: added before the pass creates anything, released when its teardown is done.

Both patches carry the resourceVersion the pass read as a precondition (optimistic lock), and copy
what the API server answered into the pass's CR, so the pass goes on from the persisted object.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from nova_operator.kube.client import Kube
from nova_operator.kube.errors import NotFound
from nova_operator.kube.resources import ResourceRef
from nova_operator.kube.types import Object


def has_finalizer(obj: Mapping[str, Any], finalizer: str) -> bool:
    return finalizer in ((obj.get("metadata") or {}).get("finalizers") or [])


async def _set_finalizers(kube: Kube, ref: ResourceRef, obj: Object, finalizers: list[str]) -> None:
    meta = obj["metadata"]
    patch = {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}}
    live = await kube.patch(ref, meta["name"], patch, meta.get("namespace"))
    meta["finalizers"] = finalizers
    meta["resourceVersion"] = live["metadata"]["resourceVersion"]


async def ensure_finalizer(kube: Kube, ref: ResourceRef, obj: Object, finalizer: str) -> bool:
    """Add ``finalizer`` (optimistic lock on the pass's resourceVersion); True when it had to be added.

    ``obj`` then carries the persisted finalizer and resourceVersion (what the patch answered), so a
    pass may go on with the work (the Nova controller) or requeue and stop (the NovaCompute one).
    """
    if has_finalizer(obj, finalizer):
        return False
    current = list((obj.get("metadata") or {}).get("finalizers") or [])
    await _set_finalizers(kube, ref, obj, [*current, finalizer])
    return True


async def remove_finalizer(kube: Kube, ref: ResourceRef, obj: Object, finalizer: str) -> bool:
    """Release ``finalizer``; True when it was present. A CR already gone counts as released."""
    if not has_finalizer(obj, finalizer):
        return False
    current = [f for f in obj["metadata"].get("finalizers") or [] if f != finalizer]
    with contextlib.suppress(NotFound):
        await _set_finalizers(kube, ref, obj, current)
    return True
