"""Behaviour of the workload, Service, PDB, HPA, route, policy, MariaDB and Job renderers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from nova_operator import digests, naming
from nova_operator.models.nova import Nova
from nova_operator.naming import Component
from nova_operator.renderers import (
    hpa,
    http_route,
    jobs,
    mariadb,
    network_policy,
    novaconf,
    pdb,
    service,
    workload,
)

Load = Callable[[str], Nova]
INPUTS = workload.WorkloadInputs(config_map="nova-config-0123abcd", broker_port=5671)


def _edit(nova: Nova, change: Callable[[Nova], None]) -> Nova:
    copy = nova.model_copy(deep=True)
    change(copy)
    return copy


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    return deployment["spec"]["template"]["spec"]["containers"][0]  # type: ignore[no-any-return]


def _env(deployment: dict[str, Any]) -> list[str]:
    return [e["name"] for e in _container(deployment)["env"]]


def test_env_order_and_role_extras(load_sample: Load) -> None:
    ds = workload.deployments(load_sample("minimal"), INPUTS)
    common = [
        "OS_DEFAULT__TRANSPORT_URL",
        "OS_DATABASE__CONNECTION",
        "OS_API_DATABASE__CONNECTION",
        "OS_KEYSTONE_AUTHTOKEN__PASSWORD",
        "OS_SERVICE_USER__PASSWORD",
        "OS_PLACEMENT__PASSWORD",
        "OS_NEUTRON__PASSWORD",
    ]
    assert _env(ds[Component.API]) == [*common, "OS_NOVA_CONFIG_DIR", "OS_NOVA_CONFIG_FILES"]
    assert _env(ds[Component.METADATA]) == [
        *common,
        "OS_NEUTRON__METADATA_PROXY_SHARED_SECRET",
        "OS_NOVA_CONFIG_DIR",
        "OS_NOVA_CONFIG_FILES",
    ]
    assert _env(ds[Component.SCHEDULER]) == [*common, "NOVA_AMQP_PORT"]
    assert _env(ds[Component.NOVNCPROXY]) == [n for n in common if n != "OS_API_DATABASE__CONNECTION"]
    port = next(e for e in _container(ds[Component.CONDUCTOR])["env"] if e["name"] == "NOVA_AMQP_PORT")
    assert port["value"] == "5671"


def test_cinder_adds_its_password_override(load_sample: Load) -> None:
    nova = load_sample("full")
    assert "OS_CINDER__PASSWORD" in _env(workload.deployment(nova, Component.API, INPUTS))


def test_config_files_put_the_paste_file_first(load_sample: Load) -> None:
    ds = workload.deployments(load_sample("minimal"), INPUTS)
    files = {e["name"]: e.get("value") for e in _container(ds[Component.METADATA])["env"]}
    assert (
        files["OS_NOVA_CONFIG_FILES"] == "/var/lib/openstack/etc/nova/api-paste.ini;nova.conf;metadata.conf"
    )


def test_bus_roles_start_with_two_config_dirs_and_the_amqp_probe(load_sample: Load) -> None:
    container = _container(workload.deployment(load_sample("minimal"), Component.SCHEDULER, INPUTS))
    assert container["command"] == [
        "nova-scheduler",
        "--config-dir",
        "/etc/nova/nova.conf.d",
        "--config-dir",
        "/etc/nova/scheduler.conf.d",
    ]
    # by the absolute path the image contract names (not a PATH lookup)
    assert container["readinessProbe"]["exec"] == {"command": ["/var/lib/openstack/bin/nova-amqp-ready"]}
    assert "livenessProbe" not in container


def test_uwsgi_flags(load_sample: Load) -> None:
    full = _container(workload.deployment(load_sample("full"), Component.API, INPUTS))["command"]
    assert full[full.index("--module") + 1] == "nova.wsgi.osapi_compute:application"
    # uWSGI 2.0 takes the keep-alive timeout as --http-keepalive's own argument, in the `=N` form
    assert "--http-keepalive=5" in full
    assert not any(flag.startswith("--http-keepalive-timeout") for flag in full)
    assert full.count("--http-keepalive") == 0
    assert full[full.index("--harakiri") + 1] == "30"
    assert "--lazy-apps" in full
    assert "--pyargv" not in full
    metadata = _container(workload.deployment(load_sample("full"), Component.METADATA, INPUTS))["command"]
    assert not any(flag.startswith("--http-keepalive") for flag in metadata)
    assert "--lazy-apps" in metadata
    minimal = _container(workload.deployment(load_sample("minimal"), Component.API, INPUTS))["command"]
    assert "--http-keepalive" in minimal  # on by default, with uWSGI's own idle timeout


def test_digest_annotations_are_stamped_only_when_known(load_sample: Load) -> None:
    nova = load_sample("minimal")
    api = workload.deployment(nova, Component.API, INPUTS)
    assert "annotations" not in api["spec"]["template"]["metadata"]
    scheduler = workload.deployment(nova, Component.SCHEDULER, INPUTS)
    assert scheduler["spec"]["template"]["metadata"]["annotations"] == {
        "nova.c5c3.io/installed-release": "2025.2"
    }
    known = workload.WorkloadInputs(
        config_map="c", digests=workload.Digests(authtoken="a1", metadata_secret="m1", transport_url="t1")
    )
    metadata = workload.deployment(nova, Component.METADATA, known)["spec"]["template"]["metadata"]
    assert metadata["annotations"] == {
        "nova.c5c3.io/authtoken-hash": "a1",
        "nova.c5c3.io/installed-release": "2025.2",
        "nova.c5c3.io/metadata-secret-hash": "m1",
        "nova.c5c3.io/transport-url-hash": "t1",
    }
    api_annotations = workload.deployment(nova, Component.API, known)["spec"]["template"]["metadata"]
    assert "nova.c5c3.io/metadata-secret-hash" not in api_annotations["annotations"]
    assert "nova.c5c3.io/installed-release" not in api_annotations["annotations"]


def test_resource_defaults(load_sample: Load) -> None:
    ds = workload.deployments(load_sample("minimal"), INPUTS)
    assert _container(ds[Component.API])["resources"] == {
        "limits": {"memory": "720Mi"},
        "requests": {"cpu": "70m", "memory": "720Mi"},
    }
    assert _container(ds[Component.NOVNCPROXY])["resources"]["limits"] == {"memory": "368Mi"}
    # a user-set memory limit is kept and no request is added next to it; CPU still defaulted
    full_api = _container(workload.deployment(load_sample("full"), Component.API, INPUTS))["resources"]
    assert full_api == {"limits": {"memory": "2Gi"}, "requests": {"cpu": "500m", "memory": "1Gi"}}
    assert workload.memory_figure(3) == "1072Mi"
    assert workload.memory_figure(4, 2) == f"{16 + 4 * (352 + 32)}Mi"
    limit_only = workload.resolve_resources(
        workload.ResourceRequirements(limits={"memory": "1Gi", "cpu": "2"}), "720Mi"
    )
    assert limit_only == {"limits": {"cpu": "2", "memory": "1Gi"}}


def test_grace_pre_stop_strategy_and_spread_defaults(load_sample: Load) -> None:
    nova = load_sample("minimal")
    api = workload.deployment(nova, Component.API, INPUTS)
    pod = api["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 30
    assert _container(api)["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", "5"]
    assert api["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    assert [c["topologyKey"] for c in pod["topologySpreadConstraints"]] == [
        "topology.kubernetes.io/zone",
        "kubernetes.io/hostname",
    ]
    assert (
        pod["topologySpreadConstraints"][0]["labelSelector"]["matchLabels"]
        == api["spec"]["selector"]["matchLabels"]
    )
    sched = workload.deployment(nova, Component.SCHEDULER, INPUTS)["spec"]["template"]["spec"]
    assert sched["terminationGracePeriodSeconds"] == 200
    no_spread = _edit(nova, lambda n: setattr(n.spec.api.deployment, "topology_spread_constraints", []))
    assert (
        "topologySpreadConstraints"
        not in workload.deployment(no_spread, Component.API, INPUTS)["spec"]["template"]["spec"]
    )


def test_replicas_are_left_to_the_hpa_while_autoscaling(load_sample: Load) -> None:
    assert "replicas" not in workload.deployment(load_sample("full"), Component.API, INPUTS)["spec"]
    assert workload.deployment(load_sample("full"), Component.METADATA, INPUTS)["spec"]["replicas"] == 2
    assert workload.deployment(load_sample("minimal"), Component.API, INPUTS)["spec"]["replicas"] == 3
    assert workload.deployment(load_sample("minimal"), Component.NOVNCPROXY, INPUTS)["spec"]["replicas"] == 1


def test_a_disabled_console_proxy_renders_no_deployment_service_route_or_policy(load_sample: Load) -> None:
    def disable(n: Nova) -> None:
        n.spec.console_proxy.enabled = False
        n.spec.console_proxy.deployment = None

    nova = _edit(load_sample("full"), disable)
    assert Component.NOVNCPROXY not in workload.deployments(nova, INPUTS)
    assert Component.NOVNCPROXY not in service.services(nova)
    assert Component.NOVNCPROXY not in http_route.http_routes(nova)
    assert network_policy.novncproxy_network_policy(nova) is None
    policy = network_policy.network_policy(nova, operator_namespace="op", broker_port=None)
    assert policy is not None
    # the console gateway's namespace is excluded, the broker rule omitted until a URL exists
    assert len(policy["spec"]["egress"]) == 6


def test_config_volumes_per_role(load_sample: Load) -> None:
    ds = workload.deployments(load_sample("full"), INPUTS)

    def items(d: dict[str, Any]) -> dict[str, list[str]]:
        return {
            v["name"]: [i["key"] for i in v["configMap"]["items"]]
            for v in d["spec"]["template"]["spec"]["volumes"]
            if "configMap" in v
        }

    assert items(ds[Component.API]) == {"config": ["logging.ini", "nova.conf"]}
    assert items(ds[Component.METADATA]) == {"config": ["logging.ini", "metadata.conf", "nova.conf"]}
    assert items(ds[Component.CONDUCTOR]) == {
        "config": ["logging.ini", "nova.conf"],
        "role-config": ["conductor.conf"],
    }
    mounts = {m["mountPath"] for m in _container(ds[Component.NOVNCPROXY])["volumeMounts"]}
    assert {"/etc/nova/nova.conf.d", "/etc/nova/novncproxy.conf.d", "/var/lib/nova", "/tmp"} <= mounts
    assert {"/etc/nova-db-tls/api", "/etc/nova-db-tls/cell", "/etc/rabbitmq-ca"} <= mounts


def test_services_select_their_role_only(load_sample: Load) -> None:
    svcs = service.services(load_sample("minimal"))
    assert {c: s["spec"]["ports"][0]["port"] for c, s in svcs.items()} == {
        Component.API: 8774,
        Component.METADATA: 8775,
        Component.NOVNCPROXY: 6080,
    }
    assert svcs[Component.API]["spec"]["selector"]["app.kubernetes.io/component"] == "api"


@pytest.mark.parametrize(
    ("replicas", "min_replicas", "autoscale", "expect"),
    [
        (3, None, False, {"minAvailable": 1}),
        (1, None, False, {"maxUnavailable": 1}),
        (3, 1, True, {"maxUnavailable": 1}),
        (1, 2, True, {"minAvailable": 1}),
    ],
)
def test_pdb_bound(
    load_sample: Load, replicas: int, min_replicas: int | None, autoscale: bool, expect: dict[str, int]
) -> None:
    def change(n: Nova) -> None:
        n.spec.api.deployment.replicas = replicas
        if autoscale:
            assert n.spec.autoscaling is not None
            n.spec.autoscaling.min_replicas = min_replicas
        else:
            n.spec.autoscaling = None

    budget = pdb.pdb(_edit(load_sample("full"), change))
    assert {k: v for k, v in budget["spec"].items() if k != "selector"} == expect
    assert budget["spec"]["selector"]["matchExpressions"] == [
        {"key": "batch.kubernetes.io/job-name", "operator": "DoesNotExist"}
    ]


def test_hpa_only_while_autoscaling(load_sample: Load) -> None:
    assert hpa.hpa(load_sample("minimal")) is None
    scaler = hpa.hpa(load_sample("full"))
    assert scaler is not None
    assert scaler["spec"]["minReplicas"] == 2
    assert scaler["spec"]["maxReplicas"] == 6
    assert scaler["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "nova"}
    assert scaler["spec"]["metrics"][0]["resource"]["name"] == "cpu"


def test_http_routes(load_sample: Load) -> None:
    routes = http_route.http_routes(load_sample("full"))
    api = routes[Component.API]
    assert api["metadata"]["annotations"] == {"example.org/team": "compute"}
    assert api["spec"]["hostnames"] == ["compute.example.org"]
    assert api["spec"]["parentRefs"][0]["sectionName"] == "https"
    assert routes[Component.NOVNCPROXY]["metadata"]["name"] == "nova-console"
    assert routes[Component.NOVNCPROXY]["spec"]["rules"][0]["backendRefs"] == [
        {"name": "nova-novncproxy", "port": 6080}
    ]
    minimal = http_route.http_routes(load_sample("minimal"))
    assert list(minimal) == [Component.NOVNCPROXY]
    assert minimal[Component.NOVNCPROXY]["spec"]["parentRefs"][0]["namespace"] == "openstack"


def test_network_policy_ports(load_sample: Load) -> None:
    assert (
        network_policy.network_policies(load_sample("minimal"), operator_namespace="op", broker_port=1) == {}
    )
    policy = network_policy.network_policy(load_sample("full"), operator_namespace="op", broker_port=5671)
    assert policy is not None
    egress = [[p["port"] for p in rule["ports"]] for rule in policy["spec"]["egress"]]
    assert egress == [[53, 53], [3307], [3307], [11211], [5000], [8778, 9696, 9292, 8776, 9311], [5671]]
    peers = policy["spec"]["ingress"][0]["from"]
    assert peers[-1] == {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "op"}}}
    assert (
        sum(
            p == {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "gateways"}}}
            for p in peers
        )
        == 1
    )


def test_mariadb_objects_in_creation_order_with_connection_limits(load_sample: Load) -> None:
    nova = load_sample("minimal")
    objects = mariadb.mariadb_objects(nova)
    assert [f"{o['kind']}/{o['metadata']['name']}" for o in objects] == [
        "Database/nova-api",
        "User/nova-api",
        "Grant/nova-api",
        "Database/nova",
        "Database/nova-nova-cell0",
        "User/nova",
        "Grant/nova",
        "Grant/nova-nova-cell0",
    ]
    # sized from the rendered pools (test_db_pools.py), not the spec's 44 and 48 (docs/README.md)
    assert objects[1]["spec"]["maxUserConnections"] == mariadb.max_user_connections(nova, "api") == 52
    assert objects[5]["spec"]["maxUserConnections"] == mariadb.max_user_connections(nova, "cell") == 1294
    cell0_db, cell0_grant = objects[4], objects[7]
    assert cell0_db["spec"]["name"] == "nova_cell0"
    assert cell0_grant["spec"]["username"] == "nova"
    assert cell0_grant["spec"]["database"] == "nova_cell0"
    assert objects[1]["spec"]["passwordSecretKeyRef"] == {
        "name": "nova-api-db-credentials",
        "key": "password",
    }


def test_dynamic_mode_provisions_databases_only_and_brownfield_nothing(load_sample: Load) -> None:
    def dynamic(n: Nova) -> None:
        n.spec.api_database.credentials_mode = "Dynamic"
        n.spec.database.credentials_mode = "Dynamic"

    objects = mariadb.mariadb_objects(_edit(load_sample("minimal"), dynamic))
    assert [o["kind"] for o in objects] == ["Database", "Database", "Database"]
    assert mariadb.mariadb_objects(load_sample("full")) == []


def test_job_shapes(load_sample: Load) -> None:
    nova = load_sample("minimal")
    sync = jobs.db_sync_job(nova, "cm")
    assert sync["spec"]["backoffLimit"] == 4
    assert "ttlSecondsAfterFinished" not in sync["spec"]
    pod = sync["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["volumes"][0] == {"name": "config", "configMap": {"name": "cm"}}
    assert sync["metadata"]["annotations"]["cobaltcore.c5c3.io/pod-spec-hash"] == digests.pod_spec_hash(
        sync["spec"]["template"]
    )
    migrate = jobs.phase_job(nova, "db-migrate", "cm")
    assert migrate["spec"]["template"]["spec"]["containers"][0]["command"] == [
        "nova-manage",
        "--config-dir",
        "/etc/nova/nova.conf.d",
        "cell_v2",
        "list_cells",
    ]
    assert jobs.phase_job(nova, "db-expand", "cm")["metadata"]["name"] == "nova-db-expand"
    assert jobs.db_sync_job(nova, "cm2")["metadata"]["annotations"] != sync["metadata"]["annotations"]


def test_jobs_fall_back_to_the_api_blocks_placement(load_sample: Load) -> None:
    full = load_sample("full")
    pod = jobs.db_sync_job(full, "cm")["spec"]["template"]["spec"]
    # spec.jobs.priorityClassName "" opts out; nodeSelector/tolerations nil fall back to the API block
    assert "priorityClassName" not in pod
    assert pod["nodeSelector"] == {"node-role.kubernetes.io/control-plane": ""}
    assert pod["tolerations"][0]["key"] == "node-role.kubernetes.io/control-plane"
    assert pod["containers"][0]["resources"] == {
        "limits": {"memory": "512Mi"},
        "requests": {"cpu": "100m", "memory": "512Mi"},
    }

    def affinity(n: Nova) -> None:
        n.spec.api.deployment.affinity = {"nodeAffinity": {"x": 1}, "podAntiAffinity": {"y": 2}}
        n.spec.jobs = None

    pod = jobs.db_sync_job(_edit(full, affinity), "cm")["spec"]["template"]["spec"]
    assert pod["affinity"] == {"nodeAffinity": {"x": 1}}
    assert pod["priorityClassName"] == "openstack-critical"
    minimal_pod = jobs.db_sync_job(load_sample("minimal"), "cm")["spec"]["template"]["spec"]
    assert minimal_pod["containers"][0]["resources"] == {
        "limits": {"memory": "368Mi"},
        "requests": {"cpu": "70m", "memory": "368Mi"},
    }


def test_archive_cronjob(load_sample: Load) -> None:
    minimal = jobs.db_archive_cronjob(load_sample("minimal"), "cm")
    assert minimal["spec"]["schedule"] == "@daily"
    assert minimal["spec"]["concurrencyPolicy"] == "Forbid"
    job = minimal["spec"]["jobTemplate"]["spec"]
    assert job["activeDeadlineSeconds"] == 3600
    pod = job["template"]["spec"]
    assert pod["restartPolicy"] == "OnFailure"
    assert pod["securityContext"]["fsGroup"] == 42424
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert (env["MAX_ROWS"], env["SLEEP"], "RETENTION_DAYS" in env) == ("1000", "1", False)
    full = jobs.db_archive_cronjob(load_sample("full"), "cm")
    env = {
        e["name"]: e.get("value")
        for e in full["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert (env["MAX_ROWS"], env["SLEEP"], env["RETENTION_DAYS"]) == ("500", "2", "30")


def test_schema_names_are_rechecked_before_they_reach_a_script(load_sample: Load) -> None:
    bad = _edit(load_sample("minimal"), lambda n: setattr(n.spec.database, "database", "nova';rm -rf /;'"))
    with pytest.raises(ValueError, match=r"\^\[A-Za-z0-9_\]"):
        jobs.db_sync_script(bad)


def test_naming() -> None:
    assert naming.db_archive_name("nova") == "nova-db-archive"
    long = "a" * 30 + "-." + "b" * 20
    name = naming.db_archive_name(long)
    assert len(name) <= 52
    assert name.startswith("a" * 30 + "-")
    assert name.endswith("-db-archive")
    assert naming.cell0_object_name("nova", "Nova_DB") == "nova-nova-db-cell0"
    assert naming.config_map_name("nova", "0123abcd") == "nova-config-0123abcd"


def test_config_hash_and_config_map(load_sample: Load) -> None:
    assert digests.config_hash({"a": "b"}) == digests.sha256_hex("1:a=1:b\n")[:8]
    # no two maps share a preimage
    assert digests.config_hash({"a": "b=1:c"}) != digests.config_hash({"a": "b", "c": ""})
    nova = load_sample("minimal")
    data = novaconf.config_data(novaconf.conf_inputs(nova))
    cm = novaconf.config_map(nova, data)
    assert cm["immutable"] is True
    assert cm["metadata"]["name"] == f"nova-config-{digests.config_hash(data)}"
    assert cm["metadata"]["labels"]["cobaltcore.c5c3.io/config-base"] == "nova-config"
    key = b"k" * 32
    assert digests.credential_digest("", key) == ""
    # keyed (issue 13 item 11): not the plain SHA-256 anyone could test guesses against
    assert digests.credential_digest("x", key) != digests.sha256_hex("x")
    assert digests.credential_digest("x", key) != digests.credential_digest("x", b"j" * 32)
    assert digests.credential_digest("x", key) == digests.credential_digest("x", key)
    assert len(digests.credential_digest("x", key)) == 64


def test_api_endpoint() -> None:
    assert naming.api_endpoint("nova", "openstack", "compute.example.org") == "https://compute.example.org/"
    assert naming.api_endpoint("nova", "openstack", None) == "http://nova.openstack.svc.cluster.local:8774"


def test_owned_pairs_are_exempt_from_the_catalog_scan() -> None:
    from nova_operator import catalog

    extra = {"DEFAULT": {"transport_url": "x", "no_such_option": "y"}, "filter_scheduler": {"workers": "1"}}
    assert ("DEFAULT", "transport_url") in novaconf.OWNED_PAIRS
    assert catalog.unknown_options("2025.2", extra, exempt=novaconf.OWNED_PAIRS) == [
        ("DEFAULT", "no_such_option"),
        ("filter_scheduler", "workers"),
    ]


@pytest.mark.parametrize(
    ("strategy", "rendered"),
    [
        (None, {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}),
        ({}, {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}),
        # a rollingUpdate without type is a RollingUpdate as written, not the defaults
        (
            {"rollingUpdate": {"maxUnavailable": 2}},
            {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}},
        ),
        (
            {"rollingUpdate": {"maxSurge": "50%", "maxUnavailable": 1}},
            {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "50%", "maxUnavailable": 1}},
        ),
        ({"type": "Recreate"}, {"type": "Recreate"}),
        ({"type": "RollingUpdate"}, {"type": "RollingUpdate"}),
    ],
)
def test_a_strategy_is_rendered_as_written(
    load_sample: Load, strategy: dict[str, Any] | None, rendered: dict[str, Any]
) -> None:
    raw = load_sample("minimal").model_dump(by_alias=True, exclude_none=True, mode="json")
    raw["spec"]["scheduler"]["deployment"] = {
        "replicas": 2,
        **({} if strategy is None else {"strategy": strategy}),
    }
    nova = Nova.model_validate(raw)
    assert workload.deployment(nova, Component.SCHEDULER, INPUTS)["spec"]["strategy"] == rendered
