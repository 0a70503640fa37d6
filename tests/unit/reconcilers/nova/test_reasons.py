"""Each Nova reason of reconciler.md §8.1 no other test produced, produced by the step that owns it."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from nova_operator import conditions, intervals
from nova_operator.kube.errors import KubeError
from nova_operator.kube.resources import HTTPROUTES, JOBS, MARIADBS, SECRET_STORES
from nova_operator.kube.types import Object
from nova_operator.reconcilers.nova import (
    compute_config,
    database,
    db_archive,
    health_check,
    http_route,
    secrets,
)
from nova_operator.reconcilers.nova.context import NovaOptions, PassContext
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.request import Result
from tests.unit.reconcilers.nova.passes import ALL_SECRETS, make_ctx, secret


def reason(ctx: PassContext, cond_type: str) -> tuple[str, str, str]:
    c = ctx.condition(cond_type)
    assert c is not None, cond_type
    return str(c["status"]), str(c["reason"]), str(c["message"])


# -- SecretsReady / ComputeConfigReady -------------------------------------------------------------


async def test_a_tls_bus_without_its_ca_bundle_waits_for_messaging_ca(kube: Any, events: Any) -> None:
    tls = {"secretRef": {"name": "bus"}, "tls": {"caBundleSecretRef": {"name": "rabbitmq-ca"}}}
    ctx = make_ctx(kube, events, *ALL_SECRETS, messaging=tls)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after == intervals.SECRET_POLL
    status, why, message = reason(ctx, conditions.SECRETS_READY)
    assert (status, why) == ("False", "WaitingForMessagingCA")
    assert message == "spec.messaging.tls.caBundleSecretRef: Secret ns/rabbitmq-ca not found"
    ctx = make_ctx(kube, events, *ALL_SECRETS, secret("rabbitmq-ca", other="x"), messaging=tls)
    await secrets.reconcile_secrets(ctx)
    assert reason(ctx, conditions.SECRETS_READY)[2].endswith("rabbitmq-ca has no key ca.crt")


REMOTE = {
    "keystoneEndpoint": "https://keystone.example.org/v3",
    "transportURLSecretRef": {"name": "remote-bus"},
}


async def test_a_remote_contract_without_its_url_waits_and_the_local_one_is_published(
    kube: Any, events: Any
) -> None:
    ctx = make_ctx(kube, events, remoteCompute=REMOTE)
    ctx.state.transport_url = "rabbit://nova:pw@bus:5672/"
    ctx.state.digest_key = b"k"  # the Secrets step ran first
    assert (await compute_config.reconcile_compute_config(ctx)).requeue_after is None
    status, why, message = reason(ctx, conditions.COMPUTE_CONFIG_READY)
    assert (status, why) == ("False", "WaitingForRemoteTransportURL")
    assert "spec.remoteCompute.transportURLSecretRef" in message
    assert "remote-bus" in message
    assert ctx.status["computeConfigSecretRef"] == {"name": "nova-compute-config"}
    assert "remoteComputeConfigSecretRef" not in ctx.status


class RefusingKube:
    """The unit FakeKube whose server-side applies are refused."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.metrics = inner.metrics

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def apply(self, *args: Any, **kwargs: Any) -> Object:
        url = "rabbit://nova:pw@bus:5672/"  # a server message may quote a value it refused
        raise KubeError(
            f'Secret ns/nova-compute-config is invalid: data[transport_url]: "{url}" too long', status=422
        )


async def test_a_refused_contract_write_is_compute_config_error(kube: Any, events: Any) -> None:
    ctx = make_ctx(RefusingKube(kube), events)
    ctx.state.transport_url = "rabbit://nova:pw@bus:5672/"
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


async def test_database_objects_not_ready_wait_for_database(kube: Any, events: Any) -> None:
    ready = [{"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "x"}]
    mariadb = {
        "apiVersion": MARIADBS.api_version,
        "kind": "MariaDB",
        "metadata": {"name": "mariadb", "namespace": "ns"},
        "status": {"conditions": ready},
    }
    kube.put(MARIADBS, mariadb)
    ctx = make_ctx(kube, events, **MANAGED)
    ctx.state.config_map = "nova-config-abc"
    assert (
        await database.reconcile_database(ctx, upgrade_flow=no_upgrade)
    ).requeue_after == intervals.DATABASE_WAIT
    status, why, message = reason(ctx, conditions.DATABASE_READY)
    assert (status, why) == ("False", "WaitingForDatabase")
    assert message.startswith("Database CR not ready: Database nova-api")


async def test_no_config_map_waits_for_config_and_a_running_job_is_db_sync_in_progress(
    kube: Any, events: Any
) -> None:
    ctx = make_ctx(kube, events)  # brownfield: nothing to provision
    assert (await database.reconcile_database(ctx, upgrade_flow=no_upgrade)).requeue_after is not None
    assert reason(ctx, conditions.DATABASE_READY)[:2] == ("False", "WaitingForConfig")
    assert kube.writes() == []  # no Job without a config to mount
    ctx.state.config_map = "nova-config-abc"
    await database.reconcile_database(ctx, upgrade_flow=no_upgrade)  # creates the Job
    job = await kube.get(JOBS, "nova-db-sync", "ns")
    ctx.caches[JOBS].upsert({**job, "status": {"active": 1}})
    assert (await database.reconcile_database(ctx, upgrade_flow=no_upgrade)).requeue_after is not None
    assert reason(ctx, conditions.DATABASE_READY) == ("False", "DBSyncInProgress", "db_sync job is running")


# -- DBArchiveReady ----------------------------------------------------------------------------------


async def test_a_suspended_archive_is_db_archive_suspended(kube: Any, events: Any) -> None:
    ctx = make_ctx(kube, events, dbArchive={"suspend": True})
    ctx.state.config_map = "nova-config-abc"
    assert (await db_archive.reconcile_db_archive(ctx)).requeue_after is None
    status, why, message = reason(ctx, conditions.DB_ARCHIVE_READY)
    assert (status, why) == ("True", "DBArchiveSuspended")
    assert "suspended" in message
    stored = await kube.get(db_archive_ref(), "nova-db-archive", "ns")
    assert stored["spec"]["suspend"] is True


def db_archive_ref() -> Any:
    from nova_operator.kube.resources import CRONJOBS

    return CRONJOBS


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


async def probe_reason(kube: Any, events: Any, url: str, *, limit: float = 0.5) -> tuple[str, str, str]:
    async def prober(probe_url: str, _: float) -> int:
        return await health_check.http_probe(probe_url, limit)

    ctx = make_ctx(kube, events, options=NovaOptions(prober=prober, nova_api_url=lambda name, ns: url))
    ctx.status["endpoint"] = "http://nova.ns.svc.cluster.local:8774"
    assert (await health_check.reconcile_health_check(ctx)).requeue_after == intervals.HEALTH_CHECK_RETRY
    return reason(ctx, conditions.NOVA_API_READY)


async def test_no_endpoint_yet_is_endpoint_not_ready(kube: Any, events: Any) -> None:
    ctx = make_ctx(kube, events)
    assert (await health_check.reconcile_health_check(ctx)).requeue_after == intervals.HEALTH_CHECK_RETRY
    assert reason(ctx, conditions.NOVA_API_READY) == (
        "False",
        "EndpointNotReady",
        "status.endpoint is not set yet",
    )


async def test_a_name_that_does_not_resolve_is_endpoint_not_ready(kube: Any, events: Any) -> None:
    try:
        socket.getaddrinfo("nova.ns.invalid", 8774)
    except socket.gaierror:
        pass
    else:  # pragma: no cover - a resolver that answers for .invalid breaks the premise
        raise AssertionError("the resolver answers for .invalid")
    status, why, message = await probe_reason(kube, events, "http://nova.ns.invalid:8774/", limit=5)
    assert (status, why) == ("False", "EndpointNotReady")
    assert "does not resolve" in message


async def test_a_slow_api_is_health_check_timeout(
    kube: Any, events: Any, slow_and_broken: tuple[str, str]
) -> None:
    status, why, message = await probe_reason(kube, events, slow_and_broken[0])
    assert (status, why) == ("False", "HealthCheckTimeout")
    assert "timed out" in message


async def test_a_dropped_connection_is_health_check_failed(
    kube: Any, events: Any, slow_and_broken: tuple[str, str]
) -> None:
    status, why, message = await probe_reason(kube, events, slow_and_broken[1])
    assert (status, why) == ("False", "HealthCheckFailed")
    assert message.startswith(f"GET {slow_and_broken[1]}")


# -- the route conditions ----------------------------------------------------------------------------

GATEWAY = {"hostname": "nova.example.org", "parentRef": {"name": "public"}}


async def test_a_route_no_parent_accepted_yet_is_http_route_not_accepted(kube: Any, events: Any) -> None:
    ctx = make_ctx(kube, events, gateway=GATEWAY)
    assert (await http_route.reconcile_http_route(ctx)).requeue_after == intervals.DEPLOYMENT_POLL
    assert reason(ctx, conditions.HTTP_ROUTE_READY)[:2] == ("False", "HTTPRouteNotAccepted")
    assert (await kube.get(HTTPROUTES, "nova", "ns"))["spec"]["hostnames"] == ["nova.example.org"]


async def test_a_cluster_without_the_gateway_api_is_gateway_api_not_installed(kube: Any, events: Any) -> None:
    ctx = make_ctx(kube, events, options=NovaOptions(gateway_api=False), gateway=GATEWAY)
    assert (await http_route.reconcile_http_route(ctx)).requeue_after is None
    assert reason(ctx, conditions.HTTP_ROUTE_READY)[:2] == ("False", "GatewayAPINotInstalled")
    assert kube.writes() == []


# -- the retention warning (the upstream webhook's UPDATE warning, as an event) ----------------------


async def archive_pass(kube: Any, events: Any, retention: int | None) -> PassContext:
    from nova_operator.kube.resources import CRONJOBS

    spec = {"dbArchive": {"retentionDays": retention}} if retention is not None else {}
    ctx = make_ctx(kube, events, **spec)
    ctx.caches[CRONJOBS] = ctx.caches.get(CRONJOBS) or Cache("cronjobs")
    for (ref, _ns, _name), obj in kube.store.items():
        if ref == str(CRONJOBS):
            ctx.caches[CRONJOBS].upsert(obj)
    ctx.state.config_map = "nova-config-abc"
    await db_archive.reconcile_db_archive(ctx)
    return ctx


async def test_a_lowered_or_removed_retention_window_is_warned_once(kube: Any, events: Any) -> None:
    await archive_pass(kube, events, 30)
    await archive_pass(kube, events, 30)
    await archive_pass(kube, events, 60)  # raised: no warning
    assert [e for e in events.emitted if e[1] == "DBArchiveRetentionReduced"] == []
    await archive_pass(kube, events, 7)
    await archive_pass(kube, events, 7)  # the same window again: no second event
    await archive_pass(kube, events, None)
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
    kube: Any, events: Any
) -> None:
    from nova_operator.kube.resources import CLUSTER_SECRET_STORES

    ready = [{"type": "Ready", "status": "True"}]
    kube.put(CLUSTER_SECRET_STORES, {"metadata": {"name": "openbao"}, "status": {"conditions": ready}})
    store = {"kind": "ClusterSecretStore", "name": "openbao"}
    ctx = make_ctx(kube, events, *ALL_SECRETS, options=NovaOptions(namespaced=True), secretStoreRef=store)
    calls = len(kube.calls)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after == intervals.SECRET_POLL
    status, why, message = reason(ctx, conditions.SECRETS_READY)
    assert (status, why) == ("False", "ClusterSecretStoreUnsupported")
    assert "ClusterSecretStore openbao" in message
    assert "SecretStore in this namespace" in message
    assert not [c for c in kube.calls[calls:] if c[1] == str(CLUSTER_SECRET_STORES)]  # not read at all
    # a SecretStore in the namespace is fine in that mode
    kube.put(
        SECRET_STORES,
        {"metadata": {"name": "local", "namespace": "ns"}, "status": {"conditions": ready}},
    )
    ctx = make_ctx(
        kube,
        events,
        *ALL_SECRETS,
        options=NovaOptions(namespaced=True),
        secretStoreRef={"kind": "SecretStore", "name": "local"},
    )
    assert (await secrets.reconcile_secrets(ctx)).requeue_after is None


def test_a_namespace_scoped_install_sets_the_option_and_a_cluster_wide_one_does_not() -> None:
    from nova_operator.controllers import with_settings
    from nova_operator.settings import Settings, WatchSettings

    scoped = with_settings(NovaOptions(), Settings(watch=WatchSettings(namespaces=("openstack",))))
    assert scoped.namespaced is True
    assert with_settings(NovaOptions(), Settings()).namespaced is False


# -- a named PriorityClass must exist ------------------------------------------------------------------


async def test_a_missing_priority_class_is_reported_and_the_deployment_is_not_rolled(
    kube: Any, events: Any
) -> None:
    from nova_operator.kube.resources import DEPLOYMENTS, PRIORITY_CLASSES
    from nova_operator.reconcilers.nova import workloads

    spec = {"scheduler": {"deployment": {"replicas": 1, "priorityClassName": "nova-critical"}}}
    ctx = make_ctx(kube, events, **spec)
    ctx.state.config_map = "nova-config-abc"
    assert (await workloads.reconcile_scheduler(ctx)).requeue_after == intervals.DEPLOYMENT_POLL
    status, why, message = reason(ctx, conditions.SCHEDULER_READY)
    assert (status, why) == ("False", "WaitingForScheduler")
    assert message.startswith(
        "spec.scheduler.deployment.priorityClassName: PriorityClass nova-critical does not exist"
    )
    assert [c for c in kube.writes() if c[1] == str(DEPLOYMENTS)] == []  # nothing rolled
    kube.put(PRIORITY_CLASSES, {"metadata": {"name": "nova-critical"}, "value": 1000})
    await workloads.reconcile_scheduler(ctx)
    applied = await kube.get(DEPLOYMENTS, "nova-scheduler", "ns")
    assert applied["spec"]["template"]["spec"]["priorityClassName"] == "nova-critical"
    # once the live Deployment runs with the class, a pass does not look it up again
    ctx = make_ctx(kube, events, applied, **spec)
    ctx.state.config_map = "nova-config-abc"
    calls = len(kube.calls)
    await workloads.reconcile_scheduler(ctx)
    assert not [c for c in kube.calls[calls:] if c[1] == str(PRIORITY_CLASSES)]


async def test_a_missing_priority_class_on_the_api_block_waits_its_step(kube: Any, events: Any) -> None:
    from nova_operator.reconcilers.nova import deployment

    ctx = make_ctx(kube, events, api={"deployment": {"replicas": 1, "priorityClassName": "gone"}})
    ctx.state.config_map = "nova-config-abc"
    assert (await deployment.reconcile_deployment(ctx)).requeue_after == intervals.DEPLOYMENT_POLL
    status, why, message = reason(ctx, conditions.DEPLOYMENT_READY)
    assert (status, why) == ("False", "WaitingForDeployment")
    assert "spec.api.deployment.priorityClassName: PriorityClass gone does not exist" in message


async def test_a_missing_priority_class_of_the_jobs_stops_the_archive_and_the_db_sync_before_writing(
    kube: Any, events: Any
) -> None:
    from nova_operator.kube.resources import CRONJOBS, PRIORITY_CLASSES

    # spec.jobs names it for both
    ctx = make_ctx(kube, events, jobs={"priorityClassName": "batch-low"})
    ctx.state.config_map = "nova-config-abc"
    assert (await db_archive.reconcile_db_archive(ctx)).requeue_after == intervals.DEPLOYMENT_POLL
    status, why, message = reason(ctx, conditions.DB_ARCHIVE_READY)
    assert (status, why) == ("False", "ConfigError")
    assert message == (
        "spec.jobs.priorityClassName: PriorityClass batch-low does not exist; "
        "CronJob nova-db-archive is not written"
    )
    assert await database.reconcile_database(ctx, upgrade_flow=no_upgrade) == Result(
        requeue_after=intervals.DEPLOYMENT_POLL
    )
    status, why, message = reason(ctx, conditions.DATABASE_READY)
    assert (status, why) == ("False", "ConfigError")
    assert "Job nova-db-sync is not written" in message
    assert kube.writes() == []
    # the Jobs fall back to the API block's class, and the message names that field
    ctx = make_ctx(kube, events, api={"deployment": {"replicas": 1, "priorityClassName": "api-high"}})
    ctx.state.config_map = "nova-config-abc"
    await db_archive.reconcile_db_archive(ctx)
    assert reason(ctx, conditions.DB_ARCHIVE_READY)[2].startswith("spec.api.deployment.priorityClassName: ")
    # once the class exists, both are written
    kube.put(PRIORITY_CLASSES, {"metadata": {"name": "batch-low"}, "value": 10})
    ctx = make_ctx(kube, events, jobs={"priorityClassName": "batch-low"})
    ctx.state.config_map = "nova-config-abc"
    await db_archive.reconcile_db_archive(ctx)
    await database.reconcile_database(ctx, upgrade_flow=no_upgrade)
    assert (await kube.get(CRONJOBS, "nova-db-archive", "ns"))["metadata"]["name"] == "nova-db-archive"
    assert (await kube.get(JOBS, "nova-db-sync", "ns"))["spec"]["template"]["spec"][
        "priorityClassName"
    ] == "batch-low"
