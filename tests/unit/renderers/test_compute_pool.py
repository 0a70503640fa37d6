"""compute-pool.conf, its ConfigMap and the per-pool DaemonSet (novacompute-crd.md §8, §9)."""

from __future__ import annotations

import ast
import hashlib
import hmac
from typing import Any

import kubernetes_validate
import pytest

from nova_operator import catalog
from nova_operator.models.common import STOP_MARGIN_SECONDS, BusDeploymentSpec
from nova_operator.models.novacompute import NovaCompute
from nova_operator.renderers import compute_pool as cp
from nova_operator.renderers import stops

K8S_VERSION = "1.37"


def pool(**spec: Any) -> NovaCompute:
    return NovaCompute.model_validate(
        {
            "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
            "kind": "NovaCompute",
            "metadata": {"name": "rack7", "namespace": "openstack", "uid": "u1"},
            "spec": {"novaRef": {"name": "nova"}, "nodeSelector": {"pool": "rack7"}, **spec},
        }
    )


def inputs(**kw: Any) -> cp.PoolInputs:
    base: dict[str, Any] = {
        "image": "ghcr.io/c5c3/nova-compute:2025.2",
        "config_map": "rack7-config-abcdef12",
        "contract_secret": "nova-compute-config",
        "contract_hash": "f" * 64,
        "release": "2025.2",
    }
    return cp.PoolInputs(**{**base, **kw})


def test_pool_conf_defaults_are_sorted_ini() -> None:
    assert cp.pool_conf(pool()) == (
        "[DEFAULT]\n"
        "compute_driver = libvirt.LibvirtDriver\n"
        "state_path = /var/lib/nova\n"
        "\n"
        "[libvirt]\n"
        "connection_uri = qemu:///system\n"
        "live_migration_scheme = tls\n"
        "live_migration_with_native_tls = true\n"
        "virt_type = kvm\n"
        "\n"
        "[os_vif_ovs]\n"
        "ovsdb_connection = unix:/run/openvswitch/db.sock\n"
        "\n"
        "[oslo_concurrency]\n"
        "lock_path = /var/lib/nova/tmp\n"
        "\n"
        "[vnc]\n"
        "server_listen = $my_ip\n"
    )


def test_libvirt_fields_and_extra_config_merge_with_user_values_winning() -> None:
    p = pool(
        libvirt={"virtType": "qemu", "cpuMode": "custom", "cpuModels": ["A", "B"], "imagesType": "qcow2"},
        extraConfig={
            "libvirt": {"virt_type": "kvm", "foo": "bar"},
            "DEFAULT": {"compute_driver": "fake.FakeDriver"},
        },
    )
    sections = cp.pool_conf_sections(p)
    assert sections["libvirt"]["cpu_mode"] == "custom"
    assert sections["libvirt"]["cpu_models"] == "A,B"
    assert sections["libvirt"]["images_type"] == "qcow2"
    assert sections["libvirt"]["virt_type"] == "kvm"  # the user wins
    assert sections["libvirt"]["foo"] == "bar"
    assert sections["DEFAULT"]["compute_driver"] == "fake.FakeDriver"
    assert cp.overridden_owned_keys(p.spec.extra_config) == [("libvirt", "virt_type")]


def test_cpu_mode_other_than_custom_renders_no_models() -> None:
    sections = cp.pool_conf_sections(pool(libvirt={"cpuMode": "host-model"}))
    assert sections["libvirt"]["cpu_mode"] == "host-model"
    assert "cpu_models" not in sections["libvirt"]


def test_owned_key_check_covers_rejected_keys_too() -> None:
    assert cp.overridden_owned_keys({"DEFAULT": {"host": "x", "debug": "true"}}) == [("DEFAULT", "host")]
    assert cp.overridden_owned_keys(None) == []


def test_config_map_is_immutable_content_addressed_and_labelled() -> None:
    text = cp.pool_conf(pool())
    cm = cp.config_map(pool(), text)
    data = {"compute-pool.conf": text}
    k, v = b"compute-pool.conf", text.encode()
    expected = hashlib.sha256(b"%d:%s=%d:%s\n" % (len(k), k, len(v), v)).hexdigest()[:8]
    assert cm["metadata"]["name"] == f"rack7-config-{expected}"
    assert cm["data"] == data
    assert cm["immutable"] is True
    assert cm["metadata"]["labels"]["cobaltcore.c5c3.io/config-base"] == "rack7-config"
    other = cp.config_map(
        pool(libvirt={"virtType": "qemu"}), cp.pool_conf(pool(libvirt={"virtType": "qemu"}))
    )
    assert other["metadata"]["name"] != cm["metadata"]["name"]


def test_contract_hash_is_the_keyed_digest_of_sorted_key_value_lines() -> None:
    """Issue 26 item 7: HMAC-SHA-256 with the Nova's digest key, not a plain SHA-256 of the content."""
    data = {"transport_url": b"rabbit://x", "password": "pw"}
    preimage = b"password=pw\ntransport_url=rabbit://x\n"
    keyed = cp.contract_hash(data, b"key")
    assert keyed == hmac.new(b"key", preimage, hashlib.sha256).hexdigest()
    assert keyed != hashlib.sha256(preimage).hexdigest()
    assert cp.contract_hash({**data, "password": b"pw2"}, b"key") != keyed
    assert cp.contract_hash(data, b"other key") != keyed


def test_affinity_pool_term_excludes_conflicts_and_holds_draining_nodes() -> None:
    terms = cp.node_affinity_terms(
        {"b": "2", "a": "1"}, excluded={"n9", "n3"}, keep_pods={"n5", "n4"}, deleting=False
    )
    assert terms == [
        {
            "matchExpressions": [
                {"key": "a", "operator": "In", "values": ["1"]},
                {"key": "b", "operator": "In", "values": ["2"]},
            ],
            "matchFields": [
                {"key": "metadata.name", "operator": "NotIn", "values": ["n3"]},
                {"key": "metadata.name", "operator": "NotIn", "values": ["n9"]},
            ],
        },
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n4"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n5"]}]},
    ]


def test_deleting_pool_keeps_only_hold_terms_and_none_means_no_daemonset() -> None:
    assert cp.node_affinity_terms({"a": "1"}, excluded=(), keep_pods={"n1"}, deleting=True) == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    ]
    assert cp.daemonset(pool(), inputs(deleting=True)) is None
    assert cp.daemonset(pool(), inputs(deleting=True, keep_pods=frozenset({"n1"}))) is not None


def test_daemonset_identity_and_pod_settings() -> None:
    ds = cp.daemonset(
        pool(tolerations=[{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]), inputs()
    )
    assert ds is not None
    assert ds["metadata"]["name"] == "rack7-nova-compute"
    assert ds["metadata"]["labels"] == {
        "app.kubernetes.io/name": "novacompute",
        "app.kubernetes.io/instance": "rack7",
        "app.kubernetes.io/managed-by": "novacompute-operator",
        "app.kubernetes.io/component": "nova-compute",
    }
    assert ds["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "novacompute",
        "app.kubernetes.io/instance": "rack7",
        "app.kubernetes.io/component": "nova-compute",
    }
    assert ds["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
    tpl = ds["spec"]["template"]
    assert tpl["metadata"]["annotations"] == {"nova.openstack.c5c3.io/compute-config-hash": "f" * 64}
    spec = tpl["spec"]
    assert "nodeSelector" not in spec
    assert spec["hostNetwork"] is True
    assert spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert spec["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert spec["terminationGracePeriodSeconds"] == 80  # 2025.2: graceful_shutdown_timeout 60 s + 20 s
    assert spec["tolerations"] == [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]
    assert [c["name"] for c in spec["initContainers"]] == ["create-instances-dir", "wait-for-chassis"]
    assert [c["name"] for c in spec["containers"]] == ["nova-compute"]
    for c in [*spec["initContainers"], *spec["containers"]]:
        assert "livenessProbe" not in c
        assert "readinessProbe" not in c
        assert "startupProbe" not in c
        assert c["image"] == "ghcr.io/c5c3/nova-compute:2025.2"
        assert c["imagePullPolicy"] == "Always"
        assert c["resources"] == {
            "limits": {"memory": "768Mi"},
            "requests": {"cpu": "150m", "memory": "768Mi"},
        }


def test_nova_compute_container_env_mounts_and_contract() -> None:
    ds = cp.daemonset(pool(), inputs())
    assert ds is not None
    (compute,) = ds["spec"]["template"]["spec"]["containers"]
    assert compute["command"] == [
        "nova-compute",
        "--config-file",
        "/etc/nova/compute-config/nova-compute.conf",
        "--config-dir",
        "/etc/nova/compute-pool.conf.d",
    ]
    env = {e["name"]: e["valueFrom"] for e in compute["env"]}
    assert env["OS_DEFAULT__HOST"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    for name in (
        "OS_DEFAULT__MY_IP",
        "OS_VNC__SERVER_PROXYCLIENT_ADDRESS",
        "OS_LIBVIRT__LIVE_MIGRATION_INBOUND_ADDR",
    ):
        assert env[name] == {"fieldRef": {"fieldPath": "status.hostIP"}}
    assert env["OS_DEFAULT__TRANSPORT_URL"] == {
        "secretKeyRef": {"name": "nova-compute-config", "key": "transport_url"}
    }
    for section in ("KEYSTONE_AUTHTOKEN", "SERVICE_USER", "PLACEMENT", "NEUTRON", "CINDER"):
        assert env[f"OS_{section}__PASSWORD"] == {
            "secretKeyRef": {"name": "nova-compute-config", "key": "password"}
        }
    mounts = {m["name"]: m for m in compute["volumeMounts"]}
    assert mounts["compute-config"] == {
        "name": "compute-config",
        "mountPath": "/etc/nova/compute-config",
        "readOnly": True,
    }
    assert mounts["var-lib-nova"]["mountPropagation"] == "Bidirectional"
    volumes = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    assert volumes["compute-config"] == {
        "name": "compute-config",
        "secret": {"secretName": "nova-compute-config"},
    }
    assert volumes["pool-config"]["configMap"] == {"name": "rack7-config-abcdef12"}
    assert volumes["etc-multipath-conf"]["hostPath"]["type"] == "FileOrCreate"
    assert set(mounts) == set(volumes)
    assert compute["securityContext"] == {
        "privileged": True,
        "allowPrivilegeEscalation": True,
        "readOnlyRootFilesystem": True,
        "runAsUser": 0,
        "runAsNonRoot": False,
    }


def test_wait_for_chassis_script_is_valid_python() -> None:
    ds = cp.daemonset(pool(), inputs())
    assert ds is not None
    wait = ds["spec"]["template"]["spec"]["initContainers"][1]
    assert wait["command"][:2] == ["python3", "-c"]
    ast.parse(wait["command"][2])
    assert wait["securityContext"]["runAsUser"] == 42424


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        (
            {"requests": {"cpu": "0"}},
            {"limits": {"memory": "768Mi"}, "requests": {"cpu": "0", "memory": "768Mi"}},
        ),
        ({"limits": {"memory": "2Gi"}}, {"limits": {"memory": "2Gi"}, "requests": {"cpu": "150m"}}),
        (
            {"limits": {"cpu": "2"}},
            {"limits": {"cpu": "2", "memory": "768Mi"}, "requests": {"memory": "768Mi"}},
        ),
    ],
)
def test_resources_fill_only_what_is_named_nowhere(
    resources: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert cp.resolve_resources(pool(resources=resources).spec.resources) == expected


def test_update_strategy_on_delete_and_max_unavailable() -> None:
    ds = cp.daemonset(pool(updateStrategy={"type": "OnDelete"}), inputs())
    assert ds is not None
    assert ds["spec"]["updateStrategy"] == {"type": "OnDelete"}
    ds = cp.daemonset(pool(updateStrategy={"maxUnavailable": "10%"}), inputs())
    assert ds is not None
    assert ds["spec"]["updateStrategy"]["rollingUpdate"] == {"maxUnavailable": "10%"}


def test_pull_policy_and_default_image() -> None:
    assert cp.default_image("2025.2") == "ghcr.io/c5c3/nova-compute:2025.2"
    assert cp.pull_policy("r:tag") == "Always"
    assert cp.pull_policy("r@sha256:" + "a" * 64) == "IfNotPresent"
    assert cp.pull_policy("r:tag", operator_default="Never") == "Never"


def test_pool_pull_policy_prefers_the_pools_own_then_the_operators_then_the_reference() -> None:
    digest = "r@sha256:" + "a" * 64
    assert cp.pull_policy("r:tag", policy="Never", operator_default="IfNotPresent") == "Never"
    assert cp.pull_policy(digest, policy="Always", operator_default="Never") == "Always"
    assert cp.pull_policy("r:tag", policy=None, operator_default="IfNotPresent") == "IfNotPresent"
    assert cp.pull_policy(digest, policy=None) == "IfNotPresent"


def test_pool_image_without_a_repository_is_the_default_image_of_the_installed_release() -> None:
    assert cp.pool_image(pool(), "2026.1") == "ghcr.io/c5c3/nova-compute:2026.1"
    assert cp.pool_image(pool(image={"pullPolicy": "Never"}), "2026.1") == "ghcr.io/c5c3/nova-compute:2026.1"
    assert (
        cp.pool_image(pool(image={"repository": "reg.example/nc", "tag": "t1"}), "2026.1")
        == "reg.example/nc:t1"
    )
    pinned = pool(image={"repository": "reg.example/nc", "digest": "sha256:" + "b" * 64})
    assert cp.pool_image(pinned, "2026.1") == "reg.example/nc@sha256:" + "b" * 64


def test_pool_pull_secrets_reach_the_daemonset_pod_and_no_secret_is_named_without_them() -> None:
    p = pool(image={"pullSecrets": [{"name": "regcred"}], "pullPolicy": "IfNotPresent"})
    ds = cp.daemonset(p, inputs(pull_policy="IfNotPresent"))
    assert ds is not None
    spec = ds["spec"]["template"]["spec"]
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert {c["imagePullPolicy"] for c in [*spec["initContainers"], *spec["containers"]]} == {"IfNotPresent"}
    kubernetes_validate.validate(ds, K8S_VERSION, strict=True)
    plain = cp.daemonset(pool(), inputs())
    assert plain is not None
    assert "imagePullSecrets" not in plain["spec"]["template"]["spec"]


@pytest.mark.parametrize("release", catalog.supported_releases())
def test_the_grace_period_is_the_releases_own_stop_bound_plus_the_margin(release: str) -> None:
    """Issue 38 item 4: the kubelet must not kill nova-compute before nova's own stop has ended."""
    info = catalog.load_catalog(release).option("DEFAULT", "graceful_shutdown_timeout")
    assert info is not None
    assert info.default is not None
    ds = cp.daemonset(pool(), inputs(release=release))
    assert ds is not None
    assert (
        ds["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == info.default + STOP_MARGIN_SECONDS
    )


def test_from_2026_1_a_pool_gets_the_200_s_the_scheduler_and_conductor_get() -> None:
    for release in ("2026.1", "2026.1-p1", "2026.2"):
        assert (
            cp.termination_grace(pool(), release)
            == 200
            == BusDeploymentSpec().termination_grace_period_seconds
        )
    assert cp.termination_grace(pool(), "2025.2") == 80


def test_a_release_without_a_catalog_gets_the_longest_bound_of_the_shipped_ones() -> None:
    longest = max(stops.graceful_shutdown_timeout(r, None) for r in catalog.supported_releases())
    assert stops.graceful_shutdown_timeout("2099.2", None) == longest
    assert stops.graceful_shutdown_timeout("", None) == longest


def test_the_pools_extra_config_moves_the_bound_and_the_override_wins() -> None:
    longer = pool(
        extraConfig={"DEFAULT": {"graceful_shutdown_timeout": " 600 ", "manager_shutdown_timeout": "590"}}
    )
    assert cp.termination_grace(longer, "2026.1") == 620
    # 0 is "no bound" to nova, and a value it would refuse: the release's own bound
    for value in ("0", "ten"):
        assert (
            cp.termination_grace(
                pool(extraConfig={"DEFAULT": {"graceful_shutdown_timeout": value}}), "2026.1"
            )
            == 200
        )
    # manager_shutdown_timeout alone does not move it: nova caps the wait below graceful_shutdown_timeout
    assert (
        cp.termination_grace(pool(extraConfig={"DEFAULT": {"manager_shutdown_timeout": "900"}}), "2026.1")
        == 200
    )
    own = pool(terminationGracePeriodSeconds=45, extraConfig={"DEFAULT": {"manager_shutdown_timeout": "10"}})
    ds = cp.daemonset(own, inputs(release="2026.1"))
    assert ds is not None
    assert ds["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 45


def test_the_scheduler_and_conductor_default_covers_every_shipped_release() -> None:
    """The Nova's 200 s is a schema default, the same for every release: it must cover each one's bound."""
    default = BusDeploymentSpec().termination_grace_period_seconds
    assert default is not None
    for release in catalog.supported_releases():
        assert stops.graceful_shutdown_timeout(release, None) + STOP_MARGIN_SECONDS <= default, release


def test_rendered_objects_pass_kubernetes_validate() -> None:
    p = pool(tolerations=[{"key": "k", "operator": "Exists"}], updateStrategy={"maxUnavailable": "10%"})
    ds = cp.daemonset(p, inputs(excluded=frozenset({"n2"}), keep_pods=frozenset({"n3"})))
    for obj in (ds, cp.config_map(p, cp.pool_conf(p))):
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def test_rendering_is_deterministic() -> None:
    a = cp.daemonset(pool(), inputs(excluded=frozenset({"x", "y"})))
    b = cp.daemonset(pool(), inputs(excluded=frozenset({"y", "x"})))
    assert a == b


def test_discover_hosts_job_name_fits_63_characters() -> None:
    assert cp.discover_hosts_job_name("nova") == "nova-discover-hosts"
    long = "n" * 50 + "-."
    name = cp.discover_hosts_job_name(long)
    assert len(name) <= 63
    assert name.endswith("-discover-hosts")
    assert name.startswith("n" * 39 + "-")
    assert name == cp.discover_hosts_job_name(long)


def test_discover_hosts_job_is_valid() -> None:
    import pathlib

    import yaml

    from nova_operator.models.nova import Nova

    root = pathlib.Path(__file__).resolve().parents[3]
    body = yaml.safe_load((root / "config" / "samples" / "nova_minimal.yaml").read_text())
    job = cp.discover_hosts_job(
        Nova.model_validate(body),
        image="ghcr.io/c5c3/nova:2025.2",
        config_map="nova-config-1",
        pull_policy="Always",
    )
    kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    env = {e["name"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert "OS_DEFAULT__TRANSPORT_URL" in env


def test_no_pod_of_the_operator_mounts_a_service_account_token(render_all: Any, load_sample: Any) -> None:
    """Issue 13 item 10: none of the pods talks to the Kubernetes API, so none gets a token."""
    templates: dict[str, Any] = {}
    for sample in ("minimal", "full"):
        for key, obj in render_all(load_sample(sample)).items():
            spec = obj.get("spec") or {}
            template = spec.get("template") or (spec.get("jobTemplate") or {}).get("spec", {}).get("template")
            if template is not None:
                templates[f"{sample} {key}"] = template
    ds = cp.daemonset(pool(), inputs())
    assert ds is not None
    templates["DaemonSet"] = ds["spec"]["template"]
    job = cp.discover_hosts_job(
        load_sample("minimal"), image="img", config_map="cm", pull_policy="IfNotPresent"
    )
    templates["discover-hosts Job"] = job["spec"]["template"]
    assert len(templates) > 10
    mounting = [k for k, t in templates.items() if t["spec"].get("automountServiceAccountToken") is not False]
    assert mounting == []
