"""A pass's status: snapshot before the steps, finish once at the end, write what changed (§8.4)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from nova_operator import conditions
from nova_operator.kube.client import Kube
from nova_operator.kube.resources import ResourceRef
from nova_operator.kube.types import Object
from nova_operator.runtime.cache import copy_object


def snapshot_status(obj: Mapping[str, Any]) -> Object:
    """A deep copy of ``status`` taken before the pipeline runs (empty dict when there is none)."""
    status = obj.get("status")
    return copy_object(dict(status)) if isinstance(status, Mapping) else {}


def keep_transition_times(status: Mapping[str, Any], snapshot: Mapping[str, Any]) -> None:
    """A condition whose status ends the pass where it started keeps its ``lastTransitionTime``.

    Steps may set one condition more than once in a pass (the Secrets step sets ``SecretsReady``
    True, a later step marks it False); only the pass's net change is a transition.
    """
    before = {c.get("type"): c for c in snapshot.get("conditions") or []}
    for cond in status.get("conditions") or []:
        old = before.get(cond.get("type"))
        if old is not None and old.get("status") == cond.get("status") and "lastTransitionTime" in old:
            cond["lastTransitionTime"] = old["lastTransitionTime"]


def status_patch(snapshot: Mapping[str, Any], status: Mapping[str, Any]) -> Object:
    """A merge patch turning ``snapshot`` into ``status`` at the top level (removed fields become null)."""
    patch: Object = {k: v for k, v in status.items() if snapshot.get(k) != v}
    for key in snapshot:
        if key not in status:
            patch[key] = None
    return patch


def finish_pass(
    status: Object,
    snapshot: Mapping[str, Any],
    *,
    ready_inputs: Sequence[str],
    generation: int,
    now: datetime,
) -> bool:
    """Finish a pass's status, once: True when it differs from ``snapshot`` (a write is due).

    ``Ready`` is recomputed from the input conditions present now, ``observedGeneration`` stamped,
    and a condition that ends the pass as it began keeps its ``lastTransitionTime``. Both controllers
    call this at the end of every pass, on every exit path, and then ``write_status``.
    """
    conds: list[conditions.Condition] = status.setdefault("conditions", [])
    conditions.set_ready(conds, ready_inputs, generation=generation, now=now)
    status["observedGeneration"] = generation
    keep_transition_times(status, snapshot)
    return status != snapshot


async def write_status(
    kube: Kube, ref: ResourceRef, obj: Object, status: Object, snapshot: Mapping[str, Any]
) -> bool:
    """Send a finished ``status`` when it differs from ``snapshot``; True when a request was sent.

    A converged pass finds nothing changed and sends nothing (no watch event, no resourceVersion
    churn). The patch holds only the top-level fields that changed (removed ones as null); ``obj``
    then carries the written status and the resourceVersion the API server answered.
    """
    if status == snapshot:
        return False
    meta = obj["metadata"]
    patch = {"status": status_patch(snapshot, status)}
    live = await kube.patch_status(ref, meta["name"], patch, meta.get("namespace"))
    meta["resourceVersion"] = live["metadata"]["resourceVersion"]
    obj["status"] = status
    return True
