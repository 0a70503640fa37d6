"""Faults with real processes (issue 25, scenario 4), on the minimal sample and its pool.

- RabbitMQ stops serving for 20 s: the scheduler and conductor pods turn NotReady by their
  ``nova-amqp-ready`` probe (period 5 s, failure threshold 1) within 10 s, the Nova's conditions say
  so, and all recover once the broker serves again, with the same operator process;
- MariaDB restarts: the compute API answers again, and no Job runs again (the same Jobs, no new pod);
- Keystone is unreachable for 60 s (frozen: connections are accepted and never answered, as behind a
  network that drops packets, so every call runs into its timeout): the pool reports
  ``ComputeAPIError`` and disables or deletes no compute service meanwhile (nor after);
- one nova-compute process hangs, Nova reports its service down, the pool reports ``ServicesDown``;
  the process is killed, the kubelet starts it again, its service (the same one) comes back up and
  the pool reports ``ServicesUp``. A killed nova-compute alone is back before Nova could call it down
  (``service_down_time`` is 60 s; the restart takes seconds), so the hang is what makes it go down.

Each test prints its recovery times (``faults: ...``). The module leaves the Nova and the pool Ready.
"""

from __future__ import annotations

import signal
import threading
import time
import urllib.error
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from simcluster import SimHandle
from simcluster.realtier.container_pids import container_pids, send
from simcluster.realtier.services.rabbitmq import amqp_answers

from tests.realnova.realcluster import (
    JSON,
    NAMESPACE,
    NOVA,
    POOL,
    OpenStackClient,
    TierOperator,
    compute_url,
    conditions,
    is_ready,
    not_ready_summary,
    pods,
    wait_for,
)

pytestmark = pytest.mark.realnova

BUS_ROLES = ("scheduler", "conductor")
ROLE_CONDITION = {"scheduler": "SchedulerReady", "conductor": "ConductorReady"}
ROLE_WAITING = {"scheduler": "WaitingForScheduler", "conductor": "WaitingForConductor"}
OUTAGE_RABBITMQ = 20.0
OUTAGE_KEYSTONE = 60.0
NOT_READY_WITHIN = 10.0
HUNG_HOST = "compute-0"
POOL_COMPONENT = f"app.kubernetes.io/instance={POOL},app.kubernetes.io/component=nova-compute"


@dataclass
class Timeline:
    """Seconds since an outage began, by what was seen first."""

    t0: float = field(default_factory=time.monotonic)
    seen: dict[str, float] = field(default_factory=dict)

    def mark(self, what: str) -> None:
        self.seen.setdefault(what, round(time.monotonic() - self.t0, 1))

    def since(self) -> float:
        return time.monotonic() - self.t0


def _pod_ready(pod: JSON) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


def _role_pods(handle: SimHandle, role: str) -> list[JSON]:
    selector = f"app.kubernetes.io/instance={NOVA},app.kubernetes.io/component={role}"
    return [p for p in pods(handle, selector=selector) if not p["metadata"].get("deletionTimestamp")]


def _wait_all_ready(handle: SimHandle, within: float, what: str) -> None:
    wait_for(
        lambda: (is_ready(handle, "novas", NOVA) and is_ready(handle, "novacomputes", POOL)) or None,
        within=within,
        what=what,
        handle=handle,
        detail=lambda: (
            f"nova: {not_ready_summary(handle, 'novas', NOVA)}; "
            f"pool: {not_ready_summary(handle, 'novacomputes', POOL)}"
        ),
    )


class ListenerGone(threading.Thread):
    """Polls the AMQP listener until it stops answering; ``at`` is that moment (monotonic)."""

    def __init__(self, address: str, port: int) -> None:
        super().__init__(name="amqp-listener", daemon=True)
        self.address, self.port = address, port
        self.at: float | None = None

    def run(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if not amqp_answers(self.address, self.port):
                self.at = time.monotonic()
                return
            time.sleep(0.1)


def _watch(check: Callable[[], None], until: float, interval: float = 0.5) -> None:
    """``check()`` every ``interval`` seconds until the monotonic time ``until``."""
    while time.monotonic() < until:
        check()
        time.sleep(interval)


# -- RabbitMQ ------------------------------------------------------------------------------------------


def test_rabbitmq_stopped_for_20_s_turns_the_bus_roles_not_ready_and_all_recover(minimal: SimHandle) -> None:
    handle = minimal
    assert handle.real is not None
    rabbitmq = handle.real.backends.rabbitmq
    operator = TierOperator(handle)
    assert operator.alive, "the operator is not running"
    before = {role: {p["metadata"]["name"] for p in _role_pods(handle, role)} for role in BUS_ROLES}
    assert all(before.values()), before
    reasons: dict[str, set[str]] = {role: set() for role in BUS_ROLES}

    def look(timeline: Timeline) -> None:
        for role in BUS_ROLES:
            now = _role_pods(handle, role)
            if now and not any(_pod_ready(p) for p in now):
                timeline.mark(f"{role} pods NotReady")
        conds = conditions(handle, "novas", NOVA)
        for role in BUS_ROLES:
            c = conds.get(ROLE_CONDITION[role], {})
            if c.get("status") == "False":
                reasons[role].add(str(c.get("reason")))
                timeline.mark(f"{ROLE_CONDITION[role]}=False")
        if conds.get("Ready", {}).get("status") == "False":
            timeline.mark("Ready=False")

    # rabbitmqctl boots an Erlang VM first (seconds): the outage begins when the listener goes away,
    # and is watched from then on while the call finishes
    listener = ListenerGone(rabbitmq.address, rabbitmq.port)
    listener.start()
    call = time.monotonic()
    stopper = threading.Thread(target=rabbitmq.stop_app, name="stop-app", daemon=True)
    stopper.start()
    listener.join(60)
    assert listener.at is not None, "the broker still answered a minute after stop_app began"
    outage = Timeline(t0=listener.at)
    outage.seen["listener gone after the call began"] = round(outage.t0 - call, 1)
    _watch(lambda: look(outage), outage.t0 + OUTAGE_RABBITMQ)
    stopper.join(30)
    assert not stopper.is_alive(), "rabbitmqctl stop_app still running"
    rabbitmq.start_app()
    back = Timeline()

    def recovered() -> bool:
        look(outage)
        for role in BUS_ROLES:
            if all(_pod_ready(p) for p in _role_pods(handle, role)):
                back.mark(f"{role} pods Ready")
        if is_ready(handle, "novas", NOVA):
            back.mark("Nova Ready")
        return is_ready(handle, "novas", NOVA) and len(back.seen) == len(BUS_ROLES) + 1

    wait_for(
        recovered,
        within=180,
        what="the bus roles Ready and the Nova Ready after the broker came back",
        handle=handle,
        detail=lambda: not_ready_summary(handle, "novas", NOVA),
    )
    print(f"faults, RabbitMQ {OUTAGE_RABBITMQ:.0f} s: outage {outage.seen}; recovery {back.seen}")

    for role in BUS_ROLES:
        went = outage.seen.get(f"{role} pods NotReady")
        assert went is not None, f"the {role} pods stayed Ready while the broker was stopped: {outage.seen}"
        assert went <= NOT_READY_WITHIN, f"the {role} pods NotReady after {went} s: {outage.seen}"
        assert f"{ROLE_CONDITION[role]}=False" in outage.seen, outage.seen
        assert ROLE_WAITING[role] in reasons[role], reasons
    assert "Ready=False" in outage.seen, outage.seen
    # recovered by themselves: the same pods (no restart by a liveness probe: they have none) and the
    # same operator process
    after = {role: {p["metadata"]["name"] for p in _role_pods(handle, role)} for role in BUS_ROLES}
    assert after == before
    assert operator.alive, "the operator was restarted"
    client = OpenStackClient(handle, compute_url(handle, NOVA))
    bus = ("nova-scheduler", "nova-conductor")
    wait_for(
        lambda: all(s["state"] == "up" for s in client.services() if s["binary"] in bus) or None,
        within=90,
        what="the scheduler and conductor services up in Nova",
    )
    _wait_all_ready(handle, 180, "the Nova and the pool Ready after the broker outage")


# -- MariaDB ---------------------------------------------------------------------------------------------


# The pools' shared host-discovery Job comes and goes on its own schedule (novacompute-crd.md §15: deleted
# 30 s after it finishes), whatever an earlier module left of it: it is not one of the Nova's Jobs.
DISCOVERY_JOB = "-discover-hosts"


def _jobs(handle: SimHandle) -> dict[str, tuple[str, int, int]]:
    """The Nova's Jobs in the namespace: name -> (uid, succeeded, failed)."""
    items = handle.cluster.kube.get(f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs")["items"]
    return {
        j["metadata"]["name"]: (
            j["metadata"]["uid"],
            int((j.get("status") or {}).get("succeeded") or 0),
            int((j.get("status") or {}).get("failed") or 0),
        )
        for j in items
        if not j["metadata"]["name"].endswith(DISCOVERY_JOB)
    }


def _job_pods(handle: SimHandle) -> set[str]:
    return {
        p["metadata"]["name"]
        for p in pods(handle)
        if not str((p["metadata"].get("labels") or {}).get("job-name", DISCOVERY_JOB)).endswith(DISCOVERY_JOB)
    }


def _servers_status(client: OpenStackClient) -> int:
    try:
        client.call("GET", "/servers")
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0
    return 200


def test_mariadb_restarted_the_api_recovers_and_no_job_runs_again(minimal: SimHandle) -> None:
    handle = minimal
    assert handle.real is not None
    client = OpenStackClient(handle, compute_url(handle, NOVA))
    assert _servers_status(client) == 200
    jobs, job_pods = _jobs(handle), _job_pods(handle)
    assert any(name.endswith("-db-sync") for name in jobs), jobs

    outage = Timeline()
    handle.real.backends.mariadb.restart()
    outage.mark("mariadb serving again")
    wait_for(lambda: _servers_status(client) == 200 or None, within=120, what="GET /servers answered again")
    outage.mark("API answers")
    wait_for(
        lambda: is_ready(handle, "novas", NOVA) or None,
        within=120,
        what="the Nova Ready after the restart",
        handle=handle,
        detail=lambda: not_ready_summary(handle, "novas", NOVA),
    )
    outage.mark("Nova Ready")
    # a pass of the operator after the restart saw the Jobs: give a late one time to act on them
    _watch(lambda: None, time.monotonic() + 15)
    print(f"faults, MariaDB restart: {outage.seen}")
    assert _jobs(handle) == jobs
    assert _job_pods(handle) == job_pods
    assert _servers_status(client) == 200


# -- Keystone --------------------------------------------------------------------------------------------


def _compute_services(client: OpenStackClient) -> dict[str, tuple[str, str]]:
    """nova-compute rows: host -> (id, status)."""
    return {
        s["host"]: (str(s["id"]), s["status"]) for s in client.services() if s["binary"] == "nova-compute"
    }


def _pool_nodes(handle: SimHandle) -> dict[str, tuple[str, str]]:
    """The pool's node entries: name -> (phase, serviceID)."""
    obj = handle.cluster.kube.get(
        f"/apis/nova.openstack.c5c3.io/v1alpha1/namespaces/{NAMESPACE}/novacomputes/{POOL}"
    )
    return {
        n["name"]: (str(n.get("phase")), str(n.get("serviceID") or ""))
        for n in (obj.get("status") or {}).get("nodes") or []
    }


def test_keystone_unreachable_for_60_s_the_pool_reports_it_and_disables_nothing(minimal: SimHandle) -> None:
    handle = minimal
    assert handle.real is not None
    osv = handle.real.openstack
    client = OpenStackClient(handle, compute_url(handle, NOVA))
    services = _compute_services(client)
    assert services
    assert all(status == "enabled" for _, status in services.values()), services
    nodes = _pool_nodes(handle)
    assert nodes
    assert all(phase == "Active" for phase, _ in nodes.values()), nodes
    seen_nodes: list[dict[str, tuple[str, str]]] = []
    reported: dict[str, str] = {}

    def look(timeline: Timeline) -> None:
        seen_nodes.append(_pool_nodes(handle))
        for kind, c in conditions(handle, "novacomputes", POOL).items():
            if c["status"] == "False" and c.get("reason") == "ComputeAPIError":
                reported.setdefault(kind, str(c.get("message")))
                timeline.mark(f"{kind}=False/ComputeAPIError")

    osv.pause_service("keystone")
    outage = Timeline()
    try:
        _watch(lambda: look(outage), outage.t0 + OUTAGE_KEYSTONE, interval=1.0)
    finally:
        osv.resume_service("keystone")
    outage.mark("keystone answering again")
    _wait_all_ready(handle, 120, "the pool Ready after Keystone came back")
    outage.mark("pool Ready")
    print(f"faults, Keystone {OUTAGE_KEYSTONE:.0f} s: {outage.seen}; reported {reported}")

    assert reported, f"the pool did not report the outage within {OUTAGE_KEYSTONE:.0f} s: {outage.seen}"
    assert all(n == nodes for n in seen_nodes), [n for n in seen_nodes if n != nodes][:1]
    assert _pool_nodes(handle) == nodes
    assert _compute_services(client) == services  # the same services, none disabled or deleted


# -- nova-compute ----------------------------------------------------------------------------------------


def _compute_process(handle: SimHandle, node: str) -> tuple[str, Callable[[int], None]]:
    """(pod name, how to signal every process of its nova-compute container) of the pool's pod on
    ``node``: the processes of the node's task (``container_pids``)."""
    assert handle.real is not None
    (pod,) = [p for p in pods(handle, selector=POOL_COMPONENT) if p["spec"].get("nodeName") == node]
    pids = container_pids(handle.real.real_compute.nodes, pod, "nova-compute")
    assert pids, pod["metadata"]["name"]
    return pod["metadata"]["name"], lambda sig: send(pids, sig)


def _restarts(handle: SimHandle, pod: str) -> int:
    obj = handle.cluster.kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}")
    (status,) = [s for s in obj["status"]["containerStatuses"] if s["name"] == "nova-compute"]
    return int(status.get("restartCount") or 0)


def _services_condition(handle: SimHandle) -> JSON:
    return conditions(handle, "novacomputes", POOL).get("ServicesReady", {})


def test_a_hung_nova_compute_goes_down_is_killed_and_comes_back_with_the_pool_reporting_it(
    minimal: SimHandle,
) -> None:
    handle = minimal
    client = OpenStackClient(handle, compute_url(handle, NOVA))
    services = _compute_services(client)
    rows = {s["host"]: s for s in client.services() if s["binary"] == "nova-compute"}
    assert rows[HUNG_HOST]["state"] == "up", rows
    pod, send = _compute_process(handle, HUNG_HOST)
    restarts = _restarts(handle, pod)

    def state() -> str:
        (row,) = [s for s in client.services() if s["binary"] == "nova-compute" and s["host"] == HUNG_HOST]
        return str(row["state"])

    send(signal.SIGSTOP)
    outage = Timeline()
    try:
        wait_for(lambda: state() == "down" or None, within=120, what=f"nova-compute on {HUNG_HOST} down")
        outage.mark("service down in Nova")

        def reported() -> JSON | None:
            c = _services_condition(handle)
            return c if c.get("reason") == "ServicesDown" else None

        down = wait_for(reported, within=90, what="the pool reporting ServicesDown", handle=handle)
        outage.mark("pool reports ServicesDown")
    finally:
        send(signal.SIGKILL)  # a stopped process dies of SIGKILL too
    outage.mark("killed")
    assert down["status"] == "False", down
    assert HUNG_HOST in down["message"], down
    assert _pool_nodes(handle)[HUNG_HOST][0] == "Active"

    wait_for(lambda: _restarts(handle, pod) > restarts or None, within=60, what="nova-compute restarted")
    outage.mark("restarted by the kubelet")
    wait_for(lambda: state() == "up" or None, within=120, what=f"nova-compute on {HUNG_HOST} up again")
    outage.mark("service up in Nova")
    wait_for(
        lambda: _services_condition(handle).get("reason") == "ServicesUp" or None,
        within=90,
        what="the pool reporting ServicesUp",
        handle=handle,
        detail=lambda: not_ready_summary(handle, "novacomputes", POOL),
    )
    outage.mark("pool reports ServicesUp")
    print(f"faults, nova-compute on {HUNG_HOST} hung then killed: {outage.seen}")
    assert _compute_services(client) == services  # the same service came back, still enabled
    _wait_all_ready(handle, 120, "the Nova and the pool Ready after the restart")
