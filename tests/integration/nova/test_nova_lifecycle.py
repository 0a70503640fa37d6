"""Waiting states, config changes, invalid inputs, failures and deletion of a Nova, on the real API server."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from nova_operator import conditions
from nova_operator.kube import Kube
from nova_operator.kube.errors import KubeError, NotFound, Unreachable
from nova_operator.kube.resources import (
    CONFIGMAPS,
    CRONJOBS,
    DATABASES,
    DEPLOYMENTS,
    GRANTS,
    JOBS,
    NOVAS,
    PODS,
    SECRETS,
    USERS,
)
from nova_operator.kube.types import Object
from nova_operator.runtime.request import Request
from tests.integration.nova.inputs import (
    SECRET_VALUES,
    SECRETS_DATA,
    cond,
    create_inputs,
    events_of,
    is_ready,
    nova_body,
    sample_value,
    secret,
)

from .conftest import (  # type: ignore[import-not-found]
    Operator,
    Simulator,
    nova_ready_gauge,
    now,
    wait_for,
)


def secrets_reason(reason: str, fragment: str = "") -> Any:
    def check(nova: Object) -> bool:
        c = cond(nova, "SecretsReady")
        return c.get("reason") == reason and fragment in c.get("message", "")

    return check


async def test_each_missing_secret_or_key_waits_with_its_reason_and_proceeds_when_it_appears(
    admin: Kube, operator: Operator, namespace: str
) -> None:
    ns = namespace
    await admin.create(NOVAS, nova_body(), ns)
    get = lambda: admin.get(NOVAS, "nova", ns)  # noqa: E731
    # Each wait below is shorter than the 15 s secret poll: progress comes from the Secret watch.
    within = 10
    await wait_for(get, secrets_reason("WaitingForDBCredentials", f"Secret {ns}/api-db not found"), within)
    await wait_for(nova_ready_gauge(operator, ns), lambda v: v == 0, within)  # not Ready: 0, not absent
    await admin.create(SECRETS, secret("api-db", {"username": "nova_api"}), ns)
    await wait_for(get, secrets_reason("WaitingForDBCredentials", "api-db has no key password"), within)
    await admin.patch(SECRETS, "api-db", {"stringData": {"password": SECRETS_DATA["api-db"]["password"]}}, ns)
    await wait_for(get, secrets_reason("WaitingForDBCredentials", "spec.database: Secret"), within)
    await admin.create(SECRETS, secret("cell-db", SECRETS_DATA["cell-db"]), ns)
    await wait_for(get, secrets_reason("WaitingForServiceUserCredentials", "service-user"), within)
    await admin.create(SECRETS, secret("service-user", SECRETS_DATA["service-user"]), ns)
    await wait_for(get, secrets_reason("WaitingForMetadataSharedSecret", "metadata-proxy"), within)
    await admin.create(SECRETS, secret("metadata-proxy", {"shared_secret": ""}), ns)
    await wait_for(get, secrets_reason("MetadataSharedSecretEmpty", "is empty"), within)
    await admin.patch(SECRETS, "metadata-proxy", {"stringData": SECRETS_DATA["metadata-proxy"]}, ns)
    await wait_for(get, secrets_reason("WaitingForMessagingCredentials", "bus"), within)
    await admin.create(
        SECRETS, secret("bus", {"transport_url": "rabbit://nova:pw@rabbitmq.example.org/"}), ns
    )
    await wait_for(get, secrets_reason("TransportURLRejected", "port"), within)
    await admin.patch(SECRETS, "bus", {"stringData": SECRETS_DATA["bus"]}, ns)
    nova = await wait_for(get, lambda n: cond(n, "SecretsReady").get("status") == "True", within)
    # no MariaDB yet: the next gate is the Database step's, and nothing was derived with empty values
    assert cond(nova, "DatabaseReady")["reason"] == "ClusterNotReady"
    assert cond(nova, "Ready")["status"] == "False"
    for name in ("nova-api-db-connection", "nova-db-connection", "nova-transport-url", "nova-compute-config"):
        assert (await admin.get(SECRETS, name, ns))["data"]
    # a closed gate is a polling state: no events (reconciler.md §13)
    assert [e for e in await events_of(admin, ns) if e[0] == "Warning"] == []
    # messages never carry a credential
    assert "pw@" not in str(nova["status"])


def config_map_of(deployment: Object) -> str:
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    return str(next(v for v in volumes if v["name"] == "config")["configMap"]["name"])


async def ready_at_generation(admin: Kube, ns: str, generation: int) -> Object:
    get = lambda: admin.get(NOVAS, "nova", ns)  # noqa: E731
    return await wait_for(
        get, lambda n: is_ready(n) and n["status"]["observedGeneration"] == generation, within=60
    )


async def test_an_extra_config_change_rolls_the_workloads_and_old_config_maps_are_pruned_to_three(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    await create_inputs(admin, ns)
    nova = await admin.create(NOVAS, nova_body(), ns)
    nova = await ready_at_generation(admin, ns, 1)
    seen = [config_map_of(await admin.get(DEPLOYMENTS, "nova-scheduler", ns))]
    created = {seen[0]: (await admin.get(CONFIGMAPS, seen[0], ns))["metadata"]["creationTimestamp"]}
    for i in range(5):
        nova = await admin.get(NOVAS, "nova", ns)
        nova["spec"]["extraConfig"] = {"quota": {"instances": str(100 + i)}}
        nova = await admin.replace(NOVAS, nova, ns)
        await ready_at_generation(admin, ns, nova["metadata"]["generation"])
        for name in ("nova", "nova-scheduler", "nova-conductor", "nova-metadata", "nova-novncproxy"):
            assert config_map_of(await admin.get(DEPLOYMENTS, name, ns)) not in seen
        current = config_map_of(await admin.get(DEPLOYMENTS, "nova-scheduler", ns))
        config = await admin.get(CONFIGMAPS, current, ns)
        assert f"instances = {100 + i}" in config["data"]["nova.conf"]
        created[current] = config["metadata"]["creationTimestamp"]
        job = await admin.get(JOBS, "nova-db-sync", ns)
        assert config_map_of(job) == current  # the config change re-ran db-sync first
        seen.append(current)
    names = sorted(cm["metadata"]["name"] for cm in (await admin.list(CONFIGMAPS, ns))["items"])
    # the current one plus the 3 newest historical: creationTimestamp has whole seconds, and
    # renders in the same second tie, broken by name descending (nova-crd.md §8.1)
    newest = sorted(seen[:-1], key=lambda name: (created[name], name), reverse=True)[:3]
    assert names == sorted([seen[-1], *newest])
    m = operator.metrics
    assert (
        sample_value(
            m, "nova_operator_db_sync_total", {"nova": "nova", "namespace": ns, "result": "succeeded"}
        )
        == 6
    )


ROLES = ("nova", "nova-metadata", "nova-conductor", "nova-scheduler", "nova-novncproxy")


def policy_map_of(deployment: Object) -> str:
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    return str(next((v for v in volumes if v["name"] == "policy"), {}).get("configMap", {}).get("name", ""))


async def test_an_edit_of_the_policy_config_map_alone_rolls_the_api_and_metadata_pods(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    """Issue 38 item 3: the ConfigMap spec.policy.configMapRef names is watched; no spec edit. The
    policy has a ConfigMap of its own that the API and metadata pods alone mount: a policy change
    changes those two pod templates, and neither the other three nor the db-sync Job."""
    ns = namespace
    await create_inputs(admin, ns)
    policy = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nova-policy"}}
    await admin.create(
        CONFIGMAPS, {**policy, "data": {"policy.yaml": '"os_compute_api:servers:create": "role:admin"'}}, ns
    )
    body = nova_body()
    body["spec"]["policy"] = {"configMapRef": {"name": "nova-policy"}}
    await admin.create(NOVAS, body, ns)
    await ready_at_generation(admin, ns, 1)
    api = await admin.get(DEPLOYMENTS, "nova", ns)
    before = policy_map_of(api)
    files = {e["name"]: e.get("value") for e in api["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert str(files["OS_NOVA_CONFIG_FILES"]).endswith(";/etc/nova/policy-override/policy.conf")
    assert "policy.yaml" in (await admin.get(CONFIGMAPS, before, ns))["data"]
    assert "policy.yaml" not in (await admin.get(CONFIGMAPS, config_map_of(api), ns))["data"]
    templates = {n: (await admin.get(DEPLOYMENTS, n, ns))["spec"]["template"] for n in ROLES}
    assert [n for n in ROLES if policy_map_of({"spec": {"template": templates[n]}})] == list(ROLES[:2])
    job = (await admin.get(JOBS, "nova-db-sync", ns))["metadata"]["uid"]

    await admin.patch(
        CONFIGMAPS, "nova-policy", {"data": {"policy.yaml": '"os_compute_api:servers:crate": "@"'}}, ns
    )
    get = lambda: admin.get(NOVAS, "nova", ns)  # noqa: E731
    bad = await wait_for(get, secrets_reason("ConfigError", "os_compute_api:servers:crate"), 30)
    assert "no such policy rule in nova 2025.2" in cond(bad, "SecretsReady")["message"]
    assert policy_map_of(await admin.get(DEPLOYMENTS, "nova", ns)) == before  # the last good one stays

    await admin.patch(
        CONFIGMAPS, "nova-policy", {"data": {"policy.yaml": '"os_compute_api:servers:create": "@"'}}, ns
    )
    rolled = await wait_for(
        lambda: admin.get(DEPLOYMENTS, "nova", ns), lambda d: policy_map_of(d) != before, 30
    )
    assert "@" in (await admin.get(CONFIGMAPS, policy_map_of(rolled), ns))["data"]["policy.yaml"]
    metadata = await admin.get(DEPLOYMENTS, "nova-metadata", ns)
    assert policy_map_of(metadata) == policy_map_of(rolled)
    await wait_for(get, lambda n: cond(n, "SecretsReady").get("status") == "True", 30)
    after = {n: (await admin.get(DEPLOYMENTS, n, ns))["spec"]["template"] for n in ROLES}
    assert [n for n in ROLES if after[n] != templates[n]] == ["nova", "nova-metadata"]
    assert config_map_of({"spec": {"template": after["nova"]}}) == config_map_of(api)
    assert (await admin.get(JOBS, "nova-db-sync", ns))["metadata"]["uid"] == job  # db-sync not re-run


async def test_an_unknown_extra_config_key_is_refused_without_touching_the_running_config(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    await create_inputs(admin, ns)
    await admin.create(NOVAS, nova_body(), ns)
    await ready_at_generation(admin, ns, 1)
    good = config_map_of(await admin.get(DEPLOYMENTS, "nova", ns))
    config_maps = len((await admin.list(CONFIGMAPS, ns))["items"])
    errors_before = sample_value(
        operator.metrics, "nova_operator_controller_reconcile_errors_total", {"controller": "nova"}
    )

    nova = await admin.get(NOVAS, "nova", ns)
    nova["spec"]["extraConfig"] = {"DEFAULT": {"no_such_option": "1"}}
    nova = await admin.replace(NOVAS, nova, ns)
    get = lambda: admin.get(NOVAS, "nova", ns)  # noqa: E731
    bad = await wait_for(
        get, lambda n: n["status"]["observedGeneration"] == nova["metadata"]["generation"], 30
    )
    secrets_ready = cond(bad, "SecretsReady")
    assert secrets_ready["status"] == "False"
    assert secrets_ready["reason"] == "ConfigError"
    assert (
        "spec.extraConfig[DEFAULT][no_such_option]: no such option in the nova 2025.2 option catalog"
        in secrets_ready["message"]
    )
    assert cond(bad, "Ready")["status"] == "False"
    events = await events_of(admin, ns)
    assert any(t == "Warning" and r == "ConfigError" and "no_such_option" in m for t, r, m in events)
    # no half-written child: no new ConfigMap, every workload still mounts the last good one
    assert len((await admin.list(CONFIGMAPS, ns))["items"]) == config_maps
    for name in ("nova", "nova-scheduler", "nova-conductor", "nova-metadata"):
        assert config_map_of(await admin.get(DEPLOYMENTS, name, ns)) == good
    # the refusal is a quiet state too: more passes write nothing and repeat no event
    simulator.hold_jobs = True
    writes = operator.writes()
    for _ in range(5):
        await operator.force_pass("nova")
    assert operator.writes() - writes == 0
    simulator.hold_jobs = False
    assert len([e for e in await events_of(admin, ns) if e[1] == "ConfigError"]) == 1
    # not a crash loop: the pass ends without an error
    errors_after = sample_value(
        operator.metrics, "nova_operator_controller_reconcile_errors_total", {"controller": "nova"}
    )
    assert errors_after == errors_before

    bad["spec"].pop("extraConfig")
    fixed = await admin.replace(NOVAS, bad, ns)
    await ready_at_generation(admin, ns, fixed["metadata"]["generation"])


async def test_a_failed_db_sync_is_reported_once_with_its_event_and_metric(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str, capsys: Any
) -> None:
    ns = namespace
    simulator.fail_jobs = True
    await create_inputs(admin, ns)
    await admin.create(NOVAS, nova_body(), ns)
    get = lambda: admin.get(NOVAS, "nova", ns)  # noqa: E731
    nova = await wait_for(get, lambda n: cond(n, "DatabaseReady").get("reason") == "DBSyncFailed", 30)
    assert cond(nova, "DatabaseReady")["message"].startswith("db_sync job failed: ")
    events = await wait_for(
        lambda: events_of(admin, ns), lambda es: any(e[1] == "DBSyncFailed" for e in es), 10
    )
    assert ("Warning", "DBSyncFailed") in [(t, r) for t, r, _ in events]
    # retried with backoff, but the terminal Job is counted exactly once
    for _ in range(3):
        operator.controller.enqueue(Request(ns, "nova"))
        await wait_for(lambda: admin.get(NOVAS, "nova", ns), lambda n: True, 1)
    m = operator.metrics
    assert (
        sample_value(m, "nova_operator_db_sync_total", {"nova": "nova", "namespace": ns, "result": "failed"})
        == 1
    )
    assert (
        sample_value(
            m, "nova_operator_db_sync_total", {"nova": "nova", "namespace": ns, "result": "succeeded"}
        )
        == 0
    )
    assert (
        sample_value(
            m,
            "nova_operator_reconcile_errors_total",
            {"sub_reconciler": "Database", "condition_type": "DatabaseReady"},
        )
        >= 1
    )
    # no workload is applied while the database is not synced
    assert (await admin.list(DEPLOYMENTS, ns))["items"] == []
    # the logged errors (tracebacks included) carry no credential
    logged = capsys.readouterr()
    assert "DBSyncFailed" in logged.out + logged.err
    for value in SECRET_VALUES:
        assert value not in logged.out + logged.err


async def test_deletion_cleans_up_managed_databases_before_releasing_the_finalizer(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    await create_inputs(admin, ns)
    await admin.create(NOVAS, nova_body(), ns)
    await ready_at_generation(admin, ns, 1)
    managed = [(DATABASES, "nova-api"), (USERS, "nova-api"), (GRANTS, "nova-api"), (DATABASES, "nova")]
    managed += [
        (USERS, "nova"),
        (GRANTS, "nova"),
        (DATABASES, "nova-nova-cell0"),
        (GRANTS, "nova-nova-cell0"),
    ]
    await admin.delete(NOVAS, "nova", ns)
    await wait_for(lambda: events_of(admin, ns), lambda es: any(e[1] == "FinalizingDatabase" for e in es), 10)
    # The finalizer stays for one more pass. That pass comes after the 30 s database wait, or
    # at once when the deleted MariaDB children's watch events wake the Nova (they are watched
    # by owner); either way DatabaseFinalized follows FinalizingDatabase (asserted below).
    try:
        still = await admin.get(NOVAS, "nova", ns)
        assert "nova.openstack.c5c3.io/finalizer" in still["metadata"]["finalizers"]
        operator.controller.enqueue(Request(ns, "nova"))  # the 30 s database wait, played now
    except NotFound:
        pass

    async def gone() -> bool:
        try:
            await admin.get(NOVAS, "nova", ns)
        except NotFound:
            return True
        return False

    await wait_for(gone, bool, 10)
    for ref, name in managed:
        assert not [o for o in (await admin.list(ref, ns))["items"] if o["metadata"]["name"] == name], name
    reasons = [r for _, r, _ in await events_of(admin, ns)]
    assert reasons.index("FinalizingDatabase") < reasons.index("DatabaseFinalized")
    # the per-CR Job series go with the finalizer
    labels = {"nova": "nova", "namespace": ns, "result": "succeeded"}
    assert operator.metrics.registry.get_sample_value("nova_operator_db_sync_total", labels) is None


async def test_a_brownfield_nova_is_ready_without_mariadb_objects_and_leaves_them_alone_on_deletion(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    await create_inputs(admin, ns)
    foreign = {
        "apiVersion": DATABASES.api_version,
        "kind": "Database",
        "metadata": {"name": "nova"},
        "spec": {},
    }
    foreign["spec"] = {"mariaDbRef": {"name": "elsewhere"}, "name": "nova"}
    await admin.create(DATABASES, foreign, ns)
    body = nova_body()
    body["spec"]["apiDatabase"] = {
        "host": "db.example.org",
        "database": "nova_api",
        "secretRef": {"name": "api-db"},
    }
    body["spec"]["database"] = {
        "host": "db.example.org",
        "database": "nova",
        "secretRef": {"name": "cell-db"},
    }
    await admin.create(NOVAS, body, ns)
    await ready_at_generation(admin, ns, 1)
    for ref in (DATABASES, USERS, GRANTS):  # nothing provisioned: only the foreign Database exists
        names = [o["metadata"]["name"] for o in (await admin.list(ref, ns))["items"]]
        assert names == (["nova"] if ref is DATABASES else []), (ref, names)
    assert "ownerReferences" not in (await admin.get(DATABASES, "nova", ns))["metadata"]
    await admin.delete(NOVAS, "nova", ns)

    async def gone() -> bool:
        try:
            await admin.get(NOVAS, "nova", ns)
        except NotFound:
            return True
        return False

    await wait_for(gone, bool, 10)
    assert (await admin.get(DATABASES, "nova", ns))["metadata"].get("deletionTimestamp") is None
    reasons = [r for _, r, _ in await events_of(admin, ns)]
    assert "DatabaseFinalized" in reasons
    assert "FinalizingDatabase" not in reasons


async def test_a_release_change_that_is_not_a_patch_is_refused_and_nothing_advances(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    await create_inputs(admin, ns)
    await admin.create(NOVAS, nova_body(), ns)
    nova = await ready_at_generation(admin, ns, 1)
    api_before = (await admin.get(DEPLOYMENTS, "nova", ns))["metadata"]["resourceVersion"]
    job_before = (await admin.get(JOBS, "nova-db-sync", ns))["metadata"]["uid"]
    get = lambda: admin.get(NOVAS, "nova", ns)  # noqa: E731
    for release, reason in (("2025.1", "DowngradeNotSupported"), ("2026.2", "UpgradePathInvalid")):
        nova = await admin.get(NOVAS, "nova", ns)
        nova["spec"]["openStackRelease"] = release
        nova["spec"]["image"]["tag"] = release  # in lockstep, so the release check is what refuses
        await admin.replace(NOVAS, nova, ns)
        refused = await wait_for(get, lambda n, r=reason: cond(n, "DatabaseReady").get("reason") == r, 20)
        assert refused["status"]["installedRelease"] == "2025.2"
        assert cond(refused, "Ready")["status"] == "False"
        events = await wait_for(
            lambda: events_of(admin, ns), lambda es, r=reason: any(e[1] == r for e in es), 10
        )
        assert any(t == "Warning" and r == reason for t, r, _ in events)
    # the installed release keeps running: no workload re-applied, no new db-sync Job
    assert (await admin.get(DEPLOYMENTS, "nova", ns))["metadata"]["resourceVersion"] == api_before
    assert (await admin.get(JOBS, "nova-db-sync", ns))["metadata"]["uid"] == job_before

    nova = await admin.get(NOVAS, "nova", ns)
    nova["spec"]["openStackRelease"] = "2025.2"
    nova["spec"]["image"]["tag"] = "2025.2-p1"  # a patch tag is in lockstep with its release
    nova = await admin.replace(NOVAS, nova, ns)
    await ready_at_generation(admin, ns, nova["metadata"]["generation"])


async def test_an_owned_key_override_is_reported_without_losing_ready(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    await create_inputs(admin, ns)
    await admin.create(NOVAS, nova_body(extraConfig={"DEFAULT": {"debug": "true"}}), ns)
    nova = await ready_at_generation(admin, ns, 1)
    health = cond(nova, "ExtraConfigHealthy")
    assert health["status"] == "False"
    assert health["reason"] == "OwnedKeysOverridden"
    assert "[DEFAULT] debug" in health["message"]
    events = await events_of(admin, ns)
    overrides = [e for e in events if e[1] == "ExtraConfigOwnedKeyOverride"]
    assert len(overrides) == 1
    assert overrides[0][0] == "Warning"


async def test_a_db_sync_without_a_readable_cells_report_leaves_status_cells_alone(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    simulator.cells_report = "Traceback (most recent call last):\n  garbage"
    await create_inputs(admin, ns)
    await admin.create(NOVAS, nova_body(), ns)
    nova = await ready_at_generation(admin, ns, 1)
    assert "cells" not in nova["status"]
    events = await events_of(admin, ns)
    assert [e[:2] for e in events if e[1] == "CellsReportUnavailable"] == [
        ("Normal", "CellsReportUnavailable")
    ]


async def test_a_claimed_cells_report_that_never_reached_the_status_is_read_again(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    # Issue 18: an operator killed between the dedupe patch (the Job UID claimed on the Nova) and the
    # status write left status.cells empty for good. The state it left: claim present, no cells.
    ns = namespace
    await create_inputs(admin, ns)
    await admin.create(NOVAS, nova_body(), ns)
    nova = await ready_at_generation(admin, ns, 1)
    published = nova["status"]["cells"]
    assert published
    assert nova["metadata"]["annotations"]["cobaltcore.c5c3.io/last-db-sync-cells-job-uid"]
    await admin.patch_status(NOVAS, "nova", {"status": {"cells": None}}, ns)

    async def after_a_pass() -> Object:
        # a pass reads the Nova from the operator's cache, which sees the patch a moment later
        await operator.force_pass("nova")
        return await admin.get(NOVAS, "nova", ns)

    nova = await wait_for(after_a_pass, lambda n: n["status"].get("cells") == published, 10)
    events = await events_of(admin, ns)
    assert not [e for e in events if e[1] == "CellsReportUnavailable"]


async def test_a_cells_report_lookup_that_fails_is_read_again_not_given_up(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str, monkeypatch: Any
) -> None:
    # CI at 737f9bb: the API server was killed while the pass that claimed the db-sync Job listed its
    # pod; the failed LIST counted as "no readable report", so the Nova went Ready without its cells.
    ns = namespace
    real_list = operator.kube.list
    failed: list[str] = []

    async def list_failing_once(ref: Any, namespace: str | None = None, **kw: Any) -> Any:
        selector = kw.get("label_selector") or ""
        if ref is PODS and selector.startswith("batch.kubernetes.io/job-name=") and not failed:
            failed.append(selector)
            raise Unreachable("connection refused")
        return await real_list(ref, namespace, **kw)

    monkeypatch.setattr(operator.kube, "list", list_failing_once)
    await create_inputs(admin, ns)
    await admin.create(NOVAS, nova_body(), ns)
    nova = await ready_at_generation(admin, ns, 1)
    assert failed == ["batch.kubernetes.io/job-name=nova-db-sync"]
    assert {c["name"] for c in nova["status"].get("cells") or []} == {"cell0", "cell1"}, nova["status"]
    events = await events_of(admin, ns)
    assert not [e for e in events if e[1] == "CellsReportUnavailable"]


async def test_db_archive_runs_drive_the_condition_and_are_counted_once(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    await create_inputs(admin, ns)
    await admin.create(NOVAS, nova_body(), ns)
    await ready_at_generation(admin, ns, 1)
    cronjob = await admin.get(CRONJOBS, "nova-db-archive", ns)
    labels = cronjob["spec"]["jobTemplate"]["metadata"]["labels"]
    owner = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "name": "nova-db-archive",
        "uid": cronjob["metadata"]["uid"],
        "controller": True,
    }
    template = cronjob["spec"]["jobTemplate"]["spec"]
    get = lambda: admin.get(NOVAS, "nova", ns)  # noqa: E731
    m = operator.metrics
    archive = {"nova": "nova", "namespace": ns}

    async def run(name: str, *, fail: bool) -> None:
        simulator.fail_jobs = fail
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "labels": labels, "ownerReferences": [owner]},
            "spec": template,
        }
        await admin.create(JOBS, job, ns)
        await wait_for(
            lambda: admin.get(JOBS, name, ns), lambda j: bool((j.get("status") or {}).get("conditions")), 10
        )
        # the CronJob controller's status update is what wakes the Nova
        await admin.patch_status(CRONJOBS, "nova-db-archive", {"status": {"lastScheduleTime": now()}}, ns)

    await run("nova-db-archive-100", fail=False)
    await wait_for(
        lambda: _value(m, "nova_operator_db_archive_total", {**archive, "result": "succeeded"}), bool, 10
    )
    await run("nova-db-archive-200", fail=True)
    nova = await wait_for(get, lambda n: cond(n, "DBArchiveReady").get("reason") == "DBArchiveJobFailed", 10)
    assert "nova-db-archive-200" in cond(nova, "DBArchiveReady")["message"]
    assert cond(nova, "Ready")["status"] == "False"
    events = await events_of(admin, ns)
    assert any(t == "Warning" and r == "DBArchiveJobFailed" for t, r, _ in events)
    operator.controller.enqueue(Request(ns, "nova"))
    await wait_for(
        lambda: _value(m, "nova_operator_db_archive_total", {**archive, "result": "failed"}), bool, 10
    )
    assert await _value(m, "nova_operator_db_archive_total", {**archive, "result": "succeeded"}) == 1
    assert await _value(m, "nova_operator_db_archive_total", {**archive, "result": "failed"}) == 1
    assert await _value(m, "nova_operator_db_archive_duration_seconds_count", archive) == 2


async def _value(metrics: Any, name: str, labels: dict[str, str]) -> float:
    return sample_value(metrics, name, labels)


# Values the pydantic model refuses; which of them the API server admits depends on the CRD's CEL
# rules (a later CEL rule may take one over): each test uses the first one the server admits.
MODEL_ONLY_SCHEDULES = ("every night at two", "0 5-2 * * *", "30-10 * * * *")
MODEL_ONLY_NODE_SELECTORS = ({"bad key!": "x"}, {"example.org/": "x"}, {"a" * 64: "x"})


async def refusal_of(request: Awaitable[Any]) -> KubeError | None:
    """None when the request succeeds, else the API server's refusal."""
    try:
        await request
    except KubeError as exc:
        return exc
    return None


def model_refuses(body: Object) -> bool:
    from pydantic import ValidationError

    from nova_operator.models.nova import Nova

    try:
        Nova.model_validate({**body, "metadata": {"name": "nova", "namespace": "ns"}})
    except ValidationError:
        return True
    return False


async def test_a_spec_rule_the_schema_cannot_check_is_reported_on_its_step_and_the_rest_goes_on(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    await create_inputs(admin, ns)
    refused: list[KubeError] = []
    for schedule in MODEL_ONLY_SCHEDULES:
        body = nova_body(dbArchive={"schedule": schedule})
        assert model_refuses(body), schedule
        if (refusal := await refusal_of(admin.create(NOVAS, body, ns))) is None:
            break
        refused.append(refusal)
    else:
        raise AssertionError(f"the API server refuses every model-only schedule: {refused}")
    assert all(r.status == 422 for r in refused), refused
    get = lambda: admin.get(NOVAS, "nova", ns)  # noqa: E731

    def reported(n: Object) -> bool:
        return cond(n, "DBArchiveReady").get("reason") == "ConfigError" and all(
            cond(n, c).get("status") == "True" for c in conditions.NOVA_READY_INPUTS if c != "DBArchiveReady"
        )

    nova = await wait_for(get, reported, 60)
    archive = cond(nova, "DBArchiveReady")
    assert archive["status"] == "False"
    assert archive["message"].startswith("the spec is invalid: spec.dbArchive.schedule: ")
    assert "invalid cron expression" in archive["message"]
    assert cond(nova, "Ready")["status"] == "False"
    # every other step went on (all other Ready inputs True above); only the CronJob was not rendered
    names = {d["metadata"]["name"] for d in (await admin.list(DEPLOYMENTS, ns))["items"]}
    assert {"nova", "nova-conductor", "nova-metadata", "nova-scheduler"} <= names
    assert "nova-db-archive" not in [c["metadata"]["name"] for c in (await admin.list(CRONJOBS, ns))["items"]]
    events = [e for e in await events_of(admin, ns) if e[0] == "Warning" and e[1] == "InvalidSpec"]
    assert [m for _, _, m in events] == [archive["message"]]
    assert (
        await _value(
            operator.metrics, "nova_operator_controller_reconcile_errors_total", {"controller": "nova"}
        )
        == 0
    )

    # a bad scheduler nodeSelector stops the scheduler step alone; its Deployment keeps its last form
    before = (await admin.get(DEPLOYMENTS, "nova-scheduler", ns))["metadata"]["generation"]
    admitted = None
    for selector in MODEL_ONLY_NODE_SELECTORS:
        patch = {"spec": {"scheduler": {"deployment": {"nodeSelector": selector}}}}
        if (refusal := await refusal_of(admin.patch(NOVAS, "nova", patch, ns))) is None:
            admitted = selector
            break
        # refused: the CRD checks label keys itself, nothing is left for the model to catch
        assert refusal.status == 422, refusal
        assert "label key" in str(refusal) or "nodeSelector" in str(refusal), refusal
    if admitted is not None:
        nova = await wait_for(get, lambda n: cond(n, "SchedulerReady").get("reason") == "ConfigError", 30)
        sched = cond(nova, "SchedulerReady")
        assert "spec.scheduler.deployment.nodeSelector" in sched["message"]
        assert cond(nova, "DBArchiveReady")["reason"] == "ConfigError"  # still, with its own message
        assert cond(nova, "DeploymentReady")["status"] == "True"
        scheduler = await admin.get(DEPLOYMENTS, "nova-scheduler", ns)
        assert scheduler["metadata"]["generation"] == before
        assert "nodeSelector" not in scheduler["spec"]["template"]["spec"]
        await admin.patch(NOVAS, "nova", {"spec": {"scheduler": {"deployment": {"nodeSelector": None}}}}, ns)

    # fixing the schedule heals its step; the quiet steady state holds
    await admin.patch(NOVAS, "nova", {"spec": {"dbArchive": {"schedule": "0 2 * * *"}}}, ns)
    nova = await wait_for(get, is_ready, 30)
    simulator.hold_jobs = True
    writes = operator.writes()
    for _ in range(5):
        await operator.force_pass("nova")
    assert operator.writes() - writes == 0
