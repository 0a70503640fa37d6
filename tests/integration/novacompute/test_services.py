"""The Services step's walk over a ledger (novacompute-crd.md §12, §15) on the real API server: the
pool and its ledger, the Nova, its API Deployment, the discovery Job and the pool's pods are stored
by kube-apiserver; the compute API is a double (``tests.compute_api``)."""

from __future__ import annotations

import pytest

from nova_operator.decisions.nodeplan import Plan
from nova_operator.kube import errors
from nova_operator.kube.resources import JOBS, NOVACOMPUTES, PODS
from nova_operator.kube.types import Object
from nova_operator.openstack import ComputeAPIError, DeleteOutcome
from nova_operator.pipeline import LEFT_OVER, Budget
from nova_operator.reconcilers.compute.context import ComputePass, ComputeSettings
from nova_operator.reconcilers.compute.services import reconcile_services
from tests.compute_api import FakeCompute, service
from tests.integration.novacompute.passes import Stage

pytestmark = pytest.mark.integration
JOB = "nova-discover-hosts"


def leaving(stage: Stage) -> str:
    return f"c5c3.io: leaving NovaCompute {stage.ns}/pool"


def cond(p: ComputePass, cond_type: str = "ServicesReady") -> tuple[str, str]:
    c = p.condition(cond_type)
    assert c is not None
    return (c["status"], c["reason"])


def message(p: ComputePass) -> str:
    c = p.condition("ServicesReady")
    assert c is not None
    return str(c["message"])


async def ledger(stage: Stage, nodes: list[Object]) -> Object:
    """The pool's status ledger written as the reconciler writes it; the pool as the server holds it."""
    return await stage.status(NOVACOMPUTES, "pool", {"nodes": nodes})


# -- Pending: registration, mapping and the discovery Job ---------------------------------------------


async def test_registered_and_mapped_pending_becomes_active_and_unmapped_starts_discovery(
    stage: Stage,
) -> None:
    nova = await stage.nova()
    await stage.api_deployment()
    compute = FakeCompute(services={"n1": service("n1"), "n2": service("n2")}, mapped={"n1"})
    p, events = await stage.ledger_pass(
        [{"name": "n1", "phase": "Pending"}, {"name": "n2", "phase": "Pending"}], compute, nova=nova
    )
    result = await reconcile_services(p)
    assert [(e["name"], e["phase"]) for e in p.nodes] == [("n1", "Active"), ("n2", "Pending")]
    assert p.nodes[0]["serviceID"] == "uuid-n1"
    assert cond(p) == ("False", "WaitingForHostMapping")
    assert message(p) == f"hosts not mapped to a cell yet: n2; discovery Job {JOB} started"
    assert result.requeue_after == 10  # discovery runs: a short poll
    (job,) = stage.kube.created
    assert job == await stage.admin.get(JOBS, JOB, stage.ns)  # the server's copy
    assert job["metadata"]["ownerReferences"][0]["uid"] == nova["metadata"]["uid"]
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
        "configMap": {"name": "nova-config-abc", "defaultMode": 420},  # the server's default mode
    }
    assert job["spec"]["template"]["spec"]["securityContext"] == {"fsGroup": 42424}
    assert job["metadata"]["labels"]["app.kubernetes.io/component"] == "discover-hosts"
    assert events.reasons() == ["HostDiscoveryStarted"]


STRANGER = (
    "a Job nova-discover-hosts that is not the Nova's is in the way (it has no controller owner "
    "reference and does not carry this CR's instance labels); it is left alone"
)


@pytest.mark.parametrize(
    ("job", "note", "deleted", "reasons"),
    [
        (None, "no discovery Job can run yet: the Nova API Deployment mounts no config", False, []),
        (("running", ""), f"discovery Job {JOB} is running", False, []),
        (
            ("Complete", "2026-11-29T09:59:50Z"),
            f"discovery Job {JOB} finished and will be replaced",
            False,
            [],
        ),
        (("Failed", "2026-11-29T09:59:50Z"), f"discovery Job {JOB} failed and will be replaced", False, []),
        (
            ("Complete", "2026-11-29T09:59:00Z"),
            f"discovery Job {JOB} finished; a new one starts on the next pass",
            True,
            [],
        ),
        (
            ("Failed", "2026-11-29T09:59:00Z"),
            f"discovery Job {JOB} failed; a new one starts on the next pass",
            True,
            ["HostDiscoveryFailed"],
        ),
        (("stranger", "2026-11-29T09:59:00Z"), STRANGER, False, []),  # issue 26: never deleted
    ],
)
async def test_discovery_job_state_machine(
    stage: Stage, job: tuple[str, str] | None, note: str, deleted: bool, reasons: list[str]
) -> None:
    nova = await stage.nova()
    await stage.api_deployment(config_map=None)
    if job is not None:
        state, at = job
        if state == "stranger":
            await stage.job(JOB, owner=None, labels={"app": "someone-else"})
            await stage.job_ended(JOB, "Complete", at)
        else:
            await stage.job(JOB, owner=nova)  # the Nova's Job (the pass's pool made it)
            if state != "running":
                await stage.job_ended(JOB, state, at)
    compute = FakeCompute(services={"n1": service("n1")})
    p, events = await stage.ledger_pass([{"name": "n1", "phase": "Pending"}], compute, nova=nova)
    await reconcile_services(p)
    assert message(p) == f"hosts not mapped to a cell yet: n1; {note}"
    assert (("jobs", JOB) in stage.kube.deleted()) is deleted
    gone = (await stage.admin.list(JOBS, stage.ns))["items"] == []
    assert gone is (deleted or job is None)
    assert stage.kube.created == []
    assert events.reasons() == reasons


async def test_a_discovery_failure_is_host_discovery_error_and_polls(stage: Stage) -> None:
    nova = await stage.nova()
    compute = FakeCompute(services={"n1": service("n1")})
    p, _ = await stage.ledger_pass([{"name": "n1", "phase": "Pending"}], compute, nova=nova)
    stage.kube.refuse[("get", JOBS.plural)] = errors.Forbidden("jobs is forbidden", status=403)
    result = await reconcile_services(p)
    assert cond(p) == ("False", "HostDiscoveryError")
    assert result.requeue_after == 30


async def test_no_service_stays_pending_and_an_active_without_service_drops_back(stage: Stage) -> None:
    compute = FakeCompute()
    p, _ = await stage.ledger_pass(
        [
            {"name": "n1", "phase": "Active", "serviceID": "old", "serviceStatus": "enabled"},
            {"name": "n2", "phase": "Pending"},
        ],
        compute,
    )
    await reconcile_services(p)
    assert p.nodes == [{"name": "n1", "phase": "Pending"}, {"name": "n2", "phase": "Pending"}]
    assert cond(p) == ("False", "WaitingForServices")
    assert "mapped_hosts" not in compute.names()  # no Pending entry has a service: no mapping read


async def test_a_pending_node_whose_pod_turned_ready_is_looked_at_again_soon(stage: Stage) -> None:
    """nova-compute registers its service seconds after its pod turned Ready (no probes): the pass
    looks again after a quarter of the pod's age since Ready (at least 1 s), while that is shorter
    than the 30 s poll."""
    await stage.pod("n1")
    await stage.pod("n2")
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-29T09:59:40Z"}  # NOW - 20 s
    await stage.status(PODS, "pool-n1", {"phase": "Running", "conditions": [ready]})
    pods = (await stage.admin.list(PODS, stage.ns))["items"]  # as the Pod informer holds them
    compute = FakeCompute()
    p, _ = await stage.ledger_pass(
        [{"name": "n1", "phase": "Pending"}, {"name": "n2", "phase": "Pending"}], compute
    )
    p.listed = lambda ref, ns, labels: pods if ref == PODS else None
    result = await reconcile_services(p)
    assert cond(p) == ("False", "WaitingForServices")
    assert result.requeue_after == 5  # past the 16 s the doubling looks stopped at
    # n2's pod is not Ready: nothing has started there, the spec's poll
    p, _ = stage.pass_over(await ledger(stage, [{"name": "n2", "phase": "Pending"}]), compute=compute)
    p.listed = lambda ref, ns, labels: pods if ref == PODS else None
    assert (await reconcile_services(p)).requeue_after == 30
    # the service registered: no early look, the spec's poll (n1 was Pending when the pass began)
    compute = FakeCompute(services={"n1": service("n1")}, mapped={"n1"})
    p, _ = stage.pass_over(await ledger(stage, [{"name": "n1", "phase": "Pending"}]), compute=compute)
    p.listed = lambda ref, ns, labels: pods if ref == PODS else None
    assert (await reconcile_services(p)).requeue_after == 30
    assert p.nodes[0]["phase"] == "Active"


async def test_an_active_node_is_never_rechecked_for_mapping_and_down_is_reported(stage: Stage) -> None:
    compute = FakeCompute(services={"n1": service("n1", state="down")})
    p, _ = await stage.ledger_pass([{"name": "n1", "phase": "Active"}], compute)
    result = await reconcile_services(p)
    assert p.nodes[0]["phase"] == "Active"
    assert "mapped_hosts" not in compute.names()
    assert cond(p) == ("False", "ServicesDown")
    assert result.requeue_after == 60


# -- Draining --------------------------------------------------------------------------------------


async def test_drain_disables_an_enabled_service_once_and_counts_servers(stage: Stage) -> None:
    compute = FakeCompute(services={"n1": service("n1")}, servers={"n1": 3})
    p, events = await stage.ledger_pass([{"name": "n1", "phase": "Draining"}], compute)
    await reconcile_services(p)
    assert ("disable_service", ("uuid-n1", leaving(stage))) in compute.calls
    assert p.nodes[0] | {} == {
        "name": "n1",
        "phase": "Draining",
        "serviceID": "uuid-n1",
        "serviceStatus": "disabled",
        "serviceState": "up",
        "disabledReason": leaving(stage),
        "instances": 3,
    }
    assert events.reasons() == ["ComputeServiceDisabled"]
    assert cond(p) == ("True", "Draining")
    assert message(p) == "n1: 3 instances"
    assert (await ledger(stage, p.nodes))["status"]["nodes"] == p.nodes  # the server keeps the entry


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


async def test_a_disable_without_an_answer_that_took_effect_counts_and_is_reported_once(
    stage: Stage,
) -> None:
    compute = UnansweredDisable(services={"n1": service("n1")}, servers={"n1": 1})
    p, events = await stage.ledger_pass([{"name": "n1", "phase": "Draining"}], compute)
    await reconcile_services(p)
    assert compute.names().count("disable_service") == 1
    assert (p.nodes[0]["serviceStatus"], p.nodes[0]["disabledReason"]) == ("disabled", leaving(stage))
    assert p.nodes[0]["instances"] == 1
    assert events.reasons() == ["ComputeServiceDisabled"]
    assert cond(p) == ("True", "Draining")


async def test_a_disable_without_an_answer_that_did_not_take_effect_is_a_compute_api_error(
    stage: Stage,
) -> None:
    compute = UnansweredDisable(services={"n1": service("n1")}, servers={"n1": 1})
    compute.lands = False
    entries = [{"name": "n1", "phase": "Draining"}]
    p, events = await stage.ledger_pass(entries, compute)
    result = await reconcile_services(p)
    assert p.nodes == entries
    assert events.reasons() == []
    assert cond(p) == ("False", "ComputeAPIError")
    assert result.requeue_after == 30


async def test_a_service_someone_else_disabled_keeps_its_reason_and_gets_no_put(stage: Stage) -> None:
    compute = FakeCompute(
        services={"n1": service("n1", status="disabled", reason="hvo: maintenance")}, servers={"n1": 1}
    )
    p, events = await stage.ledger_pass([{"name": "n1", "phase": "Draining"}], compute)
    await reconcile_services(p)
    assert "disable_service" not in compute.names()
    assert p.nodes[0]["disabledReason"] == "hvo: maintenance"
    assert events.reasons() == []


async def test_servers_are_counted_without_a_service_and_zero_means_releasing(stage: Stage) -> None:
    compute = FakeCompute()
    p, _ = await stage.ledger_pass([{"name": "n1", "phase": "Draining", "instances": 4}], compute)
    result = await reconcile_services(p)
    assert ("count_servers", "n1") in compute.calls
    assert p.nodes == [{"name": "n1", "phase": "Releasing"}]
    # the DaemonSet keeps the pod by its hold term until a pass renders it without: that pass comes
    # at once (issue 41), not after the Releasing poll
    assert result.requeue_after == 1


# -- Releasing -------------------------------------------------------------------------------------


async def test_release_waits_for_the_pod_then_deletes_the_service(stage: Stage) -> None:
    compute = FakeCompute(services={"n1": service("n1", status="disabled")})
    await stage.pod("n1")
    await stage.pod("n9", phase="Succeeded")
    p, events = await stage.ledger_pass([{"name": "n1", "phase": "Releasing"}], compute)
    await reconcile_services(p)
    assert p.nodes[0]["phase"] == "Releasing"
    assert "delete_service" not in compute.names()
    await stage.status(PODS, "pool-n1", {"phase": "Failed"})
    p, events = stage.pass_over(p.cr, compute=compute)
    result = await reconcile_services(p)
    assert p.nodes == []
    assert ("delete_service", "uuid-n1") in compute.calls
    assert events.reasons() == ["ComputeServiceDeleted"]
    assert result.requeue_after == 10  # the node dropped this pass still polls soon (its aggregates)


@pytest.mark.parametrize(
    ("answer", "kept"), [(DeleteOutcome.CONFLICT, "Draining"), (DeleteOutcome.GONE, None)]
)
async def test_delete_409_goes_back_to_draining_and_404_is_done(
    stage: Stage, answer: DeleteOutcome, kept: str | None
) -> None:
    compute = FakeCompute(
        services={"n1": service("n1", status="disabled")}, delete_answers={"uuid-n1": answer}
    )
    p, _ = await stage.ledger_pass([{"name": "n1", "phase": "Releasing"}], compute)
    await reconcile_services(p)
    assert [e["phase"] for e in p.nodes] == ([kept] if kept else [])


async def test_a_handover_drops_the_entry_without_any_nova_call(stage: Stage) -> None:
    compute = FakeCompute(services={"n1": service("n1")})
    plan = Plan(
        nodes=[], excluded=frozenset(), keep_pods=frozenset(), handover=frozenset({"n1"}), new_conflicts=()
    )
    p, _ = await stage.ledger_pass([{"name": "n1", "phase": "Releasing"}], compute, plan=plan)
    await reconcile_services(p)
    assert p.nodes == []
    assert compute.names() == ["list_services"]


async def test_one_pod_list_per_pass_filtered_to_the_only_releasing_node(stage: Stage) -> None:
    compute = FakeCompute()
    await stage.pod("n2")
    p, _ = await stage.ledger_pass([{"name": "n1", "phase": "Releasing"}], compute)
    await reconcile_services(p)
    assert p.nodes == []  # n2's pod does not hold n1
    cr = await ledger(stage, [{"name": "n1", "phase": "Releasing"}, {"name": "n2", "phase": "Releasing"}])
    lists = len(stage.kube.of_verb("list", PODS.plural))
    p, _ = stage.pass_over(cr, compute=compute)
    await reconcile_services(p)
    assert [e["name"] for e in p.nodes] == ["n2"]
    assert len(stage.kube.of_verb("list", PODS.plural)) - lists == 1
    selectors = {c[3] for c in stage.kube.of_verb("list", PODS.plural)}
    assert selectors == {
        "app.kubernetes.io/component=nova-compute,app.kubernetes.io/instance=pool,"
        "app.kubernetes.io/name=novacompute"
    }


async def test_a_failed_pod_list_during_a_release_is_pod_list_error_and_raises(stage: Stage) -> None:
    compute = FakeCompute(services={"n1": service("n1", status="disabled")})
    p, _ = await stage.ledger_pass([{"name": "n1", "phase": "Releasing"}], compute)
    stage.kube.refuse[("list", PODS.plural)] = errors.Forbidden(
        "pods is forbidden: User cannot list pods", status=403
    )
    with pytest.raises(Exception, match="listing the pool's pods"):
        await reconcile_services(p)
    c = p.condition("ServicesReady")
    assert c is not None
    assert (c["status"], c["reason"]) == ("False", "PodListError")
    assert "forbidden" in c["message"]
    assert p.nodes == [{"name": "n1", "phase": "Releasing"}]  # the entry is kept unchanged
    assert "delete_service" not in compute.names()


# -- failures of the compute API -------------------------------------------------------------------


async def test_a_failed_call_stops_the_walk_and_keeps_the_rest_unchanged(stage: Stage) -> None:
    compute = FakeCompute(
        services={"n1": service("n1"), "n2": service("n2")},
        servers={"n1": 1},
        fail={"disable_service": ComputeAPIError("PUT /v2.1/os-services/x: HTTP 500: boom", status=500)},
    )
    entries = [
        {"name": "n0", "phase": "Pending"},
        {"name": "n1", "phase": "Draining"},
        {"name": "n2", "phase": "Draining"},
    ]
    p, _ = await stage.ledger_pass(entries, compute)
    result = await reconcile_services(p)
    assert p.nodes[0]["phase"] == "Pending"
    assert p.nodes[1:] == entries[1:]
    assert cond(p) == ("False", "ComputeAPIError")
    assert result.requeue_after == 30


async def test_a_down_cell_or_an_unreachable_nova_makes_no_drain_decision(stage: Stage) -> None:
    compute = FakeCompute(fail={"list_services": ComputeAPIError("GET /v2.1/os-services: status UNKNOWN")})
    entries = [{"name": "n1", "phase": "Draining", "instances": 2}]
    p, _ = await stage.ledger_pass(entries, compute)
    result = await reconcile_services(p)
    assert p.nodes == entries
    assert cond(p) == ("False", "ComputeAPIError")
    assert result.requeue_after == 30


async def test_a_failed_hypervisor_read_keeps_pending_and_moves_the_others(stage: Stage) -> None:
    compute = FakeCompute(
        services={"n1": service("n1"), "n2": service("n2")},
        fail={"mapped_hosts": ComputeAPIError("GET /v2.1/os-hypervisors/detail: HTTP 500")},
    )
    p, _ = await stage.ledger_pass(
        [{"name": "n1", "phase": "Pending"}, {"name": "n2", "phase": "Draining"}], compute
    )
    result = await reconcile_services(p)
    assert [e["phase"] for e in p.nodes] == ["Pending", "Releasing"]
    assert cond(p) == ("False", "ComputeAPIError")
    assert message(p).startswith("listing hypervisors")
    assert result.requeue_after == 1  # the computed poll: n2 turned Releasing, its pod goes next pass


async def test_no_nodes_is_services_up(stage: Stage) -> None:
    p, _ = await stage.ledger_pass([], FakeCompute())
    assert (await reconcile_services(p)).requeue_after == 60
    assert cond(p) == ("True", "ServicesUp")


# -- the pass budget -------------------------------------------------------------------------------


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


async def test_a_walk_over_many_slow_leaving_nodes_ends_at_the_budget_and_the_next_pass_goes_on(
    stage: Stage,
) -> None:
    """Issue 36 (no budget for a NovaCompute pass): 20 leaving nodes at 5 s a server count held a
    worker 100 s. With a 30 s budget a pass walks 6 of them, keeps the others as they were and
    requeues at once; each next pass begins after the last node the previous one reached (the
    ledger each pass leaves is written to the pool's status, as the reconciler does)."""
    hosts = [f"n{i:02}" for i in range(20)]
    ticks = Ticks()
    compute = SlowCounts(services={h: service(h, status="disabled", reason=leaving(stage)) for h in hosts})
    compute.ticks = ticks
    settings = ComputeSettings(pass_budget=30.0, monotonic=ticks)
    entries: list[Object] = [{"name": h, "phase": "Draining"} for h in hosts] + [
        {"name": "p0", "phase": "Pending"}
    ]
    compute.services["p0"] = service("p0")
    compute.mapped = {"p0"}
    counted: list[list[str]] = []
    results = []
    cr = await stage.pool(nodes=entries)
    for _ in range(5):
        p, _events = stage.pass_over(cr, compute=compute, settings=settings)
        p.budget = Budget.of(settings.pass_budget or 0.0, ticks)
        compute.calls.clear()
        results.append(await reconcile_services(p))
        counted.append([arg for name, arg in compute.calls if name == "count_servers"])
        cr = await ledger(stage, p.nodes)
        entries = cr["status"]["nodes"]
        reached = {host for chunk in counted for host in chunk}
        untouched = [e for e in entries if e["name"] not in reached and e["name"] != "p0"]
        assert all(e == {"name": e["name"], "phase": "Draining"} for e in untouched)  # as they were
        assert next(e for e in entries if e["name"] == "p0")["phase"] == "Active"  # walked every pass
    assert counted == [hosts[0:6], hosts[6:12], hosts[12:18], hosts[18:20], []]
    assert results[:3] == [LEFT_OVER] * 3
    # the fourth pass counted the last two and went on to release the first 18 (no slow call)
    assert results[3] != LEFT_OVER
    assert [(e["name"], e["phase"]) for e in entries] == [("p0", "Active")]  # the fifth released the rest
    assert len(settings.resume) == 0  # a walk that ran to its end leaves nothing to resume


async def test_a_walk_without_a_budget_walks_every_node_in_one_pass(stage: Stage) -> None:
    hosts = [f"n{i:02}" for i in range(20)]
    compute = SlowCounts(services={h: service(h, status="disabled", reason=leaving(stage)) for h in hosts})
    compute.servers = dict.fromkeys(hosts, 1)
    p, _ = await stage.ledger_pass([{"name": h, "phase": "Draining"} for h in hosts], compute)
    result = await reconcile_services(p)
    assert result.requeue_after == 30  # the Draining poll: no budget, no requeue at once
    assert [arg for name, arg in compute.calls if name == "count_servers"] == hosts
