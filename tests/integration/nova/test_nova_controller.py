"""The Nova controller end to end on the real API server, under the operator's own RBAC."""

from __future__ import annotations

import time

from nova_operator import conditions
from nova_operator.kube import Kube
from nova_operator.kube.resources import (
    CONFIGMAPS,
    CRONJOBS,
    DATABASES,
    DEPLOYMENTS,
    GRANTS,
    HTTPROUTES,
    JOBS,
    NOVAS,
    PDBS,
    SECRETS,
    SERVICES,
    USERS,
)
from tests.integration.nova.inputs import (
    SECRET_VALUES,
    cond,
    create_inputs,
    events_of,
    is_ready,
    nova_body,
    sample_value,
)

from .conftest import (  # type: ignore[import-not-found]
    Operator,
    Simulator,
    nova_ready_gauge,
    wait_for,
)


async def test_a_nova_with_its_secrets_becomes_ready_and_then_stays_quiet(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    await create_inputs(admin, ns)
    started = time.monotonic()
    await admin.create(NOVAS, nova_body(), ns)
    get = lambda: admin.get(NOVAS, "nova", ns)  # noqa: E731
    nova = await wait_for(get, is_ready, within=60)
    time_to_ready = time.monotonic() - started
    print(f"time to Ready: {time_to_ready:.2f} s")
    await wait_for(nova_ready_gauge(operator, ns), lambda v: v == 1, within=5)

    status = nova["status"]
    generation = nova["metadata"]["generation"]
    assert status["observedGeneration"] == generation
    for cond_type in conditions.NOVA_READY_INPUTS:
        c = cond(nova, cond_type)
        assert c.get("status") == "True", (cond_type, c)
        assert c["observedGeneration"] == generation
    assert cond(nova, "ExtraConfigHealthy")["reason"] == "NoOwnedKeysOverridden"
    assert status["installedRelease"] == "2025.2"
    assert status["cells"] == [
        {"name": "cell0", "uuid": "00000000-0000-0000-0000-000000000000"},
        {"name": "cell1", "uuid": "7c1a3f2e-5b4d-4e6f-8a9b-0c1d2e3f4a5b"},
    ]
    assert status["computeConfigSecretRef"] == {"name": "nova-compute-config"}
    assert status["endpoint"] == f"http://nova.{ns}.svc.cluster.local:8774"
    assert "nova.openstack.c5c3.io/finalizer" in nova["metadata"]["finalizers"]

    uid = nova["metadata"]["uid"]
    owned = [
        (DEPLOYMENTS, n)
        for n in ("nova", "nova-metadata", "nova-scheduler", "nova-conductor", "nova-novncproxy")
    ]
    owned += [(SERVICES, n) for n in ("nova", "nova-metadata", "nova-novncproxy")]
    owned += [(SECRETS, n) for n in ("nova-api-db-connection", "nova-db-connection", "nova-transport-url")]
    owned += [(SECRETS, "nova-compute-config"), (JOBS, "nova-db-sync"), (CRONJOBS, "nova-db-archive")]
    owned += [(PDBS, "nova"), (HTTPROUTES, "nova-console")]
    owned += [(DATABASES, "nova-api"), (USERS, "nova-api"), (GRANTS, "nova-api")]
    owned += [(DATABASES, "nova"), (USERS, "nova"), (GRANTS, "nova"), (DATABASES, "nova-nova-cell0")]
    owned += [(GRANTS, "nova-nova-cell0")]
    for ref, name in owned:
        obj = await admin.get(ref, name, ns)
        controllers = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")]
        assert controllers == [
            {
                "apiVersion": NOVAS.api_version,
                "kind": "Nova",
                "name": "nova",
                "uid": uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ], (ref, name)

    # content: the API mounts the current ConfigMap; the compute contract carries its keys
    api = await admin.get(DEPLOYMENTS, "nova", ns)
    volume = next(v for v in api["spec"]["template"]["spec"]["volumes"] if v["name"] == "config")
    config_map = await admin.get(CONFIGMAPS, volume["configMap"]["name"], ns)
    assert config_map["immutable"] is True
    assert sorted(config_map["data"]) == [
        "conductor.conf",
        "metadata.conf",
        "nova.conf",
        "novncproxy.conf",
        "scheduler.conf",
    ]
    annotations = api["spec"]["template"]["metadata"]["annotations"]
    assert set(annotations) == {
        "nova.c5c3.io/api-db-connection-hash",
        "nova.c5c3.io/db-connection-hash",
        "nova.c5c3.io/authtoken-hash",
        "nova.c5c3.io/transport-url-hash",
    }
    contract = await admin.get(SECRETS, "nova-compute-config", ns)
    assert sorted(contract["data"]) == [
        "cell_name",
        "metadata_proxy_shared_secret",
        "nova-compute.conf",
        "password",
        "transport_url",
    ]

    # secrets never leak into ConfigMaps, conditions or events
    texts = [str(cm.get("data")) for cm in (await admin.list(CONFIGMAPS, ns))["items"]]
    texts.append(str(nova["status"]))
    texts += [m for _, _, m in await events_of(admin, ns)]
    for value in SECRET_VALUES:
        assert not any(value in t for t in texts), value

    # events and metrics of the happy path
    events = await events_of(admin, ns)
    assert ("Normal", "DatabaseSynced", "schema is up to date") in events
    assert not [e for e in events if e[0] == "Warning"], events
    m = operator.metrics
    assert (
        sample_value(
            m, "nova_operator_db_sync_total", {"nova": "nova", "namespace": ns, "result": "succeeded"}
        )
        == 1
    )
    assert (
        sample_value(m, "nova_operator_db_sync_duration_seconds_count", {"nova": "nova", "namespace": ns})
        == 1
    )
    assert (
        sample_value(m, "nova_operator_reconcile_duration_seconds_count", {"sub_reconciler": "Database"}) >= 1
    )
    assert (
        sample_value(
            m,
            "nova_operator_reconcile_errors_total",
            {"sub_reconciler": "Database", "condition_type": "DatabaseReady"},
        )
        == 0
    )
    annotations = nova["metadata"]["annotations"]
    job = await admin.get(JOBS, "nova-db-sync", ns)
    assert annotations["cobaltcore.c5c3.io/last-db-sync-job-uid"] == job["metadata"]["uid"]
    assert annotations["cobaltcore.c5c3.io/last-db-sync-cells-job-uid"] == job["metadata"]["uid"]

    # quiet steady state: 20 forced passes write nothing and change no resourceVersion
    simulator.hold_jobs = True
    children = [(ref, name) for ref, name in owned]
    before = {key: (await admin.get(*key, ns))["metadata"]["resourceVersion"] for key in children}
    nova_rv = (await admin.get(NOVAS, "nova", ns))["metadata"]["resourceVersion"]
    writes = operator.writes()
    for _ in range(20):
        await operator.force_pass("nova")
    assert operator.writes() - writes == 0
    assert (await admin.get(NOVAS, "nova", ns))["metadata"]["resourceVersion"] == nova_rv
    after = {key: (await admin.get(*key, ns))["metadata"]["resourceVersion"] for key in children}
    assert after == before
    print(f"steady state: {operator.writes() - writes} writes in 20 passes")
