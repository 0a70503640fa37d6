"""Step Aggregates (condition AggregatesReady): the host aggregates onboarding needs (§11).

openstack-hypervisor-operator adds every host to the aggregate named after its zone and to
``tenant_filter_tests``, and creates neither. The pool creates them, marks what it created
with ``c5c3.io:nova=<namespace>/<nova>``, and deletes a marked one once no live pool of the
Nova needs it and it holds no host. A live sibling needs a zone its ledger shows, or that its latest
pass holds and has not written yet (``ZoneClaims``). It never adds or removes a host.

A tenant's compute API decides how many aggregates are listed: one pass deletes
``DELETES_PER_PASS`` at most (one ``AggregateDeleted`` event each) and, when more are left, comes
back after ``MORE_AFTER`` seconds for the rest (issue 36: one DELETE and one Event per listed record).
The creates and deletes are also bounded by the pass's budget (``pipeline.Budget``): once it is
spent, no further aggregate is created or deleted (at least one is, so every pass moves on) and the
pass ends with a requeue at once; what was done is in Nova, so the next pass goes on from there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import Any, Final

from nova_operator import conditions
from nova_operator.decisions import nodeplan
from nova_operator.openstack import AGGREGATE_MARKER, Aggregate, AggregateExists, ComputeAPIError
from nova_operator.pipeline import LEFT_OVER
from nova_operator.reconcilers.compute import pool_pods
from nova_operator.reconcilers.compute.context import ComputePass
from nova_operator.runtime.request import Result

COND = conditions.AGGREGATES_READY
TENANT_FILTER_TESTS: Final = "tenant_filter_tests"
DELETES_PER_PASS: Final = 20
"""The most unneeded aggregates one pass deletes; the rest are left for the next passes."""
MORE_AFTER: Final = 1.0
"""Seconds until the next pass when unneeded aggregates were left for it."""


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
    claims = p.settings.claims
    # before anything is created: a sibling's pass meanwhile keeps what this one needs
    claims.hold(p.namespace, p.name, frozenset() if p.deleting else frozenset(_zones(p.nodes)))
    live = [s["metadata"]["name"] for s in siblings if not (s.get("metadata") or {}).get("deletionTimestamp")]
    required = required_names(p.nodes, p.deleting, siblings) | claims.of(p.namespace, live)
    marker = f"{p.namespace}/{p.nova_name}"
    wanted = {z: z for z in zones}
    if not p.deleting:
        wanted[TENANT_FILTER_TESTS] = ""
    mismatches: list[str] = []
    more = False  # unneeded aggregates left for the next pass
    calls = 0  # creates and deletes this pass (the budget always lets one through)
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
        deleted, kept = 0, []
        for agg in sorted(existing.values(), key=lambda a: a.id):
            if not _unneeded(agg, marker, required):
                continue
            if _foreign(agg):
                kept.append(agg)
                continue
            if deleted >= DELETES_PER_PASS:
                more = True
                continue
            if calls and p.budget.spent():
                return LEFT_OVER
            await client.delete_aggregate(agg.id)
            deleted += 1
            calls += 1
            await p.emit(
                "Normal", "AggregateDeleted", f"deleted aggregate {agg.name}: empty and no longer needed"
            )
        if kept:
            await p.emit("Warning", "AggregateKept", _kept_message(kept))
    except ComputeAPIError as exc:
        p.set(COND, False, "ComputeAPIError", str(exc))
        return pool_pods.after_api_failure(p)  # 30 s: a requeue, not an error (sooner for a join's Ready pod)
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
        p.aggregates_ensured = not more  # a deleting pool waits for the rest
    return Result(requeue_after=MORE_AFTER) if more else Result()


def _created_message(name: str, zone: str) -> str:
    return f"created aggregate {name} with availability zone {zone}" if zone else f"created aggregate {name}"


def _unneeded(agg: Aggregate, marker: str, required: set[str]) -> bool:
    """Ours (marked for this Nova), not needed by a live pool, and empty."""
    return agg.metadata.get(AGGREGATE_MARKER) == marker and agg.name not in required and not agg.hosts


def _foreign(agg: Aggregate) -> list[str]:
    """The metadata keys of ``agg`` that somebody else set (such an aggregate is never deleted)."""
    return sorted(k for k in agg.metadata if k not in (AGGREGATE_MARKER, "availability_zone"))


KEPT_NAMED: Final = 10
"""The most kept aggregates the ``AggregateKept`` event names (it counts the others)."""


def _kept_message(kept: list[Aggregate]) -> str:
    """One event for every unneeded aggregate kept for its foreign metadata, however many."""
    named = "; ".join(f"{agg.name} ({', '.join(_foreign(agg))})" for agg in kept[:KEPT_NAMED])
    others = f"; and {len(kept) - KEPT_NAMED} more" if len(kept) > KEPT_NAMED else ""
    return f"unneeded aggregates kept because they carry foreign metadata: {named}{others}"
