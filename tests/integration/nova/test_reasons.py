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
from nova_operator.kube.resources import (
    CLUSTER_SECRET_STORES,
    CRONJOBS,
    JOBS,
    MARIADBS,
    NOVAS,
    PRIORITY_CLASSES,
    SECRET_STORES,
    ResourceRef,
)
from nova_operator.kube.types import Object
from nova_operator.reconcilers.nova import (
    database,
    db_archive,
    health_check,
    secrets,
)
from nova_operator.reconcilers.nova.context import NovaOptions
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.request import Result
from tests.integration.nova.passes import ALL_SECRETS, make_ctx, secret, stored, stored_nova
from tests.integration.nova.reasons_kit import (
    READY,
    make,
    no_upgrade,
    priority_class,
    reason,
    with_config,
    written,
)
from tests.integration.nova.requests import Recorder

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


# -- DatabaseReady -----------------------------------------------------------------------------------


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
