"""The simulated cluster itself: real controllers, kwok stages, stand-ins and the fake OpenStack API.

These tests prove the ground the operator's e2e scenarios stand on; none of them runs the operator.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import functools
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from simcluster import (
    CELL0_UUID,
    COMPLETE_AFTER_ANNOTATION,
    EXIT_CODE_ANNOTATION,
    FAIL_LABEL,
    POOL_LABEL,
    SERVICE_PASSWORD,
    SERVICE_USER,
    TERMINATION_MESSAGE_ANNOTATION,
    UNREADY_LABEL,
    SimHandle,
)

pytestmark = pytest.mark.e2e
T = TypeVar("T")
POOL_A, POOL_B = "a", "b"  # the session cluster has 3 nodes in pool "a", 2 in pool "b" (conftest.py)
CELLS_LINE = re.compile(r"^([A-Za-z0-9_-]+)=([0-9a-f-]{36})$")


async def eventually(check: Callable[[], Awaitable[T | None]], within: float = 30.0, what: str = "") -> T:
    """Poll ``check`` until it returns something truthy."""
    deadline = time.monotonic() + within
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            result: T = last
            return result
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out after {within} s waiting for {what or check}; last: {last!r}")


def container(name: str = "main") -> client.V1Container:
    return client.V1Container(name=name, image="registry.invalid/fake:1")


def pod_template(
    labels: dict[str, str],
    *,
    restart: str = "Always",
    annotations: dict[str, str] | None = None,
    name: str = "main",
) -> client.V1PodTemplateSpec:
    return client.V1PodTemplateSpec(
        metadata=client.V1ObjectMeta(labels=labels, annotations=annotations),
        spec=client.V1PodSpec(containers=[container(name)], restart_policy=restart),
    )


def deployment(name: str, replicas: int, extra_labels: dict[str, str] | None = None) -> client.V1Deployment:
    labels = {"app": name}
    return client.V1Deployment(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1DeploymentSpec(
            replicas=replicas,
            selector=client.V1LabelSelector(match_labels=labels),
            template=pod_template({**labels, **(extra_labels or {})}),
        ),
    )


def job(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    backoff: int = 4,
    container_name: str = "db-sync",
) -> client.V1Job:
    return client.V1Job(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1JobSpec(
            backoff_limit=backoff,
            template=pod_template(
                labels or {"app": name}, restart="Never", annotations=annotations, name=container_name
            ),
        ),
    )


async def job_condition(api: client.ApiClient, ns: str, name: str) -> str | None:
    j = await client.BatchV1Api(api).read_namespaced_job_status(name, ns)
    for c in j.status.conditions or []:
        if c.type in ("Complete", "Failed") and c.status == "True":
            return str(c.type)
    return None


async def job_pods(api: client.ApiClient, ns: str, name: str) -> list[client.V1Pod]:
    pods = await client.CoreV1Api(api).list_namespaced_pod(
        ns, label_selector=f"batch.kubernetes.io/job-name={name}"
    )
    return list(pods.items)


# -- real controllers on fake nodes -----------------------------------------------------------


async def test_deployment_gets_available_pods_on_fake_nodes(
    simcluster: SimHandle, api: client.ApiClient, ns: str
) -> None:
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    await apps.create_namespaced_deployment(ns, deployment("web", 3))

    async def available() -> bool:
        d = await apps.read_namespaced_deployment_status("web", ns)
        return d.status.available_replicas == 3 and d.status.updated_replicas == 3

    await eventually(available, what="3 available replicas")
    rs = await apps.list_namespaced_replica_set(ns, label_selector="app=web")
    assert len(rs.items) == 1
    assert rs.items[0].metadata.owner_references[0].kind == "Deployment"
    pods = (await core.list_namespaced_pod(ns, label_selector="app=web")).items
    fake_nodes = {n for names in simcluster.nodes.values() for n in names}
    assert {p.status.phase for p in pods} == {"Running"}
    assert all(p.spec.node_name in fake_nodes and p.status.pod_ip for p in pods)


async def test_db_sync_job_completes_with_the_cells_report(
    simcluster: SimHandle, api: client.ApiClient, ns: str
) -> None:
    await client.BatchV1Api(api).create_namespaced_job(ns, job("nova-db-sync"))
    assert await eventually(lambda: job_condition(api, ns, "nova-db-sync"), what="Job finished") == "Complete"
    (pod,) = await job_pods(api, ns, "nova-db-sync")
    assert pod.status.phase == "Succeeded"
    term = pod.status.container_statuses[0].state.terminated
    assert term.exit_code == 0
    assert term.reason == "Completed"
    lines = term.message.strip().splitlines()
    cells = [CELLS_LINE.match(line) for line in lines]
    assert all(cells)
    assert [m.group(1) for m in cells if m] == ["cell0", "cell1"]
    assert cells[0]
    assert cells[0].group(2) == CELL0_UUID
    # cell1's UUID is stable for one Nova (namespace + name), as nova keeps it once mapped.
    await client.BatchV1Api(api).create_namespaced_job(ns, job("other-db-sync"))
    await eventually(lambda: job_condition(api, ns, "other-db-sync"), what="second Job")
    (other,) = await job_pods(api, ns, "other-db-sync")
    other_msg = other.status.container_statuses[0].state.terminated.message
    assert other_msg.splitlines()[1] != lines[1]


async def test_termination_message_from_annotation_and_expand_default(
    simcluster: SimHandle, api: client.ApiClient, ns: str
) -> None:
    batch = client.BatchV1Api(api)
    message = "nova-status upgrade check exit 1\n"
    await batch.create_namespaced_job(
        ns,
        job(
            "n1-db-expand", annotations={TERMINATION_MESSAGE_ANNOTATION: message}, container_name="db-expand"
        ),
    )
    await batch.create_namespaced_job(ns, job("n2-db-expand", container_name="db-expand"))
    await batch.create_namespaced_job(ns, job("n2-db-migrate", container_name="db-migrate"))
    for name in ("n1-db-expand", "n2-db-expand", "n2-db-migrate"):
        assert await eventually(functools.partial(job_condition, api, ns, name), what=name) == "Complete"
    msgs = {}
    for name in ("n1-db-expand", "n2-db-expand", "n2-db-migrate"):
        (pod,) = await job_pods(api, ns, name)
        msgs[name] = pod.status.container_statuses[0].state.terminated.message
    assert msgs == {
        "n1-db-expand": message,
        "n2-db-expand": "nova-status upgrade check exit 0\n",
        "n2-db-migrate": None,
    }


async def test_fail_label_fails_job_pods_with_exit_code_and_message(
    simcluster: SimHandle, api: client.ApiClient, ns: str
) -> None:
    batch = client.BatchV1Api(api)
    await batch.create_namespaced_job(
        ns, job("n-db-expand", labels={FAIL_LABEL: "true"}, backoff=0, container_name="db-expand")
    )
    await batch.create_namespaced_job(
        ns,
        job(
            "n-db-migrate",
            labels={FAIL_LABEL: "true"},
            annotations={EXIT_CODE_ANNOTATION: "3", TERMINATION_MESSAGE_ANNOTATION: "boom"},
            backoff=0,
            container_name="db-migrate",
        ),
    )
    for name, code, msg in (
        ("n-db-expand", 2, "nova-status upgrade check exit 2\n"),
        ("n-db-migrate", 3, "boom"),
    ):
        assert await eventually(functools.partial(job_condition, api, ns, name), what=name) == "Failed"
        (pod,) = await job_pods(api, ns, name)
        term = pod.status.container_statuses[0].state.terminated
        assert (pod.status.phase, term.exit_code, term.message) == ("Failed", code, msg)
    j = await batch.read_namespaced_job_status("n-db-migrate", ns)
    assert any(c.type == "Failed" and c.reason == "BackoffLimitExceeded" for c in j.status.conditions)


async def test_marked_pods_of_a_job_fail_all_attempts_without_the_real_backoff(
    simcluster: SimHandle, api: client.ApiClient, ns: str
) -> None:
    """How a test fails a Job the operator will create: mark its pods before they exist."""
    job_label = {"batch.kubernetes.io/job-name": "nova-db-migrate"}
    simcluster.cluster.mark_pods(
        "migrate-fails",
        namespace=ns,
        match_labels=job_label,
        labels={FAIL_LABEL: "true"},
        annotations={TERMINATION_MESSAGE_ANNOTATION: "migration failed\n"},
    )
    try:
        t0 = time.monotonic()
        await client.BatchV1Api(api).create_namespaced_job(
            ns, job("nova-db-migrate", container_name="db-migrate")
        )
        assert (
            await eventually(functools.partial(job_condition, api, ns, "nova-db-migrate"), what="Failed")
            == "Failed"
        )
        took = time.monotonic() - t0
    finally:
        simcluster.cluster.unmark_pods("migrate-fails")
    pods = await job_pods(api, ns, "nova-db-migrate")
    assert len(pods) == 5
    assert {p.status.phase for p in pods} == {"Failed"}
    assert pods[0].status.container_statuses[0].state.terminated.message == "migration failed\n"
    assert took < 15, f"{took:.1f} s: the 10+20+40+80 s backoff was not skipped"


async def test_complete_after_keeps_a_job_pod_running(
    simcluster: SimHandle, api: client.ApiClient, ns: str
) -> None:
    await client.BatchV1Api(api).create_namespaced_job(
        ns, job("slow-db-sync", annotations={COMPLETE_AFTER_ANNOTATION: "2s"})
    )

    async def running() -> bool:
        pods = await job_pods(api, ns, "slow-db-sync")
        return bool(pods) and pods[0].status.phase == "Running"

    await eventually(running, what="Job pod running")
    t0 = time.monotonic()
    assert await job_condition(api, ns, "slow-db-sync") is None
    assert await eventually(functools.partial(job_condition, api, ns, "slow-db-sync")) == "Complete"
    assert time.monotonic() - t0 > 1.0


async def test_unready_and_fail_labels_keep_deployment_pods_unready_until_removed(
    simcluster: SimHandle, api: client.ApiClient, ns: str
) -> None:
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    await apps.create_namespaced_deployment(ns, deployment("slow", 2, {UNREADY_LABEL: "true"}))
    await apps.create_namespaced_deployment(ns, deployment("crash", 1, {FAIL_LABEL: "true"}))

    async def pods(app: str) -> list[client.V1Pod]:
        return list((await core.list_namespaced_pod(ns, label_selector=f"app={app}")).items)

    def ready(p: client.V1Pod) -> bool:
        return any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])

    async def all_running_unready() -> bool:
        ps = await pods("slow")
        return len(ps) == 2 and all(
            p.status.phase == "Running" and p.status.conditions and not ready(p) for p in ps
        )

    await eventually(all_running_unready, what="2 running, unready pods")

    async def crashlooping() -> bool:
        ps = await pods("crash")
        st = ps[0].status.container_statuses if ps else None
        return bool(st and st[0].state.waiting and st[0].state.waiting.reason == "CrashLoopBackOff")

    await eventually(crashlooping, what="CrashLoopBackOff")
    await asyncio.sleep(1.0)  # still not available after a while
    d = await apps.read_namespaced_deployment_status("slow", ns)
    assert not d.status.available_replicas
    # Removing the label from the pods (what a test does to "fix" a workload) recovers them in place.
    for app, label in (("slow", UNREADY_LABEL), ("crash", FAIL_LABEL)):
        for p in await pods(app):
            await core.patch_namespaced_pod(p.metadata.name, ns, {"metadata": {"labels": {label: None}}})

    async def recovered() -> bool:
        a = await apps.read_namespaced_deployment_status("slow", ns)
        b = await apps.read_namespaced_deployment_status("crash", ns)
        return a.status.available_replicas == 2 and b.status.available_replicas == 1

    await eventually(recovered, what="both Deployments available")
    (crash,) = await pods("crash")
    assert crash.status.container_statuses[0].restart_count == 1  # the crash is remembered


async def test_daemonset_lands_only_on_pool_nodes_and_follows_relabels(
    simcluster: SimHandle, api: client.ApiClient, ns: str
) -> None:
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    pool_nodes = set(simcluster.nodes[POOL_A])
    labels = {"app": "compute"}
    ds = client.V1DaemonSet(
        metadata=client.V1ObjectMeta(name="compute"),
        spec=client.V1DaemonSetSpec(
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(containers=[container()], node_selector={POOL_LABEL: POOL_A}),
            ),
        ),
    )
    await apps.create_namespaced_daemon_set(ns, ds)

    async def placed_on() -> set[str] | None:
        d = await apps.read_namespaced_daemon_set_status("compute", ns)
        pods = (await core.list_namespaced_pod(ns, label_selector="app=compute")).items
        nodes = {p.spec.node_name for p in pods}
        return nodes if d.status.number_ready == d.status.desired_number_scheduled == len(pods) else None

    assert await eventually(placed_on, what="DaemonSet ready") == pool_nodes
    leaving = sorted(pool_nodes)[0]
    simcluster.cluster.label_node(leaving, {POOL_LABEL: None})
    try:
        assert await eventually(
            lambda: _if(placed_on(), lambda v: v == pool_nodes - {leaving}),
            what="pod gone from the relabelled node",
        )
    finally:
        simcluster.cluster.label_node(leaving, {POOL_LABEL: POOL_A})
    assert (
        await eventually(lambda: _if(placed_on(), lambda v: v == pool_nodes), what="pod back") == pool_nodes
    )


async def _if(value: Awaitable[T | None], pred: Callable[[T], bool]) -> T | None:
    v = await value
    return v if v is not None and pred(v) else None


async def test_garbage_collector_cascades_and_namespaces_finish(
    simcluster: SimHandle, api: client.ApiClient
) -> None:
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    ns = f"e2e-gc-{os.urandom(3).hex()}"
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    await apps.create_namespaced_deployment(ns, deployment("gone", 2))
    await eventually(
        lambda: _if(
            apps.read_namespaced_deployment_status("gone", ns), lambda d: d.status.available_replicas == 2
        ),
        what="available",
    )
    await apps.delete_namespaced_deployment("gone", ns, propagation_policy="Background")

    async def children_gone() -> bool:
        rs = await apps.list_namespaced_replica_set(ns)
        pods = await core.list_namespaced_pod(ns)
        return not rs.items and not pods.items

    await eventually(children_gone, what="ReplicaSet and pods collected")
    await core.delete_namespace(ns)

    async def ns_gone() -> bool:
        try:
            await core.read_namespace(ns)
        except ApiException as exc:
            return exc.status == 404
        return False

    await eventually(ns_gone, 60.0, what="namespace finalised")


# -- stand-ins ------------------------------------------------------------------------------


def _ready(obj: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in obj.get("status", {}).get("conditions", [])
    )


async def test_mariadb_standin_readies_database_user_grant_in_order(
    simcluster: SimHandle, api: client.ApiClient, ns: str
) -> None:
    co, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    g, v = "k8s.mariadb.com", "v1alpha1"

    async def get(plural: str, name: str) -> dict[str, Any]:
        obj: dict[str, Any] = await co.get_namespaced_custom_object(g, v, ns, plural, name)
        return obj

    ref = {"name": "mariadb"}
    await co.create_namespaced_custom_object(
        g,
        v,
        ns,
        "databases",
        {
            "apiVersion": f"{g}/{v}",
            "kind": "Database",
            "metadata": {"name": "nova"},
            "spec": {
                "mariaDbRef": ref,
                "name": "nova",
                "characterSet": "utf8",
                "collate": "utf8_general_ci",
                "cleanupPolicy": "Delete",
            },
        },
    )
    await co.create_namespaced_custom_object(
        g,
        v,
        ns,
        "users",
        {
            "apiVersion": f"{g}/{v}",
            "kind": "User",
            "metadata": {"name": "nova"},
            "spec": {
                "mariaDbRef": ref,
                "passwordSecretKeyRef": {"name": "nova-db", "key": "password"},
                "maxUserConnections": 48,
                "host": "%",
                "cleanupPolicy": "Delete",
            },
        },
    )
    await co.create_namespaced_custom_object(
        g,
        v,
        ns,
        "grants",
        {
            "apiVersion": f"{g}/{v}",
            "kind": "Grant",
            "metadata": {"name": "nova"},
            "spec": {
                "mariaDbRef": ref,
                "privileges": ["ALL PRIVILEGES"],
                "database": "nova",
                "table": "*",
                "username": "nova",
                "host": "%",
                "grantOption": False,
            },
        },
    )
    await asyncio.sleep(1.0)
    assert not any([_ready(await get(p, "nova")) for p in ("databases", "users", "grants")])  # no MariaDB yet
    await co.create_namespaced_custom_object(
        g,
        v,
        ns,
        "mariadbs",
        {
            "apiVersion": f"{g}/{v}",
            "kind": "MariaDB",
            "metadata": {"name": "mariadb"},
            "spec": {
                "rootPasswordSecretKeyRef": {"name": "root", "key": "password", "generate": True},
                "storage": {"size": "1Gi"},
            },
        },
    )
    await eventually(lambda: _if(get("mariadbs", "mariadb"), _ready), what="MariaDB Ready")
    await eventually(lambda: _if(get("databases", "nova"), _ready), what="Database Ready")
    await asyncio.sleep(0.5)
    assert not _ready(await get("users", "nova"))
    assert not _ready(await get("grants", "nova"))
    await core.create_namespaced_secret(
        ns, client.V1Secret(metadata=client.V1ObjectMeta(name="nova-db"), string_data={"password": "pw"})
    )
    grant = await eventually(lambda: _if(get("grants", "nova"), _ready), what="Grant Ready")
    cond = next(c for c in grant["status"]["conditions"] if c["type"] == "Ready")
    assert (cond["reason"], cond["message"]) == ("Created", "Created")
    db = await get("databases", "nova")
    assert db["metadata"]["finalizers"] == ["database.k8s.mariadb.com/finalizer"]
    assert db["spec"]["mariaDbRef"] == {"name": "mariadb", "waitForIt": True}  # schema default
    await co.delete_namespaced_custom_object(g, v, ns, "databases", "nova")

    async def db_gone() -> bool:
        try:
            await get("databases", "nova")
        except ApiException as exc:
            return exc.status == 404
        return False

    await eventually(db_gone, what="Database finalised")


async def test_rabbitmq_standin_writes_default_user_secret_and_status(
    simcluster: SimHandle, api: client.ApiClient, ns: str
) -> None:
    co, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    await co.create_namespaced_custom_object(
        "rabbitmq.com",
        "v1beta1",
        ns,
        "rabbitmqclusters",
        {
            "apiVersion": "rabbitmq.com/v1beta1",
            "kind": "RabbitmqCluster",
            "metadata": {"name": "rabbitmq"},
            "spec": {"replicas": 1},
        },
    )

    async def status() -> dict[str, Any] | None:
        obj = await co.get_namespaced_custom_object(
            "rabbitmq.com", "v1beta1", ns, "rabbitmqclusters", "rabbitmq"
        )
        return obj.get("status", {}).get("defaultUser")  # type: ignore[no-any-return]

    default_user = await eventually(status, what="status.defaultUser")
    assert default_user["secretReference"]["name"] == "rabbitmq-default-user"
    assert default_user["serviceReference"] == {"name": "rabbitmq", "namespace": ns}
    secret = await core.read_namespaced_secret("rabbitmq-default-user", ns)
    data = {k: base64.b64decode(v).decode() for k, v in secret.data.items()}
    assert set(data) == {
        "username",
        "password",
        "host",
        "port",
        "connection_string",
        "provider",
        "type",
        "default_user.conf",
    }
    assert data["host"] == f"rabbitmq.{ns}.svc"
    assert data["port"] == "5672"
    assert data["provider"] == "rabbitmq"
    assert (
        data["connection_string"] == f"amqp://{data['username']}:{data['password']}@rabbitmq.{ns}.svc:5672/"
    )
    assert secret.metadata.owner_references[0].kind == "RabbitmqCluster"
    await co.delete_namespaced_custom_object("rabbitmq.com", "v1beta1", ns, "rabbitmqclusters", "rabbitmq")

    async def gone() -> bool:  # the stand-in drops the real operator's deletion finalizer
        try:
            await co.get_namespaced_custom_object(
                "rabbitmq.com", "v1beta1", ns, "rabbitmqclusters", "rabbitmq"
            )
        except ApiException as exc:
            return exc.status == 404
        return False

    await eventually(gone, what="RabbitmqCluster finalised")


async def test_gateway_standin_accepts_httproutes(
    simcluster: SimHandle, api: client.ApiClient, ns: str
) -> None:
    co, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    g, v = "gateway.networking.k8s.io", "v1"
    simcluster.create_gateway(ns, "public-gateway")
    await core.create_namespaced_service(
        ns,
        client.V1Service(
            metadata=client.V1ObjectMeta(name="nova"),
            spec=client.V1ServiceSpec(ports=[client.V1ServicePort(port=8774)], selector={"app": "nova"}),
        ),
    )

    def route(name: str, backend: str) -> dict[str, Any]:
        return {
            "apiVersion": f"{g}/{v}",
            "kind": "HTTPRoute",
            "metadata": {"name": name},
            "spec": {
                "parentRefs": [{"name": "public-gateway"}],
                "hostnames": [f"{name}.example.org"],
                "rules": [{"backendRefs": [{"name": backend, "port": 8774}]}],
            },
        }

    await co.create_namespaced_custom_object(g, v, ns, "httproutes", route("nova", "nova"))
    await co.create_namespaced_custom_object(g, v, ns, "httproutes", route("broken", "missing"))

    async def parents(name: str) -> list[dict[str, Any]] | None:
        obj = await co.get_namespaced_custom_object(g, v, ns, "httproutes", name)
        return obj.get("status", {}).get("parents") or None

    (ok,) = await eventually(lambda: parents("nova"), what="route status")
    assert ok["parentRef"]["name"] == "public-gateway"
    assert {c["type"]: (c["status"], c["reason"]) for c in ok["conditions"]} == {
        "Accepted": ("True", "Accepted"),
        "ResolvedRefs": ("True", "ResolvedRefs"),
    }
    (bad,) = await eventually(lambda: parents("broken"), what="broken route status")
    assert {c["type"]: c["status"] for c in bad["conditions"]} == {
        "Accepted": "True",
        "ResolvedRefs": "False",
    }

    # The Gateway's status may first count one route (written before the second one was seen).
    def both_counted(gw: dict[str, Any]) -> bool:
        listeners = gw.get("status", {}).get("listeners") or []
        return [listener.get("attachedRoutes") for listener in listeners] == [2]

    gw = await eventually(
        lambda: _if(co.get_namespaced_custom_object(g, v, ns, "gateways", "public-gateway"), both_counted),
        what="gateway status counting both routes",
    )
    assert gw["status"]["listeners"][0]["attachedRoutes"] == 2


# -- fake Keystone + Nova API ----------------------------------------------------------------


async def test_fake_nova_api_auth_services_paging_aggregates_and_call_log(simcluster: SimHandle) -> None:
    fake = simcluster.openstack
    assert fake is not None
    fake.clear_calls()
    hosts = [f"cmp-{i:02d}" for i in range(7)]
    svcs = {h: fake.add_compute(h, mapped=(h != "cmp-03"), servers=1 if h == "cmp-01" else 0) for h in hosts}
    fake.set_migrations("cmp-02", 1)
    async with aiohttp.ClientSession() as http:
        auth = {
            "auth": {
                "identity": {
                    "methods": ["password"],
                    "password": {
                        "user": {
                            "name": SERVICE_USER,
                            "domain": {"name": "Default"},
                            "password": SERVICE_PASSWORD,
                        }
                    },
                },
                "scope": {"project": {"name": "service", "domain": {"name": "Default"}}},
            }
        }
        async with http.post(f"{fake.keystone_url}/v3/auth/tokens", json=auth) as r:
            assert r.status == 201
            token = r.headers["X-Subject-Token"]
            catalog = (await r.json())["token"]["catalog"]
        compute = next(e for e in catalog if e["type"] == "compute")["endpoints"][0]["url"]
        assert compute == f"{fake.nova_url}/v2.1"
        bad: dict[str, Any] = copy.deepcopy(auth)
        bad["auth"]["identity"]["password"]["user"]["password"] = "wrong"
        async with http.post(f"{fake.keystone_url}/v3/auth/tokens", json=bad) as r:
            assert r.status == 401
        other_project: dict[str, Any] = copy.deepcopy(auth)
        other_project["auth"]["scope"]["project"]["name"] = "admin"
        async with http.post(f"{fake.keystone_url}/v3/auth/tokens", json=other_project) as r:
            assert r.status == 401
        cred_id, secret = fake.add_application_credential(SERVICE_USER)
        ac = {
            "auth": {
                "identity": {
                    "methods": ["application_credential"],
                    "application_credential": {"id": cred_id, "secret": secret},
                }
            }
        }
        async with http.post(f"{fake.keystone_url}/v3/auth/tokens", json=ac) as r:
            assert r.status == 201
            assert r.headers["X-Subject-Token"]

        async def nova(method: str, path: str, mv: str = "2.53", body: Any = None) -> tuple[int, Any]:
            headers = {
                "X-Auth-Token": token,
                "X-OpenStack-Nova-API-Version": mv,
                "OpenStack-API-Version": f"compute {mv}",
                "Accept": "application/json",
            }
            async with http.request(method, f"{compute}{path}", headers=headers, json=body) as r:
                text = await r.text()
                if r.status != 204:
                    assert r.headers["OpenStack-API-Version"] == f"compute {mv}"
                return r.status, (await r.json()) if text else None

        # os-services at 2.69, with a down cell reported as UNKNOWN (hidden below 2.69)
        fake.set_cell_down({"cmp-06"})
        status, body = await nova("GET", "/os-services?binary=nova-compute", "2.69")
        by_host = {s["host"]: s for s in body["services"]}
        assert status == 200
        assert by_host["cmp-06"]["status"] == "UNKNOWN"
        assert by_host["cmp-00"]["id"] == svcs["cmp-00"].uuid
        status, body = await nova("GET", "/os-services?binary=nova-compute", "2.53")
        assert "cmp-06" not in {s["host"] for s in body["services"]}
        fake.set_cell_down(set())
        # disable once, with the reason
        reason = "c5c3.io: leaving NovaCompute ns/pool"
        status, body = await nova(
            "PUT",
            f"/os-services/{svcs['cmp-00'].uuid}",
            body={"status": "disabled", "disabled_reason": reason},
        )
        assert status == 200
        assert body["service"]["status"] == "disabled"
        assert body["service"]["disabled_reason"] == reason
        # delete: 409 with instances, 409 with migrations, 204 otherwise, then 404
        assert (await nova("DELETE", f"/os-services/{svcs['cmp-01'].uuid}"))[0] == 409
        assert (await nova("DELETE", f"/os-services/{svcs['cmp-02'].uuid}"))[0] == 409
        assert (await nova("DELETE", f"/os-services/{svcs['cmp-04'].uuid}"))[0] == 204
        assert (await nova("DELETE", f"/os-services/{svcs['cmp-04'].uuid}"))[0] == 404
        # servers on a host
        assert len((await nova("GET", "/servers?all_tenants=1&host=cmp-01"))[1]["servers"]) == 1
        assert (await nova("GET", "/servers?all_tenants=1&host=cmp-00"))[1]["servers"] == []
        # hypervisors at 2.88, paged by 2: short pages (cmp-03 unmapped) do not end the list
        # (follow the next link as a client must: hosts other tests left behind can make a page
        # whose every entry is unmapped, which is empty but still links on)
        seen, shapes = [], []
        query: str | None = "?limit=2"
        while query is not None:
            status, body = await nova("GET", f"/os-hypervisors/detail{query}", "2.88")
            assert status == 200, body
            shapes.append((len(body["hypervisors"]), "hypervisors_links" in body))
            for hypervisor in body["hypervisors"]:
                assert "vcpus" not in hypervisor
                assert "uptime" in hypervisor
            seen += [h["service"]["host"] for h in body["hypervisors"]]
            links = [link["href"] for link in body.get("hypervisors_links", []) if link["rel"] == "next"]
            query = "?" + links[0].split("?", 1)[1] if links else None
        assert sorted(h for h in seen if h.startswith("cmp-")) == sorted(set(hosts) - {"cmp-03", "cmp-04"})
        # a short page (cmp-03 dropped) that still links to the next one
        assert any(shown < 2 and linked for shown, linked in shapes), shapes
        # aggregates: create, 409 on a duplicate, mark, add/remove host, delete
        status, body = await nova(
            "POST", "/os-aggregates", body={"aggregate": {"name": "az-1", "availability_zone": "az-1"}}
        )
        agg = body["aggregate"]["id"]
        assert (await nova("POST", "/os-aggregates", body={"aggregate": {"name": "az-1"}}))[0] == 409
        await nova(
            "POST",
            f"/os-aggregates/{agg}/action",
            body={"set_metadata": {"metadata": {"c5c3.io:nova": "ns/nova"}}},
        )
        assert (await nova("POST", f"/os-aggregates/{agg}/action", body={"add_host": {"host": "cmp-00"}}))[
            0
        ] == 200
        assert (await nova("DELETE", f"/os-aggregates/{agg}"))[0] == 400
        await nova("POST", f"/os-aggregates/{agg}/action", body={"remove_host": {"host": "cmp-00"}})
        (listed,) = (await nova("GET", "/os-aggregates"))[1]["aggregates"]
        assert listed["metadata"] == {"availability_zone": "az-1", "c5c3.io:nova": "ns/nova"}
        assert (await nova("DELETE", f"/os-aggregates/{agg}"))[0] == 200
        # faults: 500 for a while, then connection refused, then back
        fake.set_fault("error", api="nova", seconds=0.5)
        assert (await nova("GET", "/os-aggregates"))[0] == 500
        await asyncio.sleep(0.6)
        assert (await nova("GET", "/os-aggregates"))[0] == 200
        simcluster.in_sidecar(lambda: fake.go_offline("nova"))
        with pytest.raises(aiohttp.ClientConnectionError):
            await nova("GET", "/os-aggregates")
        simcluster.in_sidecar(lambda: fake.go_online("nova"))
        assert (await nova("GET", "/os-aggregates"))[0] == 200
        # a revoked token gets 401; the control endpoint shows the log to a human or another process
        fake.revoke_tokens()
        assert (await nova("GET", "/os-aggregates"))[0] == 401
        async with http.get(f"{fake.nova_url}/_sim/calls?method=PUT") as r:
            assert [c["path"] for c in await r.json()] == [f"/v2.1/os-services/{svcs['cmp-00'].uuid}"]
    # the call log answers "exactly one disable, no enable, no migration"
    puts = fake.calls("PUT", "/v2.1/os-services/")
    assert len(puts) == 1
    assert puts[0].body == {"status": "disabled", "disabled_reason": reason}
    assert not [
        c
        for c in fake.calls(api="nova")
        if "migrat" in c.path or (isinstance(c.body, dict) and c.body.get("status") == "enabled")
    ]
    assert (
        fake.calls("POST", "/v3/auth/tokens")[0].body["auth"]["identity"]["password"]["user"]["password"]
        == "***"
    )


async def test_compute_agent_registers_pool_nodes_and_discovery_maps_them(
    simcluster: SimHandle, api: client.ApiClient, ns: str
) -> None:
    """nova-compute pods on fake nodes register services; a discover-hosts Job pod maps them."""
    fake = simcluster.openstack
    assert fake is not None
    apps, batch = client.AppsV1Api(api), client.BatchV1Api(api)
    pool_nodes = set(simcluster.nodes[POOL_B])
    labels = {
        "app.kubernetes.io/name": "novacompute",
        "app.kubernetes.io/instance": "b",
        "app.kubernetes.io/component": "nova-compute",
    }
    ds = client.V1DaemonSet(
        metadata=client.V1ObjectMeta(name="b-nova-compute", labels=labels),
        spec=client.V1DaemonSetSpec(
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(
                    containers=[container("nova-compute")], node_selector={POOL_LABEL: POOL_B}
                ),
            ),
        ),
    )
    await apps.create_namespaced_daemon_set(ns, ds)

    async def registered() -> bool:
        return all(fake.service_by_host(n) is not None for n in pool_nodes)

    await eventually(registered, what="services registered")
    assert (
        not {h.host for h in fake.hypervisors.values() if h.mapped} & pool_nodes
    )  # unmapped until discovery
    discover = job(
        "nova-discover-hosts",
        labels={"app.kubernetes.io/component": "discover-hosts"},
        backoff=0,
        container_name="discover-hosts",
    )
    await batch.create_namespaced_job(ns, discover)

    async def mapped() -> bool:
        return pool_nodes <= {h.host for h in fake.hypervisors.values() if h.mapped}

    await eventually(mapped, what="hosts mapped")
    await apps.delete_namespaced_daemon_set("b-nova-compute", ns)

    async def down() -> bool:
        return all((svc := fake.service_by_host(n)) is not None and svc.state == "down" for n in pool_nodes)

    await eventually(down, what="services down once their pods are gone")


# -- the launcher ---------------------------------------------------------------------------


def test_apply_installs_a_crd_and_its_objects_from_one_file(
    simcluster: SimHandle, tmp_path: pathlib.Path
) -> None:
    """``SimHandle.apply``: what ``make run`` uses for CRDs, RBAC and samples (any kind, via discovery)."""
    ns = f"e2e-apply-{os.urandom(3).hex()}"
    manifest = tmp_path / "bundle.yaml"
    manifest.write_text(
        f"""
apiVersion: v1
kind: Namespace
metadata: {{name: {ns}}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: widgets.sim.example.org}}
spec:
  group: sim.example.org
  names: {{kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {{type: object, properties: {{size: {{type: integer}}}}}}
---
apiVersion: sim.example.org/v1
kind: Widget
metadata: {{name: w, namespace: {ns}}}
spec: {{size: 3}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {ns}-reader}}
rules: [{{apiGroups: ["sim.example.org"], resources: ["widgets"], verbs: ["get"]}}]
"""
    )
    docs = simcluster.apply(manifest)
    assert [d["kind"] for d in docs] == ["Namespace", "CustomResourceDefinition", "Widget", "ClusterRole"]
    simcluster.apply(manifest)  # idempotent: replaces what exists
    kube = simcluster.cluster.kube
    assert kube.get(f"/apis/sim.example.org/v1/namespaces/{ns}/widgets/w")["spec"] == {"size": 3}
    kube.delete(f"/api/v1/namespaces/{ns}")
    kube.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{ns}-reader")
    kube.delete("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.sim.example.org")


def test_spawned_process_gets_the_operator_environment_and_can_be_killed(simcluster: SimHandle) -> None:
    """``SimHandle.spawn``: how a scenario runs the operator (and kills it mid-install)."""
    code = (
        "import os, time; print(os.environ['KUBE_CONTEXT'], os.environ['SIM_NOVA_API_URL'], flush=True); "
        "time.sleep(60)"
    )
    proc = simcluster.spawn(
        f"sleeper-{os.urandom(3).hex()}", [sys.executable, "-c", code], env={"EXTRA": "1"}
    )
    deadline = time.monotonic() + 10
    while "operator" not in proc.output() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.alive
    assert proc.output().split() == ["operator", simcluster.openstack.nova_url]  # type: ignore[union-attr]
    proc.kill()
    assert not proc.alive
    assert proc.popen.returncode == -signal.SIGKILL


def test_killed_launcher_leaves_no_process_behind(simcluster: SimHandle, tmp_path: pathlib.Path) -> None:
    """SIGKILL of ``python -m simcluster up`` (no cleanup runs): the parent-death signal ends every child."""
    repo = pathlib.Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo / "tools"), "ENVTEST_BIN": str(simcluster.cluster.bindir)}
    workdir = tmp_path / "killed"
    args = ["up", "--nodes=1", "--no-standins", "--no-openstack", f"--workdir={workdir}"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "simcluster", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        text=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("simulated cluster up"):
                break
        else:
            pytest.fail(f"launcher exited with {proc.wait()}")
        children = [p for p in _pids_mentioning(str(workdir)) if p != proc.pid]
        assert len(children) == 5, children  # etcd, apiserver, controller-manager, scheduler, kwok
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 15
    while _pids_mentioning(str(workdir)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _pids_mentioning(str(workdir)) == []


def _pids_mentioning(text: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", text], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]
