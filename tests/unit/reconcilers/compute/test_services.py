"""The Services step's walk over a ledger (novacompute-crd.md §12), with a compute-client double."""

from __future__ import annotations

import pytest

from nova_operator.decisions.nodeplan import Plan
from nova_operator.openstack import ComputeAPIError, DeleteOutcome
from nova_operator.reconcilers.compute.context import ComputeIntervals
from nova_operator.reconcilers.compute.services import poll_interval, reconcile_services
from tests.unit.reconcilers.compute.fakes import (
    FakeCompute,
    FakeKube,
    api_deployment,
    make_pass,
    pod,
    service,
)

REASON = "c5c3.io: leaving NovaCompute ns/pool"


def cond(p, cond_type="ServicesReady"):  # type: ignore[no-untyped-def]
    c = p.condition(cond_type)
    return (c["status"], c["reason"])


def test_poll_is_the_shortest_need_of_any_entry() -> None:
    every = ComputeIntervals()
    assert poll_interval([], every) == 60
    assert poll_interval([{"phase": "Active"}, {"phase": "Conflict"}], every) == 60
    assert poll_interval([{"phase": "Active"}, {"phase": "Pending"}], every) == 30
    assert poll_interval([{"phase": "Draining"}, {"phase": "Releasing"}], every) == 10
    assert ComputeIntervals().scaled(0.5).settled == 30


async def test_registered_and_mapped_pending_becomes_active_and_unmapped_starts_discovery() -> None:
    compute = FakeCompute(services={"n1": service("n1"), "n2": service("n2")}, mapped={"n1"})
    kube = FakeKube(objects={("deployments", "nova"): api_deployment()})
    p, events = make_pass(
        [{"name": "n1", "phase": "Pending"}, {"name": "n2", "phase": "Pending"}], compute=compute, kube=kube
    )
    result = await reconcile_services(p)
    assert [(e["name"], e["phase"]) for e in p.nodes] == [("n1", "Active"), ("n2", "Pending")]
    assert p.nodes[0]["serviceID"] == "uuid-n1"
    assert cond(p) == ("False", "WaitingForHostMapping")
    assert (
        p.condition("ServicesReady")["message"]
        == "hosts not mapped to a cell yet: n2; discovery Job nova-discover-hosts started"
    )
    assert result.requeue_after == 10  # discovery runs: a short poll
    (job,) = kube.created
    assert job["metadata"]["name"] == "nova-discover-hosts"
    assert job["metadata"]["ownerReferences"][0]["uid"] == "nova-uid"
    assert job["spec"]["backoffLimit"] == 0
    assert job["spec"]["activeDeadlineSeconds"] == 300
    assert job["spec"]["ttlSecondsAfterFinished"] == 300
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "ghcr.io/c5c3/nova:2025.2"
    assert container["command"] == [
        "nova-manage",
        "--config-dir",
        "/etc/nova/nova.conf.d",
        "cell_v2",
        "discover_hosts",
        "--verbose",
    ]
    assert job["spec"]["template"]["spec"]["volumes"][0] == {
        "name": "config",
        "configMap": {"name": "nova-config-abc"},
    }
    assert job["spec"]["template"]["spec"]["securityContext"] == {"fsGroup": 42424}
    assert job["metadata"]["labels"]["app.kubernetes.io/component"] == "discover-hosts"
    assert events.reasons() == ["HostDiscoveryStarted"]


def _job(condition: str | None, at: str = "2026-11-29T09:59:50Z") -> dict[str, object]:
    conds = (
        [{"type": condition, "status": "True", "lastTransitionTime": at, "message": "BackoffLimitExceeded"}]
        if condition
        else []
    )
    owner = [{"kind": "Nova", "name": "nova", "uid": "nova-uid", "controller": True}]  # the Nova's Job
    meta = {"name": "nova-discover-hosts", "ownerReferences": owner}
    return {"metadata": meta, "status": {"conditions": conds}}


def _strangers_job() -> dict[str, object]:
    job = _job("Complete", "2026-11-29T09:59:00Z")
    job["metadata"] = {"name": "nova-discover-hosts", "labels": {"app": "someone-else"}}
    return job


@pytest.mark.parametrize(
    ("job", "note", "deleted", "reasons"),
    [
        (None, "no discovery Job can run yet: the Nova API Deployment mounts no config", False, []),
        (_job(None), "discovery Job nova-discover-hosts is running", False, []),
        (_job("Complete"), "discovery Job nova-discover-hosts finished and will be replaced", False, []),
        (_job("Failed"), "discovery Job nova-discover-hosts failed and will be replaced", False, []),
        (
            _job("Complete", "2026-11-29T09:59:00Z"),
            "discovery Job nova-discover-hosts finished; a new one starts on the next pass",
            True,
            [],
        ),
        (
            _job("Failed", "2026-11-29T09:59:00Z"),
            "discovery Job nova-discover-hosts failed; a new one starts on the next pass",
            True,
            ["HostDiscoveryFailed"],
        ),
        (  # issue 26: a Job of that name the Nova does not hold is never deleted
            _strangers_job(),
            "a Job nova-discover-hosts that is not the Nova's is in the way (it has no controller owner "
            "reference and does not carry this CR's instance labels); it is left alone",
            False,
            [],
        ),
    ],
)
async def test_discovery_job_state_machine(job, note, deleted, reasons) -> None:  # type: ignore[no-untyped-def]
    objects = {("deployments", "nova"): api_deployment(config_map=None)}
    if job is not None:
        objects[("jobs", "nova-discover-hosts")] = job
    kube = FakeKube(objects=objects)
    p, events = make_pass(
        [{"name": "n1", "phase": "Pending"}], compute=FakeCompute(services={"n1": service("n1")}), kube=kube
    )
    await reconcile_services(p)
    assert p.condition("ServicesReady")["message"] == f"hosts not mapped to a cell yet: n1; {note}"
    assert (("jobs", "nova-discover-hosts") in kube.deleted) is deleted
    assert kube.created == []
    assert events.reasons() == reasons


async def test_a_discovery_failure_is_host_discovery_error_and_polls() -> None:
    class Broken(FakeKube):
        async def get(self, ref, name, namespace=None):  # type: ignore[no-untyped-def]
            from nova_operator.kube import errors

            raise errors.Forbidden("jobs is forbidden", status=403)

    p, _ = make_pass(
        [{"name": "n1", "phase": "Pending"}],
        compute=FakeCompute(services={"n1": service("n1")}),
        kube=Broken(),
    )
    result = await reconcile_services(p)
    assert cond(p) == ("False", "HostDiscoveryError")
    assert result.requeue_after == 30


async def test_no_service_stays_pending_and_an_active_without_service_drops_back() -> None:
    compute = FakeCompute()
    p, _ = make_pass(
        [
            {"name": "n1", "phase": "Active", "serviceID": "old", "serviceStatus": "enabled"},
            {"name": "n2", "phase": "Pending"},
        ],
        compute=compute,
    )
    await reconcile_services(p)
    assert p.nodes == [{"name": "n1", "phase": "Pending"}, {"name": "n2", "phase": "Pending"}]
    assert cond(p) == ("False", "WaitingForServices")
    assert "mapped_hosts" not in compute.names()  # no Pending entry has a service: no mapping read


async def test_an_active_node_is_never_rechecked_for_mapping_and_down_is_reported() -> None:
    compute = FakeCompute(services={"n1": service("n1", state="down")})
    p, _ = make_pass([{"name": "n1", "phase": "Active"}], compute=compute)
    result = await reconcile_services(p)
    assert p.nodes[0]["phase"] == "Active"
    assert "mapped_hosts" not in compute.names()
    assert cond(p) == ("False", "ServicesDown")
    assert result.requeue_after == 60


async def test_drain_disables_an_enabled_service_once_and_counts_servers() -> None:
    compute = FakeCompute(services={"n1": service("n1")}, servers={"n1": 3})
    p, events = make_pass([{"name": "n1", "phase": "Draining"}], compute=compute)
    await reconcile_services(p)
    assert ("disable_service", ("uuid-n1", REASON)) in compute.calls
    assert p.nodes[0] | {} == {
        "name": "n1",
        "phase": "Draining",
        "serviceID": "uuid-n1",
        "serviceStatus": "disabled",
        "serviceState": "up",
        "disabledReason": REASON,
        "instances": 3,
    }
    assert events.reasons() == ["ComputeServiceDisabled"]
    assert cond(p) == ("True", "Draining")
    assert p.condition("ServicesReady")["message"] == "n1: 3 instances"


class UnansweredDisable(FakeCompute):
    """Nova saves the disable (when ``lands``), then holds the answer past the request timeout (as
    it does while it waits on a dead nova-compute's RPC): the client sees no answer at all."""

    lands: bool = True

    async def disable_service(self, service_id: str, reason: str) -> None:
        self.calls.append(("disable_service", (service_id, reason)))
        if self.lands:
            host = next(h for h, s in self.services.items() if s.id == service_id)
            self.services[host] = service(host, status="disabled", reason=reason)
        raise ComputeAPIError(f"PUT /v2.1/os-services/{service_id}: timed out")


async def test_a_disable_without_an_answer_that_took_effect_counts_and_is_reported_once() -> None:
    compute = UnansweredDisable(services={"n1": service("n1")}, servers={"n1": 1})
    p, events = make_pass([{"name": "n1", "phase": "Draining"}], compute=compute)
    await reconcile_services(p)
    assert compute.names().count("disable_service") == 1
    assert (p.nodes[0]["serviceStatus"], p.nodes[0]["disabledReason"]) == ("disabled", REASON)
    assert p.nodes[0]["instances"] == 1
    assert events.reasons() == ["ComputeServiceDisabled"]
    assert cond(p) == ("True", "Draining")


async def test_a_disable_without_an_answer_that_did_not_take_effect_is_a_compute_api_error() -> None:
    compute = UnansweredDisable(services={"n1": service("n1")}, servers={"n1": 1})
    compute.lands = False
    ledger = [{"name": "n1", "phase": "Draining"}]
    p, events = make_pass(ledger, compute=compute)
    result = await reconcile_services(p)
    assert p.nodes == ledger
    assert events.reasons() == []
    assert cond(p) == ("False", "ComputeAPIError")
    assert result.requeue_after == 30


async def test_a_service_someone_else_disabled_keeps_its_reason_and_gets_no_put() -> None:
    compute = FakeCompute(
        services={"n1": service("n1", status="disabled", reason="hvo: maintenance")}, servers={"n1": 1}
    )
    p, events = make_pass([{"name": "n1", "phase": "Draining"}], compute=compute)
    await reconcile_services(p)
    assert "disable_service" not in compute.names()
    assert p.nodes[0]["disabledReason"] == "hvo: maintenance"
    assert events.reasons() == []


async def test_servers_are_counted_without_a_service_and_zero_means_releasing() -> None:
    compute = FakeCompute()
    p, _ = make_pass([{"name": "n1", "phase": "Draining", "instances": 4}], compute=compute)
    result = await reconcile_services(p)
    assert ("count_servers", "n1") in compute.calls
    assert p.nodes == [{"name": "n1", "phase": "Releasing"}]
    assert result.requeue_after == 10


async def test_release_waits_for_the_pod_then_deletes_the_service() -> None:
    compute = FakeCompute(services={"n1": service("n1", status="disabled")})
    kube = FakeKube([pod("n1"), pod("n9", phase="Succeeded")])
    p, events = make_pass([{"name": "n1", "phase": "Releasing"}], compute=compute, kube=kube)
    await reconcile_services(p)
    assert p.nodes[0]["phase"] == "Releasing"
    assert "delete_service" not in compute.names()
    kube.pods = [pod("n1", phase="Failed")]
    p, events = make_pass([{"name": "n1", "phase": "Releasing"}], compute=compute, kube=kube)
    result = await reconcile_services(p)
    assert p.nodes == []
    assert ("delete_service", "uuid-n1") in compute.calls
    assert events.reasons() == ["ComputeServiceDeleted"]
    assert result.requeue_after == 10  # the node dropped this pass still polls soon (its aggregates)


@pytest.mark.parametrize(
    ("answer", "kept"), [(DeleteOutcome.CONFLICT, "Draining"), (DeleteOutcome.GONE, None)]
)
async def test_delete_409_goes_back_to_draining_and_404_is_done(
    answer: DeleteOutcome, kept: str | None
) -> None:
    compute = FakeCompute(
        services={"n1": service("n1", status="disabled")}, delete_answers={"uuid-n1": answer}
    )
    p, _ = make_pass([{"name": "n1", "phase": "Releasing"}], compute=compute)
    await reconcile_services(p)
    assert [e["phase"] for e in p.nodes] == ([kept] if kept else [])


async def test_a_handover_drops_the_entry_without_any_nova_call() -> None:
    compute = FakeCompute(services={"n1": service("n1")})
    plan = Plan(
        nodes=[], excluded=frozenset(), keep_pods=frozenset(), handover=frozenset({"n1"}), new_conflicts=()
    )
    p, _ = make_pass([{"name": "n1", "phase": "Releasing"}], compute=compute, plan=plan)
    await reconcile_services(p)
    assert p.nodes == []
    assert compute.names() == ["list_services"]


async def test_one_pod_list_per_pass_filtered_to_the_only_releasing_node() -> None:
    compute = FakeCompute()
    kube = FakeKube([pod("n2")])
    p, _ = make_pass([{"name": "n1", "phase": "Releasing"}], compute=compute, kube=kube)
    await reconcile_services(p)
    assert p.nodes == []  # n2's pod does not hold n1
    kube2 = FakeKube([pod("n2")])
    p, _ = make_pass(
        [{"name": "n1", "phase": "Releasing"}, {"name": "n2", "phase": "Releasing"}],
        compute=compute,
        kube=kube2,
    )
    await reconcile_services(p)
    assert [e["name"] for e in p.nodes] == ["n2"]
    assert kube2.lists == 1


async def test_a_failed_call_stops_the_walk_and_keeps_the_rest_unchanged() -> None:
    compute = FakeCompute(
        services={"n1": service("n1"), "n2": service("n2")},
        servers={"n1": 1},
        fail={"disable_service": ComputeAPIError("PUT /v2.1/os-services/x: HTTP 500: boom", status=500)},
    )
    ledger = [
        {"name": "n0", "phase": "Pending"},
        {"name": "n1", "phase": "Draining"},
        {"name": "n2", "phase": "Draining"},
    ]
    p, _ = make_pass(ledger, compute=compute)
    result = await reconcile_services(p)
    assert p.nodes[0]["phase"] == "Pending"
    assert p.nodes[1:] == ledger[1:]
    assert cond(p) == ("False", "ComputeAPIError")
    assert result.requeue_after == 30


async def test_a_down_cell_or_an_unreachable_nova_makes_no_drain_decision() -> None:
    compute = FakeCompute(fail={"list_services": ComputeAPIError("GET /v2.1/os-services: status UNKNOWN")})
    ledger = [{"name": "n1", "phase": "Draining", "instances": 2}]
    p, _ = make_pass(ledger, compute=compute)
    result = await reconcile_services(p)
    assert p.nodes == ledger
    assert cond(p) == ("False", "ComputeAPIError")
    assert result.requeue_after == 30


async def test_a_failed_hypervisor_read_keeps_pending_and_moves_the_others() -> None:
    compute = FakeCompute(
        services={"n1": service("n1"), "n2": service("n2")},
        fail={"mapped_hosts": ComputeAPIError("GET /v2.1/os-hypervisors/detail: HTTP 500")},
    )
    p, _ = make_pass(
        [{"name": "n1", "phase": "Pending"}, {"name": "n2", "phase": "Draining"}], compute=compute
    )
    result = await reconcile_services(p)
    assert [e["phase"] for e in p.nodes] == ["Pending", "Releasing"]
    assert cond(p) == ("False", "ComputeAPIError")
    assert p.condition("ServicesReady")["message"].startswith("listing hypervisors")
    assert result.requeue_after == 10


async def test_no_nodes_is_services_up() -> None:
    p, _ = make_pass([], compute=FakeCompute())
    assert (await reconcile_services(p)).requeue_after == 60
    assert cond(p) == ("True", "ServicesUp")


class Ticks:
    """The budget's monotonic clock; the compute API's slow calls move it."""

    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


class SlowCounts(FakeCompute):
    """Counting the servers of a host takes 5 s (a slow or loaded compute API)."""

    ticks: Ticks = Ticks()

    async def count_servers(self, host: str) -> int:
        self.ticks.now += 5.0
        return await super().count_servers(host)


async def test_a_walk_over_many_slow_leaving_nodes_ends_at_the_budget_and_the_next_pass_goes_on() -> None:
    """Issue 36 (no budget for a NovaCompute pass): 20 leaving nodes at 5 s a server count held a
    worker 100 s. With a 30 s budget a pass walks 6 of them, keeps the others as they were and
    requeues at once; each next pass begins after the last node the previous one reached."""
    from nova_operator.pipeline import LEFT_OVER, Budget
    from nova_operator.reconcilers.compute.context import ComputeSettings

    hosts = [f"n{i:02}" for i in range(20)]
    ticks = Ticks()
    compute = SlowCounts(services={h: service(h, status="disabled", reason=REASON) for h in hosts})
    compute.ticks = ticks
    settings = ComputeSettings(pass_budget=30.0, monotonic=ticks)
    ledger = [{"name": h, "phase": "Draining"} for h in hosts] + [{"name": "p0", "phase": "Pending"}]
    compute.services["p0"] = service("p0")
    compute.mapped = {"p0"}
    counted: list[list[str]] = []
    results = []
    for _ in range(5):
        p, _events = make_pass(ledger, compute=compute, settings=settings)
        p.budget = Budget.of(settings.pass_budget, ticks)
        compute.calls.clear()
        results.append(await reconcile_services(p))
        counted.append([arg for name, arg in compute.calls if name == "count_servers"])
        ledger = p.nodes
        reached = {host for chunk in counted for host in chunk}
        untouched = [e for e in ledger if e["name"] not in reached and e["name"] != "p0"]
        assert all(e == {"name": e["name"], "phase": "Draining"} for e in untouched)  # as they were
        assert next(e for e in ledger if e["name"] == "p0")["phase"] == "Active"  # walked every pass
    assert counted == [hosts[0:6], hosts[6:12], hosts[12:18], hosts[18:20], []]
    assert results[:3] == [LEFT_OVER] * 3
    # the fourth pass counted the last two and went on to release the first 18 (no slow call)
    assert results[3] != LEFT_OVER
    assert [(e["name"], e["phase"]) for e in ledger] == [("p0", "Active")]  # the fifth released the rest
    assert len(settings.resume) == 0  # a walk that ran to its end leaves nothing to resume


async def test_a_walk_without_a_budget_walks_every_node_in_one_pass() -> None:
    hosts = [f"n{i:02}" for i in range(20)]
    compute = SlowCounts(services={h: service(h, status="disabled", reason=REASON) for h in hosts})
    compute.servers = dict.fromkeys(hosts, 1)
    p, _ = make_pass([{"name": h, "phase": "Draining"} for h in hosts], compute=compute)
    result = await reconcile_services(p)
    assert result.requeue_after == 30  # the Draining poll: no budget, no requeue at once
    assert [arg for name, arg in compute.calls if name == "count_servers"] == hosts
