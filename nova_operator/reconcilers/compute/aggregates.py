"""Step Aggregates (condition AggregatesReady): the host aggregates onboarding needs (§11).

openstack-hypervisor-operator adds every host to the aggregate named after its zone and to
``tenant_filter_tests``, and creates neither. The pool creates them, marks what it created
with ``c5c3.io:nova=<namespace>/<nova>``, and deletes a marked one once no live pool of the
Nova needs it and it holds no host. It never adds or removes a host.

The creates and deletes are bounded by the pass's budget (``pipeline.Budget``): the aggregates are
as many as the zones and as the tenant's compute API lists. Once it is spent, no further aggregate
is created or deleted (at least one is, so every pass moves on) and the pass ends with a requeue at
once; what was done is in Nova, so the next pass goes on from there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import Any, Final

from nova_operator import conditions
from nova_operator.decisions import nodeplan
from nova_operator.openstack import AGGREGATE_MARKER, Aggregate, AggregateExists, ComputeAPIError
from nova_operator.pipeline import LEFT_OVER
from nova_operator.reconcilers.compute.context import ComputePass
from nova_operator.runtime.request import Result

COND = conditions.AGGREGATES_READY
TENANT_FILTER_TESTS: Final = "tenant_filter_tests"


def _zones(entries: Iterable[Mapping[str, Any]]) -> set[str]:
    return {str(e["zone"]) for e in entries if e.get("zone")}


def required_names(
    own_nodes: list[dict[str, Any]], own_deleting: bool, siblings: Iterable[Mapping[str, Any]]
) -> set[str]:
    """``tenant_filter_tests`` plus every zone of any entry, over this pool and its live siblings."""
    required: set[str] = set()
    if not own_deleting:
        required |= {TENANT_FILTER_TESTS, *_zones(own_nodes)}
    for sibling in siblings:
        if (sibling.get("metadata") or {}).get("deletionTimestamp"):
            continue
        required |= {TENANT_FILTER_TESTS, *_zones((sibling.get("status") or {}).get("nodes") or [])}
    return required


async def reconcile_aggregates(p: ComputePass) -> Result:
    settled = [e for e in p.nodes if e.get("phase") in (nodeplan.PENDING, nodeplan.ACTIVE)]
    zones = sorted(_zones(settled))
    without_zone = sorted(e["name"] for e in settled if not e.get("zone"))
    siblings = p.siblings
    if siblings is None:  # the Nodes step did not run (a deleting pool that holds no node)
        siblings = [s for s in p.pools(p.namespace, p.nova_name) if s["metadata"]["name"] != p.name]
        p.siblings = siblings
    required = required_names(p.nodes, p.deleting, siblings)
    marker = f"{p.namespace}/{p.nova_name}"
    wanted = {z: z for z in zones}
    if not p.deleting:
        wanted[TENANT_FILTER_TESTS] = ""
    mismatches: list[str] = []
    calls = 0  # creates and deletes this pass
    try:
        client = await p.compute()
        existing = {a.name: a for a in await client.list_aggregates()}
        for name in sorted(wanted):
            zone = wanted[name]
            found = existing.get(name)
            if found is not None:
                if found.availability_zone != zone:
                    mismatches.append(f"{name} (availability zone {found.availability_zone or '<none>'!s})")
                continue
            if calls and p.budget.spent():
                return LEFT_OVER  # the rest next pass; the condition is that pass's to set
            calls += 1
            try:
                created = await client.create_aggregate(name, zone)
            except AggregateExists:
                p.set(COND, False, "WaitingForAggregate", f"aggregate {name} was created concurrently")
                return Result(requeue_after=p.settings.intervals.releasing)  # 10 s
            try:
                await client.set_aggregate_metadata(created.id, {AGGREGATE_MARKER: marker})
            except ComputeAPIError:
                # Unmarked, it would never be cleaned up: remove it so the next pass recreates it.
                with contextlib.suppress(ComputeAPIError):
                    await client.delete_aggregate(created.id)
                raise
            await p.emit("Normal", "AggregateCreated", _created_message(name, zone))
        for agg in sorted(existing.values(), key=lambda a: a.id):
            if _deletable(agg, marker, required) and calls and p.budget.spent():
                return LEFT_OVER
            calls += await _cleanup(p, agg, marker, required)
    except ComputeAPIError as exc:
        p.set(COND, False, "ComputeAPIError", str(exc))
        return Result(requeue_after=p.settings.intervals.draining)  # 30 s: a requeue, not an error
    if mismatches:
        p.set(
            COND,
            False,
            "AggregateZoneMismatch",
            "aggregates with another availability zone: " + ", ".join(mismatches),
        )
    elif without_zone:
        p.set(
            COND,
            False,
            "NodesWithoutZone",
            "nodes without a topology.kubernetes.io/zone label: " + ", ".join(without_zone),
        )
    else:
        ensured = ", ".join(sorted(wanted)) or "none"
        p.set(COND, True, "AggregatesEnsured", f"aggregates ensured: {ensured}")
        p.aggregates_ensured = True
    return Result()


def _created_message(name: str, zone: str) -> str:
    return f"created aggregate {name} with availability zone {zone}" if zone else f"created aggregate {name}"


def _unneeded(agg: Aggregate, marker: str, required: set[str]) -> bool:
    """Ours, no longer needed and empty (one not ours is never deleted)."""
    return agg.metadata.get(AGGREGATE_MARKER) == marker and agg.name not in required and not agg.hosts


def _foreign(agg: Aggregate) -> list[str]:
    return sorted(k for k in agg.metadata if k not in (AGGREGATE_MARKER, "availability_zone"))


def _deletable(agg: Aggregate, marker: str, required: set[str]) -> bool:
    return _unneeded(agg, marker, required) and not _foreign(agg)


async def _cleanup(p: ComputePass, agg: Aggregate, marker: str, required: set[str]) -> int:
    """Delete ``agg`` when it is ours, unneeded, empty and carries nothing else; 1 when it was."""
    if not _unneeded(agg, marker, required):
        return 0
    foreign = _foreign(agg)
    if foreign:
        await p.emit(
            "Warning",
            "AggregateKept",
            f"aggregate {agg.name} is unneeded but carries foreign metadata {', '.join(foreign)}; kept",
        )
        return 0
    client = await p.compute()
    await client.delete_aggregate(agg.id)
    await p.emit("Normal", "AggregateDeleted", f"deleted aggregate {agg.name}: empty and no longer needed")
    return 1
