"""A zone aggregate a pool is creating is not deleted by a sibling's pass (issue 41, item 5).

The race, as the 20-pool bench showed it (a zone aggregate deleted and created again while the pools
converged): pool A's pass adds nodes of zone az1 to its ledger in memory, creates the aggregate az1,
and writes its status only at the end of the pass. Pool B's pass in between lists the aggregates,
finds az1 marked for the Nova, empty, and needed by no ledger it knows (A's written status has no
az1 yet), and deletes it. ``ZoneClaims`` makes B count what A's pass holds before A creates anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nova_operator.kube.types import Object
from nova_operator.models.novacompute import NovaCompute
from nova_operator.openstack import AGGREGATE_MARKER, Aggregate, DeleteOutcome
from nova_operator.reconcilers.compute.aggregates import reconcile_aggregates
from nova_operator.reconcilers.compute.context import ComputePass, ComputeSettings


class Events:
    def __init__(self) -> None:
        self.reasons: list[tuple[str, str]] = []

    async def emit(self, obj: Object, type_: str, reason: str, message: str) -> None:
        self.reasons.append((obj["metadata"]["name"], reason))


class Compute:
    """Aggregates only; ``on_create`` runs while a create is under way (another pool's pass)."""

    def __init__(self) -> None:
        self.aggregates: dict[int, Aggregate] = {}
        self.on_create: Any = None
        self.deleted: list[str] = []

    async def list_aggregates(self) -> list[Aggregate]:
        return list(self.aggregates.values())

    async def create_aggregate(self, name: str, availability_zone: str) -> Aggregate:
        agg = Aggregate(len(self.aggregates) + 1, name, availability_zone, (), {})
        self.aggregates[agg.id] = agg
        return agg

    async def set_aggregate_metadata(self, aggregate_id: int, metadata: Mapping[str, str]) -> None:
        agg = self.aggregates[aggregate_id]
        self.aggregates[aggregate_id] = Aggregate(
            agg.id, agg.name, agg.availability_zone, agg.hosts, {**agg.metadata, **metadata}
        )
        if self.on_create is not None:  # the mark is the last call of a create
            hook, self.on_create = self.on_create, None
            await hook()

    async def delete_aggregate(self, aggregate_id: int) -> DeleteOutcome:
        self.deleted.append(self.aggregates.pop(aggregate_id).name)
        return DeleteOutcome.DELETED


def cr(name: str, nodes: list[dict[str, str]]) -> Object:
    return {
        "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
        "kind": "NovaCompute",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "generation": 1},
        "spec": {"novaRef": {"name": "nova"}, "nodeSelector": {"pool": name}},
        "status": {"nodes": nodes},
    }


def make_pass(
    obj: Object,
    ledger: list[dict[str, str]],
    written: list[Object],
    settings: ComputeSettings,
    compute: Compute,
    events: Events,
) -> ComputePass:
    p = ComputePass(
        kube=None,  # type: ignore[arg-type]
        events=events,
        settings=settings,
        cr=obj,
        pool=NovaCompute.model_validate(obj),
        status={"nodes": [dict(e) for e in ledger]},
        pools=lambda ns, nova: written,
    )
    p._client = compute  # type: ignore[assignment]
    return p


async def race(settings: ComputeSettings) -> tuple[Compute, Events]:
    compute, events = Compute(), Events()
    compute.aggregates[1] = Aggregate(1, "tenant_filter_tests", "", (), {AGGREGATE_MARKER: "ns/nova"})
    # what the informer cache shows: both pools, neither ledger written with a zone yet
    a_written, b_written = cr("a", []), cr("b", [{"name": "b1", "phase": "Pending", "zone": "az2"}])
    written = [a_written, b_written]
    a = make_pass(
        a_written, [{"name": "a1", "phase": "Pending", "zone": "az1"}], written, settings, compute, events
    )
    b = make_pass(
        b_written, [{"name": "b1", "phase": "Pending", "zone": "az2"}], written, settings, compute, events
    )
    b_ran = False

    async def sibling_pass() -> None:
        nonlocal b_ran
        await reconcile_aggregates(b)
        b_ran = True

    compute.on_create = sibling_pass  # B runs while A creates az1 (A's status is not written yet)
    await reconcile_aggregates(a)
    assert b_ran
    return compute, events


async def test_a_sibling_pass_keeps_the_zone_aggregate_a_pool_is_creating() -> None:
    compute, events = await race(ComputeSettings())
    assert "az1" not in compute.deleted, "a sibling deleted the aggregate pool a was creating"
    assert sorted(a.name for a in compute.aggregates.values()) == ["az1", "az2", "tenant_filter_tests"]
    assert ("b", "AggregateDeleted") not in events.reasons


async def test_a_claim_goes_with_the_pass_that_drops_the_zone_and_with_the_release() -> None:
    settings = ComputeSettings()
    await race(settings)
    assert settings.claims.of("ns", ["a"]) == {"az1"}
    settings.claims.finished("ns", "a")
    assert settings.claims.of("ns", ["a"]) == set()
    assert len(settings.claims) == 1  # b's
