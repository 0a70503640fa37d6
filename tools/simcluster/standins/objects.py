"""What every stand-in writes and reads on objects: conditions, paths, owner references (pure)."""

from __future__ import annotations

import secrets
import string
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from simcluster.client.asynckube import JSON


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(
    type_: str, status: bool, reason: str, message: str = "", generation: int | None = None
) -> JSON:
    c: JSON = {
        "type": type_,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": now(),
    }
    if generation is not None:
        c["observedGeneration"] = generation
    return c


def merge_conditions(old: Iterable[JSON], new: Iterable[JSON]) -> list[JSON]:
    """New conditions, keeping lastTransitionTime of those whose status did not change."""
    previous = {c.get("type"): c for c in old}
    out = []
    for c in new:
        p = previous.get(c["type"])
        if p is not None and p.get("status") == c["status"]:
            c = {**c, "lastTransitionTime": p.get("lastTransitionTime", c["lastTransitionTime"])}
        out.append(c)
    return out


def same_conditions(a: Iterable[JSON], b: Iterable[JSON]) -> bool:
    def key(cs: Iterable[JSON]) -> list[tuple[Any, ...]]:
        return sorted(
            (c.get("type"), c.get("status"), c.get("reason"), c.get("message"), c.get("observedGeneration"))
            for c in cs
        )

    return key(a) == key(b)


def is_ready(obj: JSON | None) -> bool:
    if obj is None:
        return False
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in obj.get("status", {}).get("conditions", [])
    )


def is_pod_ready(pod: JSON) -> bool:
    status = pod.get("status", {})
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions", [])
    )


def object_path(base: str, plural: str, obj: JSON) -> str:
    return f"{base}/namespaces/{obj['metadata']['namespace']}/{plural}/{obj['metadata']['name']}"


def random_text(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


def strip_times(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip_times(v) for k, v in value.items() if k != "lastTransitionTime"}
    if isinstance(value, list):
        return [strip_times(v) for v in value]
    return value


def owner_reference(obj: JSON, api_version: str, kind: str) -> JSON:
    return {
        "apiVersion": obj.get("apiVersion", api_version),
        "kind": obj.get("kind", kind),
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
