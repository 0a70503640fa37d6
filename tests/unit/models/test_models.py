"""The pydantic models: camelCase round trips, defaults, helpers, and the rules CEL does not check."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from nova_operator import models
from nova_operator.models import Nova, NovaCompute, NovaComputeStatus, NovaSpec, NovaStatus
from nova_operator.models.common import DeploymentSpec, ImageSpec
from nova_operator.models.nova import NovaConsoleProxySpec, check_cron

SAMPLES = pathlib.Path(__file__).resolve().parents[3] / "config" / "samples"


def _sample(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((SAMPLES / name).read_text())
    return doc


def _stored_nova() -> dict[str, Any]:
    """A Nova the way the API server returns it: metadata filled, every default materialized."""
    return {
        "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
        "kind": "Nova",
        "metadata": {
            "name": "nova",
            "namespace": "openstack",
            "uid": "3f0b5c1e-0000-4000-8000-000000000001",
            "resourceVersion": "42",
            "generation": 2,
            "creationTimestamp": "2026-11-29T09:00:00Z",
            "finalizers": ["nova.openstack.c5c3.io/finalizer"],
            "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
        },
        "spec": {
            **_sample("nova_minimal.yaml")["spec"],
            "cache": {"clusterRef": {"name": "memcached"}, "backend": "dogpile.cache.pymemcache"},
            "api": {
                "deployment": {"replicas": 3},
                "uwsgi": {"processes": 2, "threads": 1, "httpKeepAlive": True},
            },
            "scheduler": {"deployment": {"replicas": 1, "terminationGracePeriodSeconds": 200}, "workers": 2},
            "conductor": {"deployment": {"replicas": 1, "terminationGracePeriodSeconds": 200}, "workers": 2},
            "metadata": {
                "deployment": {"replicas": 1},
                "uwsgi": {"processes": 2, "threads": 1, "httpKeepAlive": True},
                "sharedSecretRef": {"name": "nova-metadata-proxy", "key": "shared_secret"},
            },
            "consoleProxy": {
                "enabled": True,
                "gateway": {"hostname": "novnc.example.org", "parentRef": {"name": "public-gateway"}},
            },
            "serviceUser": {
                "username": "nova",
                "projectName": "service",
                "userDomainName": "Default",
                "projectDomainName": "Default",
                "secretRef": {"name": "nova-service-user", "key": "password"},
            },
            "endpoints": {
                "placement": {},
                "neutron": {},
                "glance": {},
                "cinder": {"enabled": False},
                "barbican": {"enabled": False},
            },
            "logging": {"format": "text", "level": "INFO", "debug": False},
        },
        "status": {
            "observedGeneration": 2,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "AllReady",
                    "message": "",
                    "lastTransitionTime": "2026-11-29T09:05:00Z",
                    "observedGeneration": 2,
                }
            ],
            "endpoint": "http://nova.openstack.svc.cluster.local:8774",
            "installedRelease": "2025.2",
            "cells": [{"name": "cell0", "uuid": "00000000-0000-0000-0000-000000000000"}],
            "computeConfigSecretRef": {"name": "nova-compute-config"},
        },
    }


def test_public_surface() -> None:
    assert set(models.__all__) >= {
        "Nova",
        "NovaSpec",
        "NovaStatus",
        "NovaCompute",
        "NovaComputeSpec",
        "NovaComputeStatus",
        "Condition",
        "ObjectMeta",
        "OwnerReference",
    }


def test_a_stored_nova_round_trips_without_loss() -> None:
    stored = _stored_nova()
    nova = Nova.model_validate(stored)
    assert nova.model_dump(by_alias=True, exclude_none=True) == stored
    assert nova.metadata.generation == 2
    assert nova.status is not None
    assert nova.status.conditions is not None
    assert nova.status.conditions[0].reason == "AllReady"


@pytest.mark.parametrize("sample", ["nova_minimal.yaml", "nova_full.yaml"])
def test_nova_samples_round_trip_once_defaulted(sample: str) -> None:
    defaulted = Nova.model_validate(_sample(sample)).model_dump(by_alias=True, exclude_none=True)
    assert Nova.model_validate(defaulted).model_dump(by_alias=True, exclude_none=True) == defaulted


def test_novacompute_sample_round_trips_and_keeps_int_or_string() -> None:
    compute = NovaCompute.model_validate(_sample("novacompute.yaml"))
    assert compute.spec.update_strategy.max_unavailable == "10%"
    dumped = compute.model_dump(by_alias=True, exclude_none=True)
    assert dumped["spec"]["libvirt"]["cpuModels"] == ["Cascadelake-Server-noTSX"]
    assert NovaCompute.model_validate(dumped).model_dump(by_alias=True, exclude_none=True) == dumped
    assert NovaCompute.model_validate(
        {**dumped, "spec": {**dumped["spec"], "updateStrategy": {"maxUnavailable": 2}}}
    )


def test_irregular_json_names() -> None:
    spec = Nova.model_validate(_sample("nova_full.yaml")).spec
    assert spec.autoscaling is not None
    assert spec.autoscaling.target_cpu_utilization == 80
    assert spec.remote_compute is not None
    dumped = spec.model_dump(by_alias=True, exclude_none=True)
    assert dumped["autoscaling"]["targetCPUUtilization"] == 80
    assert dumped["remoteCompute"]["transportURLSecretRef"] == {
        "name": "nova-remote-transport-url",
        "key": "transport_url",
    }
    assert dumped["openStackRelease"] == "2026.1"
    status = NovaComputeStatus.model_validate(
        {"nodes": [{"name": "n", "phase": "Active", "serviceID": "abc"}]}
    )
    assert status.nodes is not None
    assert status.nodes[0].service_id == "abc"
    assert status.model_dump(exclude_none=True) == {
        "nodes": [{"name": "n", "phase": "Active", "serviceID": "abc"}]
    }


def test_fields_can_be_given_by_python_name() -> None:
    image = ImageSpec(repository="ghcr.io/c5c3/nova", digest="sha256:" + "a" * 64)
    assert image.reference == "ghcr.io/c5c3/nova@sha256:" + "a" * 64
    assert ImageSpec(repository="r", tag="t").reference == "r:t"


def test_unknown_spec_fields_are_refused_but_unknown_metadata_is_kept() -> None:
    stored = _stored_nova()
    stored["spec"]["targetClusterRef"] = {"name": "elsewhere"}
    with pytest.raises(ValidationError, match="targetClusterRef"):
        Nova.model_validate(stored)
    stored = _stored_nova()
    nova = Nova.model_validate(stored)
    assert nova.model_dump(by_alias=True, exclude_none=True)["metadata"]["managedFields"] == [
        {"manager": "kubectl", "operation": "Apply"}
    ]


def test_effective_values_resolved_at_render_time() -> None:
    deployment = DeploymentSpec()
    assert (
        deployment.effective_termination_grace_period_seconds,
        deployment.effective_pre_stop_sleep_seconds,
    ) == (30, 5)
    assert NovaConsoleProxySpec().effective_deployment == DeploymentSpec(replicas=1)
    assert NovaConsoleProxySpec(enabled=False).effective_deployment is None
    assert NovaConsoleProxySpec(deployment=DeploymentSpec(replicas=2)).effective_deployment == DeploymentSpec(
        replicas=2
    )
    spec = Nova.model_validate(_sample("nova_full.yaml")).spec
    assert spec.api_database.effective_port == 3307
    assert spec.database.effective_credentials_mode == "Static"
    assert spec.api_database.tls is not None
    assert spec.api_database.tls.enabled


@pytest.mark.parametrize(
    "schedule", ["@daily", "@hourly", "@every 1h30m", "30 3 * * *", "*/15 0-6 1,15 JAN-MAR MON"]
)
def test_cron_grammar_admits(schedule: str) -> None:
    assert check_cron(schedule) == schedule


@pytest.mark.parametrize(
    "schedule", ["daily", "* * * *", "* * * * * *", "TZ=UTC 0 3 * * *", "0 3 * * * extra"]
)
def test_cron_grammar_refuses(schedule: str) -> None:
    with pytest.raises(ValueError, match="invalid cron expression"):
        check_cron(schedule)


def test_db_archive_schedule_is_checked_by_the_model() -> None:
    stored = _stored_nova()
    stored["spec"]["dbArchive"] = {"schedule": "every night"}
    with pytest.raises(ValidationError, match="invalid cron expression"):
        Nova.model_validate(stored)


@pytest.mark.parametrize(
    ("selector", "error"),
    [
        ({"bad key!": "x"}, "label key"),
        ({"example.org/": "x"}, "label key"),
        ({"Not_A_Domain/pool": "x"}, "prefix"),
        ({"pool": "-x"}, "should match pattern"),
        ({"pool": "x" * 64}, "at most 63 characters"),
    ],
)
def test_node_selector_label_grammar_is_checked_by_the_model(selector: dict[str, str], error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        DeploymentSpec(node_selector=selector)
    compute = _sample("novacompute.yaml")
    compute["spec"]["nodeSelector"] = selector
    with pytest.raises(ValidationError, match=error):
        NovaCompute.model_validate(compute)


def test_node_selector_admits_valid_labels() -> None:
    assert DeploymentSpec(node_selector={"node-role.kubernetes.io/control-plane": "", "zone": "a.b-c_d"})


def test_status_models_parse_partial_status() -> None:
    assert NovaStatus.model_validate({}).model_dump(exclude_none=True) == {}
    assert NovaStatus.model_validate({"upgradePhase": "Migrating"}).upgrade_phase == "Migrating"
    with pytest.raises(ValidationError):
        NovaStatus.model_validate({"upgradePhase": "Sideways"})


def test_spec_models_are_importable_from_the_package() -> None:
    assert NovaSpec.model_fields["api_database"].alias == "apiDatabase"
