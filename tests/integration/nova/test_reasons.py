"""Each Nova reason of reconciler.md §8.1 no other test produced, produced by the step that owns it,
on the real API server.

Every step runs in a ``make_ctx`` pass over a Nova stored by kube-apiserver; what a step writes is
stored there, the stores and PriorityClasses it looks up are real objects (cluster-scoped ones named
after the test's namespace, and removed after it), and the requests are recorded by a wrapper
around the real client. One refusal the server cannot be made to give (a 422 that quotes the
value it refused) is injected by that wrapper.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from nova_operator import conditions, intervals
from nova_operator.kube import Kube
from nova_operator.kube.errors import KubeError
from nova_operator.kube.resources import (
    CLUSTER_SECRET_STORES,
    CRONJOBS,
    DEPLOYMENTS,
    HTTPROUTES,
    JOBS,
    MARIADBS,
    NOVAS,
    PRIORITY_CLASSES,
    SECRET_STORES,
    ResourceRef,
)
from nova_operator.kube.types import Object
from nova_operator.metrics import WRITE_VERBS
from nova_operator.reconcilers.nova import (
    compute_config,
    database,
    db_archive,
    deployment,
    health_check,
    http_route,
    secrets,
    workloads,
)
from nova_operator.reconcilers.nova.context import NovaOptions, PassContext
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.request import Result
from tests.integration.nova.passes import ALL_SECRETS, Emitted, make_ctx, secret, stored, stored_nova
from tests.integration.nova.requests import Recorder

READY = [
    {
        "type": "Ready",
        "status": "True",
        "reason": "Ready",
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
]


@pytest.fixture
def ours(admin: Kube) -> Recorder:
    """The operator's requests, recorded apart from the admin's (who plays the user)."""
    return Recorder.of(admin)


@pytest.fixture
async def cluster(admin: Kube) -> AsyncIterator[list[tuple[ResourceRef, str]]]:
    """Cluster-scoped objects a test makes (``make``): removed after it, the control plane outlives it."""
    made: list[tuple[ResourceRef, str]] = []
    yield made
    for ref, name in made:
        await admin.delete(ref, name)


async def make(
    admin: Kube, made: list[tuple[ResourceRef, str]], ref: ResourceRef, body: Object, *, ready: bool = False
) -> None:
    """A cluster-scoped object, Ready through its status subresource when asked."""
    await admin.create(ref, body)
    made.append((ref, body["metadata"]["name"]))
    if ready:
        await admin.patch_status(ref, body["metadata"]["name"], {"status": {"conditions": READY}})


def priority_class(name: str, value: int) -> Object:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def reason(ctx: PassContext, cond_type: str) -> tuple[str, str, str]:
    c = ctx.condition(cond_type)
    assert c is not None, cond_type
    return str(c["status"]), str(c["reason"]), str(c["message"])


def written(kube: Recorder) -> list[tuple[str, str, str]]:
    return [(v, r, n) for v, r, n, _ in kube.calls if v in WRITE_VERBS]


async def with_config(ctx: PassContext) -> PassContext:
    ctx.state.config_map = "nova-config-abc"
    return ctx


# -- SecretsReady / ComputeConfigReady -------------------------------------------------------------


async def test_a_tls_bus_without_its_ca_bundle_waits_for_messaging_ca(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    tls = {"secretRef": {"name": "bus"}, "tls": {"caBundleSecretRef": {"name": "rabbitmq-ca"}}}
    nova = await stored_nova(admin, namespace, messaging=tls)
    inputs = await stored(admin, namespace, *ALL_SECRETS)
    ctx = make_ctx(ours, nova, *inputs)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after == intervals.SECRET_POLL
    status, why, message = reason(ctx, conditions.SECRETS_READY)
    assert (status, why) == ("False", "WaitingForMessagingCA")
    assert message == f"spec.messaging.tls.caBundleSecretRef: Secret {namespace}/rabbitmq-ca not found"
    ca = await stored(admin, namespace, secret("rabbitmq-ca", other="x"))
    ctx = make_ctx(ours, nova, *inputs, *ca)
    await secrets.reconcile_secrets(ctx)
    assert reason(ctx, conditions.SECRETS_READY)[2].endswith("rabbitmq-ca has no key ca.crt")


REMOTE = {
    "keystoneEndpoint": "https://keystone.example.org/v3",
    "transportURLSecretRef": {"name": "remote-bus"},
}


async def test_a_remote_contract_without_its_url_waits_and_the_local_one_is_published(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    # the CRD refuses remoteCompute without messaging.tls (the stand-in took any spec)
    tls = {"secretRef": {"name": "bus"}, "tls": {"caBundleSecretRef": {"name": "ca"}}}
    ctx = make_ctx(ours, await stored_nova(admin, namespace, remoteCompute=REMOTE, messaging=tls))
    ctx.state.broker_ca = "CA"  # the Secrets step ran first
    ctx.state.transport_url = "rabbit://nova:pw@bus:5672/"
    ctx.state.digest_key = b"k"  # the Secrets step ran first
    assert (await compute_config.reconcile_compute_config(ctx)).requeue_after is None
    status, why, message = reason(ctx, conditions.COMPUTE_CONFIG_READY)
    assert (status, why) == ("False", "WaitingForRemoteTransportURL")
    assert "spec.remoteCompute.transportURLSecretRef" in message
    assert "remote-bus" in message
    assert ctx.status["computeConfigSecretRef"] == {"name": "nova-compute-config"}
    assert "remoteComputeConfigSecretRef" not in ctx.status
    assert [n for v, _, n in written(ours)] == ["nova-compute-config"]  # published, on the server


async def test_a_refused_contract_write_is_compute_config_error(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    url = "rabbit://nova:pw@bus:5672/"  # a server message may quote a value it refused
    ours.refuse["apply"] = KubeError(
        f'Secret {namespace}/nova-compute-config is invalid: data[transport_url]: "{url}" too long',
        status=422,
    )
    ctx = make_ctx(ours, await stored_nova(admin, namespace))
    ctx.state.transport_url = url
    ctx.state.digest_key = b"k"  # the Secrets step ran first
    with pytest.raises(KubeError):
        await compute_config.reconcile_compute_config(ctx)
    status, why, message = reason(ctx, conditions.COMPUTE_CONFIG_READY)
    assert (status, why) == ("False", "ComputeConfigError")
    assert "nova-compute-config" in message
    assert "pw@" not in message
    assert 'data[transport_url]: "***" too long' in message


# -- DatabaseReady -----------------------------------------------------------------------------------


async def no_upgrade(ctx: PassContext, installed: str, target: str) -> Result:
    raise AssertionError("no upgrade expected")


MANAGED = {
    "apiDatabase": {
        "clusterRef": {"name": "mariadb"},
        "database": "nova_api",
        "secretRef": {"name": "api-db"},
    },
    "database": {"clusterRef": {"name": "mariadb"}, "database": "nova", "secretRef": {"name": "cell-db"}},
}


async def test_database_objects_not_ready_wait_for_database(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    body = {
        "apiVersion": MARIADBS.api_version,
        "kind": "MariaDB",
        "metadata": {"name": "mariadb"},
        "spec": {},
    }
    await admin.create(MARIADBS, body, namespace)
    mariadb = await admin.patch_status(MARIADBS, "mariadb", {"status": {"conditions": READY}}, namespace)
    servers = Cache(str(MARIADBS))
    servers.upsert(mariadb)
    nova = await stored_nova(admin, namespace, **MANAGED)
    ctx = await with_config(make_ctx(ours, nova, caches={MARIADBS: servers}))
    assert (
        await database.reconcile_database(ctx, upgrade_flow=no_upgrade)
    ).requeue_after == intervals.DATABASE_WAIT
    status, why, message = reason(ctx, conditions.DATABASE_READY)
    assert (status, why) == ("False", "WaitingForDatabase")
    assert message.startswith("Database CR not ready: Database nova-api")


async def test_no_config_map_waits_for_config_and_a_running_job_is_db_sync_in_progress(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    ctx = make_ctx(ours, await stored_nova(admin, namespace))  # brownfield: nothing to provision
    assert (await database.reconcile_database(ctx, upgrade_flow=no_upgrade)).requeue_after is not None
    assert reason(ctx, conditions.DATABASE_READY)[:2] == ("False", "WaitingForConfig")
    assert written(ours) == []  # no Job without a config to mount
    ctx.state.config_map = "nova-config-abc"
    await database.reconcile_database(ctx, upgrade_flow=no_upgrade)  # creates the Job
    job = await admin.get(JOBS, "nova-db-sync", namespace)
    status = {"startTime": job["metadata"]["creationTimestamp"], "active": 1}
    ctx.caches[JOBS].upsert(await admin.patch_status(JOBS, "nova-db-sync", {"status": status}, namespace))
    assert (await database.reconcile_database(ctx, upgrade_flow=no_upgrade)).requeue_after is not None
    assert reason(ctx, conditions.DATABASE_READY) == ("False", "DBSyncInProgress", "db_sync job is running")


# -- DBArchiveReady ----------------------------------------------------------------------------------


async def test_a_suspended_archive_is_db_archive_suspended(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    ctx = await with_config(make_ctx(ours, await stored_nova(admin, namespace, dbArchive={"suspend": True})))
    assert (await db_archive.reconcile_db_archive(ctx)).requeue_after is None
    status, why, message = reason(ctx, conditions.DB_ARCHIVE_READY)
    assert (status, why) == ("True", "DBArchiveSuspended")
    assert "suspended" in message
    stored_cronjob = await admin.get(CRONJOBS, "nova-db-archive", namespace)
    assert stored_cronjob["spec"]["suspend"] is True


# -- NovaAPIReady: the real prober against servers on 127.0.0.1 ---------------------------------------


@pytest.fixture
async def slow_and_broken() -> AsyncIterator[tuple[str, str]]:
    """(a URL that answers after 5 s, a URL whose server drops the connection without a response)."""

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.Response(text="late")

    app = web.Application()
    app.router.add_get("/", slow)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]

    async def drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(100)
        writer.close()

    server = await asyncio.start_server(drop, "127.0.0.1", 0)
    dropper = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/", f"http://127.0.0.1:{dropper}/"
    finally:
        server.close()
        await server.wait_closed()
        await runner.cleanup()


async def probe_reason(kube: Kube, nova: Object, url: str, *, limit: float = 0.5) -> tuple[str, str, str]:
    async def prober(probe_url: str, _: float) -> int:
        return await health_check.http_probe(probe_url, limit)

    ctx = make_ctx(kube, nova, options=NovaOptions(prober=prober, nova_api_url=lambda name, ns: url))
    ctx.status["endpoint"] = "http://nova.ns.svc.cluster.local:8774"
    assert (await health_check.reconcile_health_check(ctx)).requeue_after == intervals.HEALTH_CHECK_RETRY
    return reason(ctx, conditions.NOVA_API_READY)


async def test_no_endpoint_yet_is_endpoint_not_ready(admin: Kube, ours: Recorder, namespace: str) -> None:
    ctx = make_ctx(ours, await stored_nova(admin, namespace))
    assert (await health_check.reconcile_health_check(ctx)).requeue_after == intervals.HEALTH_CHECK_RETRY
    assert reason(ctx, conditions.NOVA_API_READY) == (
        "False",
        "EndpointNotReady",
        "status.endpoint is not set yet",
    )
    assert ours.calls == []


async def test_a_name_that_does_not_resolve_is_endpoint_not_ready(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    try:
        socket.getaddrinfo("nova.ns.invalid", 8774)
    except socket.gaierror:
        pass
    else:  # pragma: no cover - a resolver that answers for .invalid breaks the premise
        raise AssertionError("the resolver answers for .invalid")
    nova = await stored_nova(admin, namespace)
    status, why, message = await probe_reason(ours, nova, "http://nova.ns.invalid:8774/", limit=5)
    assert (status, why) == ("False", "EndpointNotReady")
    assert "does not resolve" in message


async def test_a_slow_api_is_health_check_timeout(
    admin: Kube, ours: Recorder, namespace: str, slow_and_broken: tuple[str, str]
) -> None:
    status, why, message = await probe_reason(ours, await stored_nova(admin, namespace), slow_and_broken[0])
    assert (status, why) == ("False", "HealthCheckTimeout")
    assert "timed out" in message


async def test_a_dropped_connection_is_health_check_failed(
    admin: Kube, ours: Recorder, namespace: str, slow_and_broken: tuple[str, str]
) -> None:
    status, why, message = await probe_reason(ours, await stored_nova(admin, namespace), slow_and_broken[1])
    assert (status, why) == ("False", "HealthCheckFailed")
    assert message.startswith(f"GET {slow_and_broken[1]}")


# -- the route conditions ----------------------------------------------------------------------------

GATEWAY = {"hostname": "nova.example.org", "parentRef": {"name": "public"}}


async def test_a_route_no_parent_accepted_yet_is_http_route_not_accepted(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    ctx = make_ctx(ours, await stored_nova(admin, namespace, gateway=GATEWAY))
    assert (await http_route.reconcile_http_route(ctx)).requeue_after == intervals.DEPLOYMENT_POLL
    assert reason(ctx, conditions.HTTP_ROUTE_READY)[:2] == ("False", "HTTPRouteNotAccepted")
    assert (await admin.get(HTTPROUTES, "nova", namespace))["spec"]["hostnames"] == ["nova.example.org"]


async def test_a_cluster_without_the_gateway_api_is_gateway_api_not_installed(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await stored_nova(admin, namespace, gateway=GATEWAY)
    ctx = make_ctx(ours, nova, options=NovaOptions(gateway_api=False))
    assert (await http_route.reconcile_http_route(ctx)).requeue_after is None
    assert reason(ctx, conditions.HTTP_ROUTE_READY)[:2] == ("False", "GatewayAPINotInstalled")
    assert written(ours) == []


# -- the retention warning (the upstream webhook's UPDATE warning, as an event) ----------------------


async def archive_pass(
    admin: Kube, ours: Recorder, namespace: str, events: Emitted, retention: int | None
) -> None:
    """The user sets (or removes) the retention window; a pass of the archive step follows."""
    window = {"dbArchive": {"retentionDays": retention} if retention is not None else None}
    nova = await admin.patch(NOVAS, "nova", {"spec": window}, namespace)
    cronjobs = Cache(str(CRONJOBS))
    for obj in (await admin.list(CRONJOBS, namespace))["items"]:
        cronjobs.upsert(obj)
    ctx = await with_config(make_ctx(ours, nova, events=events, caches={CRONJOBS: cronjobs}))
    await db_archive.reconcile_db_archive(ctx)


async def test_a_lowered_or_removed_retention_window_is_warned_once(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    await stored_nova(admin, namespace)
    events = Emitted()
    for retention in (30, 30, 60):  # raised: no warning
        await archive_pass(admin, ours, namespace, events, retention)
    assert [e for e in events.emitted if e[1] == "DBArchiveRetentionReduced"] == []
    for retention in (7, 7, None):  # the same window again: no second event
        await archive_pass(admin, ours, namespace, events, retention)
    warned = [(t, m) for t, r, m in events.emitted if r == "DBArchiveRetentionReduced"]
    assert warned == [
        (
            "Warning",
            "spec.dbArchive.retentionDays reduced 60 to 7: soft-deleted rows older than 7 days are archived "
            "from now on",
        ),
        (
            "Warning",
            "spec.dbArchive.retentionDays removed (was 7): soft-deleted rows of any age are archived "
            "from now on",
        ),
    ]


async def test_a_namespace_scoped_operator_does_not_read_a_cluster_secret_store(
    admin: Kube,
    ours: Recorder,
    namespace: str,
    external_secrets: None,
    cluster: list[tuple[ResourceRef, str]],
) -> None:
    name = f"openbao-{namespace}"
    body = {"apiVersion": CLUSTER_SECRET_STORES.api_version, "kind": "ClusterSecretStore", "spec": {}}
    await make(admin, cluster, CLUSTER_SECRET_STORES, {**body, "metadata": {"name": name}}, ready=True)
    store = {"kind": "ClusterSecretStore", "name": name}
    inputs = await stored(admin, namespace, *ALL_SECRETS)
    nova = await stored_nova(admin, namespace, secretStoreRef=store)
    ctx = make_ctx(ours, nova, *inputs, options=NovaOptions(namespaced=True))
    assert (await secrets.reconcile_secrets(ctx)).requeue_after == intervals.SECRET_POLL
    status, why, message = reason(ctx, conditions.SECRETS_READY)
    assert (status, why) == ("False", "ClusterSecretStoreUnsupported")
    assert f"ClusterSecretStore {name}" in message
    assert "SecretStore in this namespace" in message
    assert not [c for c in ours.calls if c[1] == str(CLUSTER_SECRET_STORES)]  # not read at all
    # a SecretStore in the namespace is fine in that mode
    local = {
        "apiVersion": SECRET_STORES.api_version,
        "kind": "SecretStore",
        "metadata": {"name": "local"},
        "spec": {},
    }
    await admin.create(SECRET_STORES, local, namespace)
    await admin.patch_status(SECRET_STORES, "local", {"status": {"conditions": READY}}, namespace)
    nova = await admin.patch(
        NOVAS, "nova", {"spec": {"secretStoreRef": {"kind": "SecretStore", "name": "local"}}}, namespace
    )
    ctx = make_ctx(ours, nova, *inputs, options=NovaOptions(namespaced=True))
    assert (await secrets.reconcile_secrets(ctx)).requeue_after is None


# -- a named PriorityClass must exist ------------------------------------------------------------------


async def test_a_missing_priority_class_is_reported_and_the_deployment_is_not_rolled(
    admin: Kube, ours: Recorder, namespace: str, cluster: list[tuple[ResourceRef, str]]
) -> None:
    critical = f"nova-critical-{namespace}"
    spec = {"scheduler": {"deployment": {"replicas": 1, "priorityClassName": critical}}}
    nova = await stored_nova(admin, namespace, **spec)
    ctx = await with_config(make_ctx(ours, nova))
    assert (await workloads.reconcile_scheduler(ctx)).requeue_after == intervals.DEPLOYMENT_POLL
    status, why, message = reason(ctx, conditions.SCHEDULER_READY)
    assert (status, why) == ("False", "WaitingForScheduler")
    assert message.startswith(
        f"spec.scheduler.deployment.priorityClassName: PriorityClass {critical} does not exist"
    )
    assert [c for c in written(ours) if c[1] == str(DEPLOYMENTS)] == []  # nothing rolled
    await make(admin, cluster, PRIORITY_CLASSES, priority_class(critical, 1000))
    await workloads.reconcile_scheduler(ctx)
    applied = await admin.get(DEPLOYMENTS, "nova-scheduler", namespace)
    assert applied["spec"]["template"]["spec"]["priorityClassName"] == critical
    # once the live Deployment runs with the class, a pass does not look it up again
    ctx = await with_config(make_ctx(ours, nova, applied))
    calls = len(ours.calls)
    await workloads.reconcile_scheduler(ctx)
    assert not [c for c in ours.calls[calls:] if c[1] == str(PRIORITY_CLASSES)]


async def test_a_missing_priority_class_on_the_api_block_waits_its_step(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await stored_nova(
        admin, namespace, api={"deployment": {"replicas": 1, "priorityClassName": "gone"}}
    )
    ctx = await with_config(make_ctx(ours, nova))
    assert (await deployment.reconcile_deployment(ctx)).requeue_after == intervals.DEPLOYMENT_POLL
    status, why, message = reason(ctx, conditions.DEPLOYMENT_READY)
    assert (status, why) == ("False", "WaitingForDeployment")
    assert "spec.api.deployment.priorityClassName: PriorityClass gone does not exist" in message


async def test_a_missing_priority_class_of_the_jobs_stops_the_archive_and_the_db_sync_before_writing(
    admin: Kube, ours: Recorder, namespace: str, cluster: list[tuple[ResourceRef, str]]
) -> None:
    low = f"batch-low-{namespace}"
    # spec.jobs names it for both
    nova = await stored_nova(admin, namespace, jobs={"priorityClassName": low})
    ctx = await with_config(make_ctx(ours, nova))
    assert (await db_archive.reconcile_db_archive(ctx)).requeue_after == intervals.DEPLOYMENT_POLL
    status, why, message = reason(ctx, conditions.DB_ARCHIVE_READY)
    assert (status, why) == ("False", "ConfigError")
    assert message == (
        f"spec.jobs.priorityClassName: PriorityClass {low} does not exist; "
        "CronJob nova-db-archive is not written"
    )
    assert await database.reconcile_database(ctx, upgrade_flow=no_upgrade) == Result(
        requeue_after=intervals.DEPLOYMENT_POLL
    )
    status, why, message = reason(ctx, conditions.DATABASE_READY)
    assert (status, why) == ("False", "ConfigError")
    assert "Job nova-db-sync is not written" in message
    assert written(ours) == []
    # the Jobs fall back to the API block's class, and the message names that field
    high = await stored_nova(
        admin, namespace, "high", api={"deployment": {"replicas": 1, "priorityClassName": "api-high"}}
    )
    ctx = await with_config(make_ctx(ours, high))
    await db_archive.reconcile_db_archive(ctx)
    assert reason(ctx, conditions.DB_ARCHIVE_READY)[2].startswith("spec.api.deployment.priorityClassName: ")
    # once the class exists, both are written
    await make(admin, cluster, PRIORITY_CLASSES, priority_class(low, 10))
    ctx = await with_config(make_ctx(ours, nova))
    await db_archive.reconcile_db_archive(ctx)
    await database.reconcile_database(ctx, upgrade_flow=no_upgrade)
    assert (await admin.get(CRONJOBS, "nova-db-archive", namespace))["metadata"]["name"] == "nova-db-archive"
    job = await admin.get(JOBS, "nova-db-sync", namespace)
    assert job["spec"]["template"]["spec"]["priorityClassName"] == low
