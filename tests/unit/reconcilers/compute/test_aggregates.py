"""The Aggregates step (novacompute-crd.md §11) with a compute-client double."""

from __future__ import annotations

from nova_operator.openstack import Aggregate, ComputeAPIError
from nova_operator.reconcilers.compute.aggregates import (
    DELETES_PER_PASS,
    MORE_AFTER,
    reconcile_aggregates,
    required_names,
)
from tests.unit.reconcilers.compute.fakes import FakeCompute, make_pass

MARK = {"c5c3.io:nova": "ns/nova"}
TFT = "tenant_filter_tests"


def agg(
    id_: int, name: str, zone: str = "", hosts: tuple[str, ...] = (), metadata: dict[str, str] | None = None
) -> Aggregate:
    return Aggregate(id_, name, zone, hosts, metadata if metadata is not None else dict(MARK))


def sibling(nodes: list[dict[str, str]], deleting: bool = False) -> dict[str, object]:
    meta: dict[str, object] = {"name": "other"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"nodes": nodes}}


def test_required_set_spans_live_siblings_and_any_phase() -> None:
    own = [{"name": "n1", "phase": "Draining", "zone": "az1"}]
    assert required_names(own, False, []) == {"tenant_filter_tests", "az1"}
    assert required_names(own, True, []) == set()
    assert required_names(own, True, [sibling([{"name": "x", "phase": "Conflict", "zone": "az9"}])]) == {
        "tenant_filter_tests",
        "az9",
    }
    assert required_names([], True, [sibling([{"name": "x", "zone": "az9"}], deleting=True)]) == set()


async def test_creates_and_marks_the_zone_aggregates_and_tenant_filter_tests() -> None:
    compute = FakeCompute()
    p, events = make_pass(
        [{"name": "n1", "phase": "Active", "zone": "az1"}, {"name": "n2", "phase": "Pending", "zone": "az2"}],
        compute=compute,
    )
    assert (await reconcile_aggregates(p)).requeue_after is None
    creates = [c[1] for c in compute.calls if c[0] == "create_aggregate"]
    assert creates == [("az1", "az1"), ("az2", "az2"), ("tenant_filter_tests", "")]
    marks = [c[1][1] for c in compute.calls if c[0] == "set_aggregate_metadata"]
    assert marks == [MARK, MARK, MARK]
    assert events.reasons() == ["AggregateCreated"] * 3
    assert p.condition("AggregatesReady")["reason"] == "AggregatesEnsured"
    assert p.aggregates_ensured


async def test_an_existing_aggregate_is_used_as_is_and_a_zone_mismatch_is_reported() -> None:
    compute = FakeCompute(aggregates=[agg(1, "az1", "other-az", metadata={}), agg(2, "tenant_filter_tests")])
    p, _events = make_pass([{"name": "n1", "phase": "Active", "zone": "az1"}], compute=compute)
    assert (await reconcile_aggregates(p)).requeue_after is None  # not a wait
    assert "create_aggregate" not in compute.names()
    c = p.condition("AggregatesReady")
    assert (c["status"], c["reason"]) == ("False", "AggregateZoneMismatch")
    assert "other-az" in c["message"]
    assert not p.aggregates_ensured


async def test_nodes_without_zone_are_reported_but_the_other_zones_ensured() -> None:
    compute = FakeCompute()
    p, _ = make_pass(
        [{"name": "n1", "phase": "Active"}, {"name": "n2", "phase": "Active", "zone": "az2"}], compute=compute
    )
    assert (await reconcile_aggregates(p)).requeue_after is None
    assert p.condition("AggregatesReady")["reason"] == "NodesWithoutZone"
    assert [c[1][0] for c in compute.calls if c[0] == "create_aggregate"] == ["az2", "tenant_filter_tests"]


async def test_a_concurrent_create_waits_10s_and_api_errors_requeue_30s() -> None:
    compute = FakeCompute()
    p, _ = make_pass([{"name": "n1", "phase": "Active", "zone": "az1"}], compute=compute)

    async def racing(name: str, zone: str) -> Aggregate:
        from nova_operator.openstack import AggregateExists

        raise AggregateExists("409", status=409)

    compute.create_aggregate = racing  # type: ignore[method-assign]
    assert (await reconcile_aggregates(p)).requeue_after == 10
    assert p.condition("AggregatesReady")["reason"] == "WaitingForAggregate"
    compute = FakeCompute(fail={"list_aggregates": ComputeAPIError("down")})
    p, _ = make_pass([], compute=compute)
    assert (await reconcile_aggregates(p)).requeue_after == 30
    assert p.condition("AggregatesReady")["reason"] == "ComputeAPIError"


async def test_a_failed_mark_deletes_the_new_aggregate() -> None:
    compute = FakeCompute(fail={"set_aggregate_metadata": ComputeAPIError("boom")})
    p, _ = make_pass([{"name": "n1", "phase": "Active", "zone": "az1"}], compute=compute)
    assert (await reconcile_aggregates(p)).requeue_after == 30
    assert "delete_aggregate" in compute.names()
    assert compute.aggregates == []


async def test_cleanup_deletes_only_empty_unneeded_marked_aggregates() -> None:
    compute = FakeCompute(
        aggregates=[
            agg(1, "az-gone"),  # ours, empty, unneeded: deleted
            agg(2, "az-hosts", hosts=("h",)),  # not empty: kept
            agg(3, "az-foreign-meta", metadata={**MARK, "filter_tenant_id": "t"}),  # kept with a warning
            agg(4, "az-not-ours", metadata={}),  # never deleted
            agg(5, "az-other-nova", metadata={"c5c3.io:nova": "ns/other"}),
            agg(6, "az1", "az1"),
            agg(7, "tenant_filter_tests"),
        ]
    )
    p, events = make_pass([{"name": "n1", "phase": "Active", "zone": "az1"}], compute=compute)
    await reconcile_aggregates(p)
    assert [c[1] for c in compute.calls if c[0] == "delete_aggregate"] == [1]
    assert events.reasons() == ["AggregateDeleted", "AggregateKept"]


async def test_a_deleting_pool_ensures_nothing_and_the_last_one_cleans_up() -> None:
    compute = FakeCompute(aggregates=[agg(1, "az1", "az1"), agg(2, "tenant_filter_tests")])
    p, _events = make_pass([], compute=compute, deleting=True)
    await reconcile_aggregates(p)
    assert "create_aggregate" not in compute.names()
    assert [c[1] for c in compute.calls if c[0] == "delete_aggregate"] == [1, 2]
    assert p.aggregates_ensured
    compute = FakeCompute(aggregates=[agg(1, "az1", "az1"), agg(2, "tenant_filter_tests")])
    p, _ = make_pass([], compute=compute, deleting=True, siblings=[sibling([{"name": "x", "zone": "az1"}])])
    await reconcile_aggregates(p)
    assert "delete_aggregate" not in compute.names()  # a live sibling still needs both


async def test_one_pass_deletes_a_bounded_number_of_aggregates_and_comes_back_for_the_rest() -> None:
    """Issue 36 §5: a tenant's API listing 3,000 unneeded marked aggregates made 3,000 DELETEs and
    Events in one pass. One pass deletes ``DELETES_PER_PASS``, is requeued promptly, and a deleting
    pool keeps its finalizer until the last one went."""
    listed = [agg(index, f"az-gone-{index}") for index in range(1, 3001)]
    listed += [agg(4000 + index, f"az-foreign-{index}", metadata={**MARK, "x": "y"}) for index in range(50)]
    compute = FakeCompute(aggregates=listed)
    p, events = make_pass([], compute=compute, deleting=True)
    result = await reconcile_aggregates(p)
    deletes = [c[1] for c in compute.calls if c[0] == "delete_aggregate"]
    assert len(deletes) == DELETES_PER_PASS, f"{len(deletes)} DELETEs in one pass"
    assert deletes == list(range(1, DELETES_PER_PASS + 1))
    assert result.requeue_after == MORE_AFTER
    assert not p.aggregates_ensured  # the teardown waits for the rest
    assert events.reasons().count("AggregateDeleted") == DELETES_PER_PASS
    assert events.reasons().count("AggregateKept") == 1  # one event names the kept ones
    passes = 1
    while result.requeue_after is not None:
        p, events = make_pass([], compute=compute, deleting=True)
        result = await reconcile_aggregates(p)
        passes += 1
    assert passes == 3000 // DELETES_PER_PASS
    assert p.aggregates_ensured
    assert {a.name for a in compute.aggregates} == {f"az-foreign-{index}" for index in range(50)}


class Ticks:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


class SlowCompute(FakeCompute):
    """Every create and delete takes 4 s."""

    def __init__(self, ticks: Ticks, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.ticks = ticks

    async def create_aggregate(self, name: str, zone: str) -> Aggregate:
        self.ticks.now += 4.0
        return await super().create_aggregate(name, zone)

    async def delete_aggregate(self, aggregate_id: int):  # type: ignore[no-untyped-def]
        self.ticks.now += 4.0
        return await super().delete_aggregate(aggregate_id)


async def test_creates_and_deletes_stop_at_the_budget_and_the_next_pass_goes_on() -> None:
    """Issue 36: the aggregates are as many as the zones and as the tenant's compute API lists. A
    pass creates or deletes until its budget is spent (at least one), then requeues at once."""
    from nova_operator.pipeline import LEFT_OVER, Budget

    ticks = Ticks()
    stale = [agg(100 + i, f"old-{i}") for i in range(10)]  # ours, empty, no longer needed
    compute = SlowCompute(ticks, aggregates=list(stale))
    nodes = [{"name": f"n{i}", "phase": "Active", "zone": f"az{i}"} for i in range(9)]
    creates: list[int] = []
    deletes: list[int] = []
    results = []
    for _ in range(10):
        p, _events = make_pass(nodes, compute=compute)
        p.budget = Budget.of(10.0, ticks)
        compute.calls.clear()
        results.append(await reconcile_aggregates(p))
        creates.append(compute.names().count("create_aggregate"))
        deletes.append(compute.names().count("delete_aggregate"))
        if results[-1] != LEFT_OVER:
            break
    # 9 zones and tenant_filter_tests to create, then 10 to delete; 3 calls of 4 s per 10 s pass
    assert creates == [3, 3, 3, 1, 0, 0, 0]
    assert deletes == [0, 0, 0, 2, 3, 3, 2]
    assert results == [LEFT_OVER] * 6 + [results[-1]]
    assert results[-1].requeue_after is None
    assert p.condition("AggregatesReady")["reason"] == "AggregatesEnsured"
    assert sorted(a.name for a in compute.aggregates) == sorted([f"az{i}" for i in range(9)] + [TFT])
