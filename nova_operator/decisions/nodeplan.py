"""Which nodes a NovaCompute pool holds: the node plan, a pure function (novacompute-crd.md §7.2).

Inputs are what the Nodes step read this pass: the pool's own ledger (``status.nodes``),
the Nodes its selector matched, the Nodes it holds but no longer selects (``None`` when
gone from the cluster), and the rival pools of the same Nova on the same cluster. The
output replaces ``status.nodes`` and tells the DaemonSet step which nodes to exclude and
which to keep a pod on, and the Services step which leaving nodes are handovers.

Entries are plain dicts in the API's camelCase shape (``NovaComputeNodeStatus``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

ZONE_LABEL: Final = "topology.kubernetes.io/zone"

PENDING: Final = "Pending"
ACTIVE: Final = "Active"
DRAINING: Final = "Draining"
RELEASING: Final = "Releasing"
CONFLICT: Final = "Conflict"

Entry = dict[str, Any]


@dataclass(frozen=True)
class Pool:
    """A NovaCompute as the plan sees it: identity, age, selector and its ledger."""

    name: str
    created: str  # RFC 3339 creationTimestamp; compared as text (one format, UTC)
    deleting: bool = False
    selector: Mapping[str, str] = field(default_factory=dict)
    nodes: tuple[Mapping[str, Any], ...] = ()

    def age_key(self) -> tuple[str, str]:
        """ "Older" compares creationTimestamp first, then name."""
        return (self.created, self.name)

    def held(self) -> dict[str, Mapping[str, Any]]:
        return {e["name"]: e for e in self.nodes if e.get("phase") != CONFLICT}

    def selects(self, labels: Mapping[str, str]) -> bool:
        """An empty selector selects nothing."""
        return bool(self.selector) and all(labels.get(k) == v for k, v in self.selector.items())


@dataclass(frozen=True)
class Plan:
    nodes: list[Entry]
    excluded: frozenset[str]
    """Conflict entries: no pod of this pool there (NotIn in the node affinity)."""
    keep_pods: frozenset[str]
    """Draining entries: the pod stays while servers remain (the hold term)."""
    handover: frozenset[str]
    """Leaving nodes a live rival now selects: released without a disable."""
    new_conflicts: tuple[tuple[str, str], ...]
    """(node, holding pool) for entries that newly became Conflict or changed holder: one event each."""


def _settled(entry: Mapping[str, Any]) -> str:
    return ACTIVE if entry.get("serviceID") else PENDING


def _with_zone(entry: Entry, labels: Mapping[str, str] | None) -> Entry:
    if labels is None:
        return entry
    zone = labels.get(ZONE_LABEL)
    if zone:
        entry["zone"] = zone
    else:
        entry.pop("zone", None)
    return entry


def plan(
    pool: Pool,
    *,
    selected: Mapping[str, Mapping[str, str]],
    held_nodes: Mapping[str, Mapping[str, str] | None],
    rivals: Iterable[Pool],
) -> Plan:
    """Plan the pool's ledger.

    ``selected``: node name -> labels for every Node the pool's selector lists (empty while
    deleting). ``held_nodes``: node name -> labels (or None when NotFound) for held entries
    that are not selected. ``rivals``: the other pools of the same Nova on the same cluster.
    """
    rivals = [r for r in rivals if r.name != pool.name]
    own = {e["name"]: e for e in pool.nodes}
    held = pool.held()

    # Rival holds by node; the older rival wins when two hold the same node.
    holder: dict[str, Pool] = {}
    for rival in rivals:
        for node in rival.held():
            if node not in holder or rival.age_key() < holder[node].age_key():
                holder[node] = rival

    result: dict[str, Entry] = {}
    new_conflicts: list[tuple[str, str]] = []

    def conflict(node: str, rival: Pool, labels: Mapping[str, str]) -> None:
        before = own.get(node)
        entry = _with_zone({"name": node, "phase": CONFLICT, "conflictsWith": rival.name}, labels)
        if before is None or before.get("phase") != CONFLICT or before.get("conflictsWith") != rival.name:
            new_conflicts.append((node, rival.name))
        result[node] = entry

    for node, labels in selected.items():
        rival_holder = holder.get(node)
        if rival_holder is not None:
            if node not in held:
                conflict(node, rival_holder, labels)
                continue
            rival_phase = rival_holder.held()[node].get("phase")
            if (
                rival_holder.age_key() < pool.age_key()
                and not rival_holder.deleting
                and rival_phase in (PENDING, ACTIVE)
            ):
                conflict(node, rival_holder, labels)
                continue
        elif node not in held:
            outranking = sorted(
                (r for r in rivals if not r.deleting and r.age_key() < pool.age_key() and r.selects(labels)),
                key=Pool.age_key,
            )
            if outranking:
                conflict(node, outranking[0], labels)
                continue
        if node in held:
            entry = dict(held[node])
            if entry.get("phase") in (DRAINING, RELEASING):
                entry["phase"] = _settled(entry)
        else:
            entry = {"name": node, "phase": PENDING}
        entry.pop("conflictsWith", None)
        entry.pop("instances", None)
        result[node] = _with_zone(entry, labels)

    handover: set[str] = set()
    for node, held_entry in held.items():
        if node in selected:
            continue
        node_labels = held_nodes.get(node)
        leaving = _with_zone(dict(held_entry), node_labels)
        if node_labels is not None and any(not r.deleting and r.selects(node_labels) for r in rivals):
            leaving["phase"] = RELEASING
            leaving.pop("instances", None)
            handover.add(node)
        elif leaving.get("phase") != RELEASING:
            leaving["phase"] = DRAINING
        result[node] = leaving

    nodes = [result[n] for n in sorted(result)]
    return Plan(
        nodes=nodes,
        excluded=frozenset(e["name"] for e in nodes if e["phase"] == CONFLICT),
        keep_pods=frozenset(e["name"] for e in nodes if e["phase"] == DRAINING),
        handover=frozenset(handover),
        new_conflicts=tuple(sorted(new_conflicts)),
    )
