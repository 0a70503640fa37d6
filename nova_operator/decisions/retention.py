"""Which content-addressed config ConfigMaps a prune deletes (nova-crd.md §8.1, novacompute-crd.md §8).

Both CRs keep their current ``{name}-config-<hash>`` plus the newest few others. Newest is by
``creationTimestamp``, ties broken by name descending: the API server stamps whole seconds, so
two renders in one second tie, and without the rule the survivor would depend on list order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def _creation_order(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (str(meta.get("creationTimestamp") or ""), str(meta.get("name") or ""))


def surplus(items: Iterable[Mapping[str, Any]], current: str, keep: int) -> list[str]:
    """The names to delete: every item but ``current`` and the ``keep`` newest others."""
    others = sorted(
        (cm for cm in items if (cm.get("metadata") or {}).get("name") != current),
        key=_creation_order,
        reverse=True,
    )
    return [str(cm["metadata"]["name"]) for cm in others[keep:]]
