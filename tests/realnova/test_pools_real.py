"""Pools, aggregates and the drain on the real Nova (issue 24, scenario 3), with the minimal sample's
pool ``rack7`` on ``compute-0`` and ``compute-1`` (nova-compute on the fake driver).

In order: the pool's onboarding aggregates and their marker exist in the real compute API
(novacompute-crd.md §11); a second pool whose selector takes ``compute-1`` too reports the conflict
and runs no pod there (§7); ``compute-1``, hosting a server, is relabelled out: its service is
disabled once, the server stays where it is, the service stays until the server is deleted and the
pod is gone, then it is deleted (§12); relabelled back, the node rejoins with a new service (§13);
deleting the pool removes its services and its aggregates, and leaves the Nova untouched (§16).

The module leaves the cluster as the other modules expect it: ``rack7`` applied again from the
sample (Ready, a service up on both nodes), the nodes' labels as they were, no server, image,
flavor or second pool of its own.
"""

from __future__ import annotations

import os
import pathlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from simcluster import SimHandle
from simcluster.client.kube import KubeError

from tests.realnova.cloud import request, upload_image
from tests.realnova.realcluster import (
    GROUP,
    JSON,
    NAMESPACE,
    NOVA,
    POOL,
    POOL_LABELS,
    OpenStackClient,
    compute_url,
    conditions,
    end_stopping,
    is_ready,
    not_ready_detail,
    not_ready_summary,
    pods,
    tier_pool,
    wait_for,
)

pytestmark = pytest.mark.realnova

LEAVING, STAYING = "compute-1", "compute-0"
SECOND = "rack7-gpus"  # the second pool, on a label of its own that only compute-1 gets
SECOND_LABEL = "example.org/gpu"
POOL_LABEL = "example.org/compute-pool"
MARKER = "c5c3.io:nova"
FLAVOR: dict[str, Any] = {"name": "pools.tiny", "ram": 64, "vcpus": 1, "disk": 1}
POOL_POD_SELECTOR = f"app.kubernetes.io/instance={POOL},app.kubernetes.io/component=nova-compute"


@dataclass
class Pools:
    handle: SimHandle
    client: OpenStackClient
    workdir: pathlib.Path
    image: str = ""
    flavor: str = ""
    server: str = ""
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def kube(self) -> Any:
        return self.handle.cluster.kube

    def pool(self, name: str = POOL) -> JSON:
        return dict(self.kube.get(f"{GROUP}/namespaces/{NAMESPACE}/novacomputes/{name}"))

    def entry(self, node: str, name: str = POOL) -> JSON | None:
        nodes = (self.pool(name).get("status") or {}).get("nodes") or []
        return next((dict(e) for e in nodes if e["name"] == node), None)

    def computes(self) -> dict[str, JSON]:
        """The nova-compute service rows by host."""
        return {s["host"]: s for s in self.client.services() if s["binary"] == "nova-compute"}

    def pool_pods(self, node: str, name: str = POOL) -> list[str]:
        """This pool's pods bound to ``node``, terminating ones included."""
        selector = f"app.kubernetes.io/instance={name},app.kubernetes.io/component=nova-compute"
        return [
            p["metadata"]["name"]
            for p in pods(self.handle, selector=selector)
            if p["spec"].get("nodeName") == node
        ]

    def events(self, reason: str, name: str = POOL, uid: str = "") -> list[JSON]:
        return [
            e
            for e in self.kube.get(f"/api/v1/namespaces/{NAMESPACE}/events")["items"]
            if e.get("reason") == reason
            and e["involvedObject"].get("kind") == "NovaCompute"
            and e["involvedObject"].get("name") == name
            and (not uid or e["involvedObject"].get("uid") == uid)
        ]

    def server_shown(self) -> JSON | None:
        return self.client.server(self.server)

    def marked_aggregates(self) -> dict[str, JSON]:
        """The aggregates carrying this Nova's marker, by name."""
        return {
            a["name"]: a
            for a in self.client.call("GET", "/os-aggregates")["aggregates"]
            if (a.get("metadata") or {}).get(MARKER) == f"{NAMESPACE}/{NOVA}"
        }


@pytest.fixture(scope="module")
def env(minimal: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pools]:
    assert minimal.real is not None
    p = Pools(
        minimal,
        OpenStackClient(minimal, compute_url(minimal, NOVA)),
        pathlib.Path(tmp_path_factory.mktemp("pools")),
    )
    osv = minimal.real.openstack
    p.image = upload_image(osv.glance_url, p.client.token(), "pools", os.urandom(64 * 1024))
    p.flavor = p.client.call("POST", "/flavors", {"flavor": FLAVOR})["flavor"]["id"]
    try:
        yield p
    finally:
        _restore(p)


def _restore(p: Pools) -> None:
    """Every step is tried; the first failure is raised at the end."""
    failures: list[BaseException] = []

    def step(fn: Callable[..., object], *args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:
            failures.append(exc)

    assert p.handle.real is not None
    glance = p.handle.real.openstack.glance_url
    if p.server:
        step(_delete_server, p)
    step(p.client.call, "DELETE", f"/flavors/{p.flavor}")
    step(
        lambda: request("DELETE", f"{glance}/v2/images/{p.image}", headers={"X-Auth-Token": p.client.token()})
    )
    step(_delete_pool, p, SECOND)
    step(p.handle.cluster.label_node, LEAVING, {**POOL_LABELS, SECOND_LABEL: None})
    step(_pool_back, p)
    if failures:
        raise failures[0]


def _all_events(p: Pools) -> list[tuple[str, str, JSON, int]]:
    """Every Event of the namespace on a NovaCompute: (reason, message, involvedObject, count)."""
    return [
        (e.get("reason", ""), e.get("message", ""), e["involvedObject"], e.get("count", 0))
        for e in p.kube.get(f"/api/v1/namespaces/{NAMESPACE}/events")["items"]
        if e["involvedObject"].get("kind") != "Pod"
    ]


def _delete_server(p: Pools) -> None:
    if p.server_shown() is not None:
        p.client.call("DELETE", f"/servers/{p.server}")
    wait_for(lambda: p.server_shown() is None, within=120, what="the server gone from the API")


def _delete_pool(p: Pools, name: str, rolled_in: set[str] | None = None) -> None:
    """The pool deleted, to the end of its finalizer; ``rolled_in``: the pods of the pool that the
    deletion's roll starts are collected there, each stopped at once once it is released."""
    path = f"{GROUP}/namespaces/{NAMESPACE}/novacomputes/{name}"
    selector = f"app.kubernetes.io/instance={name},app.kubernetes.io/component=nova-compute"
    before = (
        {pod["metadata"]["name"] for pod in pods(p.handle, selector=selector)}
        if rolled_in is not None
        else set()
    )
    try:
        p.kube.delete(path)
    except KubeError as exc:
        if exc.status != 404:
            raise

    def gone() -> bool:
        if rolled_in is not None:
            _cut_short_rolled_in(p, name, before, rolled_in)
        return _gone(p, path)

    wait_for(gone, within=240, what=f"the pool {name} gone", handle=p.handle)


def _cut_short_rolled_in(p: Pools, name: str, before: set[str], rolled_in: set[str]) -> None:
    """Each pod of the pool that was not there before its deletion, once released (deleting), is
    ended (``end_stopping``: its processes killed, as ``crictl stop --timeout 0`` would).

    The deletion turns the pool term into one hold term per Draining node, a change of the pod
    template that rolls the DaemonSet (§9.2): a held node gets a new pod, released seconds later
    when the node turns Releasing. Signalled before it has set its SIGTERM handler, that new
    nova-compute (its container's PID 1, as under a real kubelet) drops the signal and lives out
    the pool's 200 s grace, and the deletion waited for it. The pods that were there before the
    deletion keep their grace: their stop is nova's own."""
    selector = f"app.kubernetes.io/instance={name},app.kubernetes.io/component=nova-compute"
    for pod in pods(p.handle, selector=selector):
        meta = pod["metadata"]
        if meta["name"] in before:
            continue
        rolled_in.add(meta["name"])
        end_stopping(p.handle, pod)


def _gone(p: Pools, path: str) -> bool:
    try:
        p.kube.get(path)
    except KubeError as exc:
        if exc.status == 404:
            return True
        raise
    return False


def _pool_back(p: Pools) -> None:
    """``rack7`` as the ``minimal`` fixture applied it, Ready, with a service up on both nodes."""
    p.handle.apply(tier_pool(p.workdir), namespace=NAMESPACE)
    wait_for(
        lambda: _pool_settled(p) or None,
        within=300,
        what="the sample pool Ready with both nodes Active",
        handle=p.handle,
        detail=lambda: not_ready_summary(p.handle, "novacomputes", POOL),
    )


def _pool_settled(p: Pools) -> bool:
    entries = {e["name"]: e for e in (p.pool().get("status") or {}).get("nodes") or []}
    computes = p.computes()
    return (
        is_ready(p.handle, "novacomputes", POOL)
        and {n: e["phase"] for n, e in entries.items()} == {STAYING: "Active", LEAVING: "Active"}
        and set(computes) == {STAYING, LEAVING}
        and all(s["state"] == "up" and s["status"] == "enabled" for s in computes.values())
    )


# -- aggregates ---------------------------------------------------------------------------------------


def test_the_pools_onboarding_aggregates_exist_marked_in_the_compute_api(env: Pools) -> None:
    """One aggregate per zone of the pool's nodes (both in az1), with that AZ, and
    ``tenant_filter_tests`` without one; each marked ``c5c3.io:nova=<namespace>/<nova>``; the
    pool adds no host to them (openstack-hypervisor-operator does, at onboarding)."""
    assert _pool_settled(env)
    assert {e["name"]: e["zone"] for e in env.pool()["status"]["nodes"]} == {STAYING: "az1", LEAVING: "az1"}
    aggregates = env.marked_aggregates()
    assert set(aggregates) == {"az1", "tenant_filter_tests"}, aggregates
    az1, tenant = aggregates["az1"], aggregates["tenant_filter_tests"]
    assert az1["availability_zone"] == "az1"
    assert az1["metadata"] == {MARKER: f"{NAMESPACE}/{NOVA}", "availability_zone": "az1"}
    assert tenant["availability_zone"] is None
    assert tenant["metadata"] == {MARKER: f"{NAMESPACE}/{NOVA}"}
    assert az1["hosts"] == tenant["hosts"] == []
    condition = conditions(env.handle, "novacomputes", POOL)["AggregatesReady"]
    assert (condition["status"], condition["reason"]) == ("True", "AggregatesEnsured"), condition
    created = " ".join(e["message"] for e in env.events("AggregateCreated"))
    assert "created aggregate az1 with availability zone az1" in created, created
    assert "created aggregate tenant_filter_tests" in created, created


# -- a second pool overlapping the first ------------------------------------------------------------


def test_a_second_pool_whose_selector_takes_a_held_node_reports_the_conflict(env: Pools) -> None:
    env.handle.cluster.label_node(LEAVING, {SECOND_LABEL: "true"})
    holder_before = env.entry(LEAVING)
    env.kube.apply(
        {
            "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
            "kind": "NovaCompute",
            "metadata": {"name": SECOND, "namespace": NAMESPACE},
            "spec": {"novaRef": {"name": NOVA}, "nodeSelector": {SECOND_LABEL: "true"}},
        },
        NAMESPACE,
    )

    def reported() -> JSON | None:
        c = conditions(env.handle, "novacomputes", SECOND).get("NodesReady")
        return c if c and c["reason"] == "NodeConflict" else None

    condition = wait_for(reported, within=60, what="NodesReady=False/NodeConflict on the second pool")
    assert condition["status"] == "False"
    assert condition["message"] == f"nodes held by another pool of this Nova: {LEAVING} (held by {POOL})"
    assert env.entry(LEAVING, SECOND) == {
        "name": LEAVING,
        "phase": "Conflict",
        "zone": "az1",
        "conflictsWith": POOL,
    }
    daemonset = wait_for(
        lambda: env.kube.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets/{SECOND}-nova-compute"),
        within=30,
        what="the second pool's DaemonSet",
    )
    terms = daemonset["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert [t.get("matchFields") for t in terms] == [
        [{"key": "metadata.name", "operator": "NotIn", "values": [LEAVING]}]
    ]
    time.sleep(3)  # the DaemonSet controller has had its look at the nodes
    assert env.pool_pods(LEAVING, SECOND) == []  # it runs no pod on the held node
    assert not is_ready(env.handle, "novacomputes", SECOND)
    (event,) = env.events("NodeConflict", SECOND)
    assert (event["type"], event["count"]) == ("Warning", 1), event
    assert f"node {LEAVING} is held by NovaCompute {NAMESPACE}/{POOL}" in event["message"], event
    # the holder is untouched: the same entry, the same service, still Ready
    assert env.entry(LEAVING) == holder_before
    assert is_ready(env.handle, "novacomputes", POOL)

    _delete_pool(env, SECOND)
    env.handle.cluster.label_node(LEAVING, {SECOND_LABEL: None})
    assert env.entry(LEAVING) == holder_before
    assert set(env.marked_aggregates()) == {"az1", "tenant_filter_tests"}  # still needed by rack7


# -- the drain ------------------------------------------------------------------------------------------


def test_a_node_relabelled_out_under_a_server_is_disabled_once_then_released_when_empty(env: Pools) -> None:
    body = {
        "server": {
            "name": "pools",
            "imageRef": env.image,
            "flavorRef": env.flavor,
            "networks": "none",
            "host": LEAVING,  # an admin's request for that host (2.74), through the scheduler
        }
    }
    t0 = time.monotonic()
    env.server = str(env.client.call("POST", "/servers", body, microversion="2.74")["server"]["id"])
    wait_for(
        lambda: (
            (s := env.server_shown()) is not None
            and s["status"] == "ACTIVE"
            and not s["OS-EXT-STS:task_state"]
        ),
        within=180,
        what="the server ACTIVE",
    )
    shown = env.server_shown()
    assert shown is not None
    assert shown["OS-EXT-SRV-ATTR:host"] == LEAVING, shown
    env.seconds["boot"] = time.monotonic() - t0
    service = env.computes()[LEAVING]
    uid = env.pool()["metadata"]["uid"]
    disabled_before = len(env.events("ComputeServiceDisabled", uid=uid))

    t0 = time.monotonic()
    env.handle.cluster.label_node(LEAVING, {POOL_LABEL: None})
    reason = f"c5c3.io: leaving NovaCompute {NAMESPACE}/{POOL}"

    def draining() -> JSON | None:
        entry = env.entry(LEAVING)
        return (
            entry
            if entry and entry["phase"] == "Draining" and entry.get("serviceStatus") == "disabled"
            else None
        )

    entry = wait_for(
        draining, within=120, what=f"{LEAVING} Draining, its service disabled", handle=env.handle
    )
    env.seconds["to draining"] = time.monotonic() - t0
    assert entry["instances"] == 1, entry
    assert entry["disabledReason"] == reason
    assert entry["serviceID"] == service["id"]
    row = env.computes()[LEAVING]
    assert (row["id"], row["status"], row["disabled_reason"]) == (service["id"], "disabled", reason)
    services_ready = conditions(env.handle, "novacomputes", POOL)["ServicesReady"]
    assert (services_ready["status"], services_ready["reason"]) == ("True", "Draining")
    assert services_ready["message"] == f"{LEAVING}: 1 instances"

    # the hold term keeps a pod on the leaving node while its server stays
    def held() -> list[str] | None:
        ds = env.kube.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets/{POOL}-nova-compute")
        terms = ds["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"]
        holds = [t["matchFields"][0]["values"][0] for t in terms if "matchExpressions" not in t]
        return env.pool_pods(LEAVING) if holds == [LEAVING] and env.pool_pods(LEAVING) else None

    wait_for(held, within=60, what=f"a pod held on {LEAVING}", handle=env.handle)

    # the server is where it was: never migrated; delete it, and watch the release's order
    shown = env.server_shown()
    assert shown is not None
    assert (shown["status"], shown["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", LEAVING), shown
    assert (
        env.client.call("GET", f"/os-migrations?instance_uuid={env.server}", microversion="2.80")[
            "migrations"
        ]
        == []
    )
    assert env.computes()[LEAVING]["id"] == service["id"]  # the service stays while the server does
    t0 = time.monotonic()
    _delete_server(env)
    env.server = ""
    phases: list[str] = []
    while True:
        assert time.monotonic() - t0 < 240, f"the service of {LEAVING} not deleted (phases {phases})"
        entry = env.entry(LEAVING)
        phase = entry["phase"] if entry else "dropped"
        if not phases or phases[-1] != phase:
            phases.append(phase)
        rows = env.computes()
        if LEAVING not in rows:
            # the service went after the pod did: no pod of the pool is left on the node
            assert env.pool_pods(LEAVING) == [], "the service was deleted while the pool's pod ran"
            break
        assert rows[LEAVING]["id"] == service["id"]
        time.sleep(1)
    env.seconds["release"] = time.monotonic() - t0
    wait_for(lambda: env.entry(LEAVING) is None, within=30, what=f"{LEAVING} dropped from the pool's nodes")
    assert [p for p in phases if p != "Draining"][:1] == ["Releasing"], phases  # Draining, Releasing, gone
    assert (
        env.client.call("GET", f"/os-migrations?instance_uuid={shown['id']}", microversion="2.80")[
            "migrations"
        ]
        == []
    )
    disabled = [e for e in env.events("ComputeServiceDisabled", uid=uid) if LEAVING in e["message"]]
    assert len(env.events("ComputeServiceDisabled", uid=uid)) == disabled_before + 1, _all_events(env)
    assert [e["count"] for e in disabled] == [1], disabled  # once, over every pass of the drain
    deleted = [e for e in env.events("ComputeServiceDeleted", uid=uid) if service["id"] in e["message"]]
    assert len(deleted) == 1, deleted
    assert env.computes()[STAYING]["status"] == "enabled"  # the other node is left alone
    print(f"scenario 3, drain: phases {phases}; seconds {env.seconds}")


def test_the_node_rejoins_after_relabelling_back(env: Pools) -> None:
    gone = env.events("ComputeServiceDeleted")
    t0 = time.monotonic()
    env.handle.cluster.label_node(LEAVING, {POOL_LABEL: POOL_LABELS[POOL_LABEL]})
    wait_for(
        lambda: _pool_settled(env) or None,
        within=240,
        what=f"{LEAVING} back, Active, its new service up and enabled",
        handle=env.handle,
        detail=lambda: not_ready_summary(env.handle, "novacomputes", POOL),
    )
    env.seconds["rejoin"] = time.monotonic() - t0
    entry = env.entry(LEAVING)
    assert entry is not None
    row = env.computes()[LEAVING]
    assert entry["serviceID"] == row["id"]
    assert all(row["id"] not in e["message"] for e in gone)  # a new service (a new UUID)
    assert (entry["serviceStatus"], entry["serviceState"]) == ("enabled", "up")
    hosts = {
        h["service"]["host"]
        for h in env.client.call("GET", "/os-hypervisors/detail", microversion="2.88")["hypervisors"]
    }
    assert LEAVING in hosts  # mapped into the cell again
    print(f"scenario 3, rejoin: seconds {env.seconds}")


# -- deleting the pool -----------------------------------------------------------------------------------


def test_deleting_the_pool_removes_its_services_and_aggregates_and_leaves_the_nova_untouched(
    env: Pools,
) -> None:
    kube = env.kube
    nova_path = f"{GROUP}/namespaces/{NAMESPACE}/novas/{NOVA}"
    nova_before = kube.get(nova_path)
    deployments = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"
    workloads_before = _workloads(env, deployments)
    others_before = _live_rows(env)
    uid = env.pool()["metadata"]["uid"]
    ids = {host: s["id"] for host, s in env.computes().items()}

    t0 = time.monotonic()
    rolled_in: set[str] = set()
    _delete_pool(env, POOL, rolled_in)
    env.seconds["pool deletion"] = time.monotonic() - t0
    assert env.computes() == {}
    for reason in ("ComputeServiceDisabled", "ComputeServiceDeleted"):  # each leaving node: disabled, deleted
        for host, sid in ids.items():
            (event,) = [e for e in env.events(reason, uid=uid) if sid in e["message"]]
            assert host in event["message"]
            assert event["count"] == 1, event
    assert pods(env.handle, selector=POOL_POD_SELECTOR) == []
    # the last pool of the Nova takes its emptied, marked aggregates with it
    assert env.marked_aggregates() == {}
    removed = " ".join(e["message"] for e in env.events("AggregateDeleted", uid=uid))
    assert "deleted aggregate az1:" in removed, removed
    assert "deleted aggregate tenant_filter_tests:" in removed, removed

    nova = kube.get(nova_path)
    assert nova["metadata"]["generation"] == nova_before["metadata"]["generation"]
    assert nova["spec"] == nova_before["spec"]
    conds = conditions(env.handle, "novas", NOVA)  # as they were, not as a second look finds them
    not_true = {
        t: (c["status"], c.get("reason"), c.get("message")) for t, c in conds.items() if c["status"] != "True"
    }
    assert conds["Ready"]["status"] == "True", f"{not_true}\n{not_ready_detail(env.handle, 'novas', NOVA)}"
    assert _workloads(env, deployments) == workloads_before
    contract = nova["status"]["computeConfigSecretRef"]["name"]
    assert kube.get(f"/api/v1/namespaces/{NAMESPACE}/secrets/{contract}")["data"]  # the Nova's, not reaped
    others = _live_rows(env)
    assert others == others_before

    t0 = time.monotonic()
    _pool_back(env)  # for the other modules: the sample pool again
    env.seconds["pool back"] = time.monotonic() - t0
    assert set(env.marked_aggregates()) == {"az1", "tenant_filter_tests"}
    print(f"scenario 3, pool deletion: seconds {env.seconds}; pods its roll started {sorted(rolled_in)}")


def _live_rows(env: Pools) -> set[tuple[str, str, str, str]]:
    """The Nova's service rows of its live pods (rows of pods gone are the ServiceRecords step's)."""
    live = {
        p["metadata"]["name"]
        for p in pods(env.handle, selector=f"app.kubernetes.io/instance={NOVA}")
        if not p["metadata"].get("deletionTimestamp")
    }
    return {(s["binary"], s["host"], s["id"], s["state"]) for s in env.client.services() if s["host"] in live}


def _workloads(env: Pools, deployments: str) -> dict[str, tuple[int, int]]:
    """Each Deployment of the Nova: (generation, ready replicas)."""
    items = env.kube.get(f"{deployments}?labelSelector=app.kubernetes.io/instance={NOVA}")["items"]
    return {
        d["metadata"]["name"]: (d["metadata"]["generation"], d["status"].get("readyReplicas", 0))
        for d in items
    }
