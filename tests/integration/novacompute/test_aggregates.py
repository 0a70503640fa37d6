"""The Aggregates step (novacompute-crd.md §11) over a pool stored on the real API server, with a
compute-client double (the compute API is not the API server). Siblings are NovaComputes stored on
kube-apiserver too, handed to the step as the pools index would."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from simcluster.hazards.hostile import HostileServer

from nova_operator.openstack import Aggregate, AggregateExists, ComputeAPIError, Credentials
from nova_operator.pipeline import LEFT_OVER, Budget
from nova_operator.reconcilers.compute.aggregates import DELETES_PER_PASS, MORE_AFTER, reconcile_aggregates
from tests.compute_api import FakeCompute
from tests.integration.novacompute.passes import Stage

pytestmark = pytest.mark.integration
TFT = "tenant_filter_tests"


def mark(stage: Stage, nova: str = "nova") -> dict[str, str]:
    return {"c5c3.io:nova": f"{stage.ns}/{nova}"}


def agg(
    id_: int, name: str, zone: str = "", hosts: tuple[str, ...] = (), metadata: dict[str, str] | None = None
) -> Aggregate:
    return Aggregate(id_, name, zone, hosts, metadata if metadata is not None else {})


def reason(p: object) -> str:
    c = p.condition("AggregatesReady")  # type: ignore[attr-defined]
    assert c is not None
    return str(c["reason"])


async def test_creates_and_marks_the_zone_aggregates_and_tenant_filter_tests(stage: Stage) -> None:
    compute = FakeCompute()
    p, events = await stage.ledger_pass(
        [{"name": "n1", "phase": "Active", "zone": "az1"}, {"name": "n2", "phase": "Pending", "zone": "az2"}],
        compute,
    )
    assert (await reconcile_aggregates(p)).requeue_after is None
    creates = [c[1] for c in compute.calls if c[0] == "create_aggregate"]
    assert creates == [("az1", "az1"), ("az2", "az2"), (TFT, "")]
    marks = [c[1][1] for c in compute.calls if c[0] == "set_aggregate_metadata"]
    assert marks == [mark(stage)] * 3
    assert events.reasons() == ["AggregateCreated"] * 3
    assert reason(p) == "AggregatesEnsured"
    assert p.aggregates_ensured


async def test_an_existing_aggregate_is_used_as_is_and_a_zone_mismatch_is_reported(stage: Stage) -> None:
    compute = FakeCompute(aggregates=[agg(1, "az1", "other-az"), agg(2, TFT, metadata=mark(stage))])
    p, _ = await stage.ledger_pass([{"name": "n1", "phase": "Active", "zone": "az1"}], compute)
    assert (await reconcile_aggregates(p)).requeue_after is None  # not a wait
    assert "create_aggregate" not in compute.names()
    c = p.condition("AggregatesReady")
    assert c is not None
    assert (c["status"], c["reason"]) == ("False", "AggregateZoneMismatch")
    assert "other-az" in c["message"]
    assert not p.aggregates_ensured


async def test_nodes_without_zone_are_reported_but_the_other_zones_ensured(stage: Stage) -> None:
    compute = FakeCompute()
    p, _ = await stage.ledger_pass(
        [{"name": "n1", "phase": "Active"}, {"name": "n2", "phase": "Active", "zone": "az2"}], compute
    )
    assert (await reconcile_aggregates(p)).requeue_after is None
    assert reason(p) == "NodesWithoutZone"
    assert [c[1][0] for c in compute.calls if c[0] == "create_aggregate"] == ["az2", TFT]


async def test_a_concurrent_create_waits_10s_and_api_errors_requeue_30s(stage: Stage) -> None:
    compute = FakeCompute()
    cr = await stage.pool(nodes=[{"name": "n1", "phase": "Active", "zone": "az1"}])
    p, _ = stage.pass_over(cr, compute=compute)

    async def racing(name: str, zone: str) -> Aggregate:
        raise AggregateExists("409", status=409)

    compute.create_aggregate = racing  # type: ignore[method-assign]
    assert (await reconcile_aggregates(p)).requeue_after == 10
    assert reason(p) == "WaitingForAggregate"
    p, _ = stage.pass_over(cr, compute=FakeCompute(fail={"list_aggregates": ComputeAPIError("down")}))
    assert (await reconcile_aggregates(p)).requeue_after == 30
    assert reason(p) == "ComputeAPIError"


async def test_a_failed_mark_deletes_the_new_aggregate(stage: Stage) -> None:
    compute = FakeCompute(fail={"set_aggregate_metadata": ComputeAPIError("boom")})
    p, _ = await stage.ledger_pass([{"name": "n1", "phase": "Active", "zone": "az1"}], compute)
    assert (await reconcile_aggregates(p)).requeue_after == 30
    assert "delete_aggregate" in compute.names()
    assert compute.aggregates == []


async def test_cleanup_deletes_only_empty_unneeded_marked_aggregates(stage: Stage) -> None:
    ours = mark(stage)
    compute = FakeCompute(
        aggregates=[
            agg(1, "az-gone", metadata=ours),  # ours, empty, unneeded: deleted
            agg(2, "az-hosts", hosts=("h",), metadata=ours),  # not empty: kept
            agg(3, "az-foreign-meta", metadata={**ours, "filter_tenant_id": "t"}),  # kept with a warning
            agg(4, "az-not-ours"),  # never deleted
            agg(5, "az-other-nova", metadata=mark(stage, "other")),
            agg(6, "az1", "az1", metadata=ours),
            agg(7, TFT, metadata=ours),
        ]
    )
    p, events = await stage.ledger_pass([{"name": "n1", "phase": "Active", "zone": "az1"}], compute)
    await reconcile_aggregates(p)
    assert [c[1] for c in compute.calls if c[0] == "delete_aggregate"] == [1]
    assert events.reasons() == ["AggregateDeleted", "AggregateKept"]


async def test_a_deleting_pool_ensures_nothing_and_the_last_one_cleans_up(stage: Stage) -> None:
    ours = mark(stage)
    compute = FakeCompute(aggregates=[agg(1, "az1", "az1", metadata=ours), agg(2, TFT, metadata=ours)])
    cr = await stage.pool(deleting=True, nodes=[])
    p, _ = stage.pass_over(cr, compute=compute)
    assert p.deleting  # the server set the deletionTimestamp; the finalizer holds the pool
    await reconcile_aggregates(p)
    assert "create_aggregate" not in compute.names()
    assert [c[1] for c in compute.calls if c[0] == "delete_aggregate"] == [1, 2]
    assert p.aggregates_ensured
    compute = FakeCompute(aggregates=[agg(1, "az1", "az1", metadata=ours), agg(2, TFT, metadata=ours)])
    live = await stage.pool("other", nodes=[{"name": "x", "phase": "Active", "zone": "az1"}])
    p, _ = stage.pass_over(cr, compute=compute, siblings=[live])
    await reconcile_aggregates(p)
    assert "delete_aggregate" not in compute.names()  # a live sibling still needs both


async def test_one_pass_deletes_a_bounded_number_of_aggregates_and_comes_back_for_the_rest(
    stage: Stage,
) -> None:
    """Issue 36 §5: a tenant's API listing 3,000 unneeded marked aggregates made 3,000 DELETEs and
    Events in one pass. One pass deletes ``DELETES_PER_PASS``, is requeued promptly, and a deleting
    pool keeps its finalizer until the last one went."""
    ours = mark(stage)
    listed = [agg(index, f"az-gone-{index}", metadata=ours) for index in range(1, 3001)]
    listed += [agg(4000 + index, f"az-foreign-{index}", metadata={**ours, "x": "y"}) for index in range(50)]
    compute = FakeCompute(aggregates=listed)
    cr = await stage.pool(deleting=True, nodes=[])
    p, events = stage.pass_over(cr, compute=compute)
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
        p, events = stage.pass_over(cr, compute=compute)
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
    """Every create and delete takes 4 s (on the budget's clock)."""

    def __init__(self, ticks: Ticks, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.ticks = ticks

    async def create_aggregate(self, name: str, zone: str) -> Aggregate:
        self.ticks.now += 4.0
        return await super().create_aggregate(name, zone)

    async def delete_aggregate(self, aggregate_id: int):  # type: ignore[no-untyped-def]
        self.ticks.now += 4.0
        return await super().delete_aggregate(aggregate_id)


async def test_creates_and_deletes_stop_at_the_budget_and_the_next_pass_goes_on(stage: Stage) -> None:
    """Issue 36: the aggregates are as many as the zones and as the tenant's compute API lists. A
    pass creates or deletes until its budget is spent (at least one), then requeues at once."""
    ticks = Ticks()
    stale = [agg(100 + i, f"old-{i}", metadata=mark(stage)) for i in range(10)]  # ours, empty, unneeded
    compute = SlowCompute(ticks, aggregates=list(stale))
    cr = await stage.pool(nodes=[{"name": f"n{i}", "phase": "Active", "zone": f"az{i}"} for i in range(9)])
    creates: list[int] = []
    deletes: list[int] = []
    results = []
    for _ in range(10):
        p, _events = stage.pass_over(cr, compute=compute)
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
    assert reason(p) == "AggregatesEnsured"
    assert sorted(a.name for a in compute.aggregates) == sorted([f"az{i}" for i in range(9)] + [TFT])


# -- a compute API error body never reaches a NovaCompute condition or event (issue 26, item 3) ------

MARKER = "MARKER-7f3a-remote-body"


@pytest.fixture
async def hostile() -> AsyncIterator[HostileServer]:
    server = await HostileServer().start()
    server.on("POST", "/v3/auth/tokens", HostileServer.token())
    try:
        yield server
    finally:
        await server.stop()


async def test_an_error_body_never_reaches_the_aggregates_condition(
    stage: Stage, hostile: HostileServer
) -> None:
    hostile.on("GET", "/v2.1/os-aggregates", HostileServer.answer(503, text=MARKER * 40))
    p, events = await stage.ledger_pass([{"name": "n1", "phase": "Active", "zone": "az1"}])
    p._client = None
    p.credentials = Credentials(hostile.url, "nova", "pw", "service", "Default", "Default")
    p.nova_url = hostile.url
    await reconcile_aggregates(p)
    cond = p.condition("AggregatesReady")
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "ComputeAPIError")
    assert cond["message"] == "GET /v2.1/os-aggregates: HTTP 503 Service Unavailable"
    assert all(MARKER not in message for _, _, message in events.emitted)
