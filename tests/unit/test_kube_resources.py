"""The resource table: paths, lookups, and the RBAC rendered from it (== config/rbac/)."""

from __future__ import annotations

import pathlib

import pytest
import yaml

from nova_operator.kube import resources
from nova_operator.kube.resources import CONFIGMAPS, NODES, NOVAS, ref_for, render_rbac


def test_paths_for_core_grouped_namespaced_and_cluster_scoped_kinds() -> None:
    assert CONFIGMAPS.path("ns", "x") == "/api/v1/namespaces/ns/configmaps/x"
    assert CONFIGMAPS.path() == "/api/v1/configmaps"
    assert (
        NOVAS.path("ns", "n", "status")
        == "/apis/nova.openstack.c5c3.io/v1alpha1/namespaces/ns/novas/n/status"
    )
    assert NODES.path("ignored", "node-1") == "/api/v1/nodes/node-1"
    assert NOVAS.api_version == "nova.openstack.c5c3.io/v1alpha1"
    assert CONFIGMAPS.api_version == "v1"


def test_ref_for_finds_every_kind_in_the_table_and_names_the_missing_one() -> None:
    for access in resources.ACCESS:
        assert ref_for(access.ref.api_version, access.ref.kind) is access.ref
    with pytest.raises(KeyError, match="Widget"):
        ref_for("v1", "Widget")


def test_every_kind_the_operator_touches_is_in_the_table() -> None:
    kinds = {(a.ref.group, a.ref.kind) for a in resources.ACCESS}
    for expected in [
        ("apps", "Deployment"),
        ("apps", "DaemonSet"),
        ("batch", "Job"),
        ("batch", "CronJob"),
        ("", "Secret"),
        ("", "ConfigMap"),
        ("", "Service"),
        ("", "Pod"),
        ("", "Node"),
        ("", "Event"),
        ("policy", "PodDisruptionBudget"),
        ("autoscaling", "HorizontalPodAutoscaler"),
        ("networking.k8s.io", "NetworkPolicy"),
        ("gateway.networking.k8s.io", "HTTPRoute"),
        ("k8s.mariadb.com", "MariaDB"),
        ("k8s.mariadb.com", "Database"),
        ("k8s.mariadb.com", "User"),
        ("k8s.mariadb.com", "Grant"),
        ("rabbitmq.com", "RabbitmqCluster"),
        ("coordination.k8s.io", "Lease"),
        ("nova.openstack.c5c3.io", "Nova"),
        ("nova.openstack.c5c3.io", "NovaCompute"),
    ]:
        assert expected in kinds


def test_rendered_role_grants_status_and_finalizers_of_our_crs_and_binds_the_service_account() -> None:
    files = render_rbac()
    role = yaml.safe_load(files["role.yaml"])
    granted = {
        (rule["apiGroups"][0], res, verb)
        for rule in role["rules"]
        for res in rule["resources"]
        for verb in rule["verbs"]
    }
    assert ("nova.openstack.c5c3.io", "novas/status", "patch") in granted
    assert ("nova.openstack.c5c3.io", "novacomputes/finalizers", "update") in granted
    assert ("coordination.k8s.io", "leases", "update") in granted
    assert ("k8s.mariadb.com", "mariadbs", "create") not in granted  # read-only input
    binding = yaml.safe_load(files["role_binding.yaml"])
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "nova-operator", "namespace": "nova-system"}
    ]
    sa = yaml.safe_load(files["service_account.yaml"])
    assert (sa["metadata"]["name"], sa["metadata"]["namespace"]) == ("nova-operator", "nova-system")


def test_config_rbac_is_what_the_table_renders(repo_root: pathlib.Path) -> None:
    for name, text in render_rbac().items():
        assert (repo_root / "config" / "rbac" / name).read_text() == text, (
            f"config/rbac/{name}: run make manifests"
        )
