"""Issue 36 §5, the label gate: with ``--secret-ref-label`` every pod a Nova renders mounts its
label-checked copies (``naming.checked_copy``), never a Secret the spec names; without the flag the
pods mount the spec's Secrets, as before. Pure renderer checks on the ``full`` sample (database TLS on
both blocks, a TLS bus)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

from nova_operator import naming
from nova_operator.models.common import CacheTLSSpec, HTTPSTLSSpec, SecretRefSpec
from nova_operator.models.nova import Nova
from nova_operator.models.novacompute import NovaCompute
from nova_operator.renderers import compute_pool, jobs, pod_env, secrets, workload
from tests.unit.renderers.conftest import load_nova

INPUTS = workload.WorkloadInputs(config_map="nova-config-0123abcd", broker_port=5671)
COPIES = {"nova-checked-api-db-tls", "nova-checked-cell-db-tls", "nova-checked-messaging-ca"}
NAMED = {"db-ca", "db-client", "rabbitmq-ca"}  # what the full sample's spec names for the pods to mount


def pod_specs(nova: Nova, *, checked: bool) -> Iterator[tuple[str, dict[str, Any]]]:
    """(object name, pod spec) of every pod template a Nova's pass or its pools render."""
    inputs = workload.WorkloadInputs(config_map=INPUTS.config_map, broker_port=5671, checked_copies=checked)
    rendered = [
        *workload.deployments(nova, inputs).values(),
        jobs.db_sync_job(nova, "cm", checked=checked),
        *(
            jobs.phase_job(nova, phase, "cm", checked=checked)
            for phase in ("db-expand", "db-migrate", "db-contract")
        ),
        compute_pool.discover_hosts_job(
            nova, image="i", config_map="cm", pull_policy="Always", checked=checked
        ),
    ]
    for obj in rendered:
        yield obj["metadata"]["name"], obj["spec"]["template"]["spec"]
    cronjob = jobs.db_archive_cronjob(nova, "cm", checked=checked)
    yield cronjob["metadata"]["name"], cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def mounted(pod: dict[str, Any]) -> dict[str, list[tuple[str, str, str]]]:
    """Volume -> (Secret, key, file) of every Secret a pod spec mounts, plain or projected (``*``: all
    its keys, as the pool's compute contract)."""
    found: dict[str, list[tuple[str, str, str]]] = {}
    for volume in pod.get("volumes") or []:
        if "secret" in volume:
            source = volume["secret"]
            items = source.get("items") or [{"key": "*", "path": "*"}]
            found[volume["name"]] = [(source["secretName"], i["key"], i["path"]) for i in items]
        for part in (volume.get("projected") or {}).get("sources") or []:
            if "secret" in part:
                s = part["secret"]
                found.setdefault(volume["name"], []).extend(
                    (s["name"], i["key"], i["path"]) for i in s["items"]
                )
    return found


def test_with_the_flag_every_pod_mounts_the_checked_copies_and_no_named_secret() -> None:
    nova = load_nova("full")
    for name, pod in pod_specs(nova, checked=True):
        by_volume = mounted(pod)
        secrets_mounted = {s for items in by_volume.values() for s, _key, _path in items}
        assert secrets_mounted, name  # every pod of the sample mounts the database TLS
        assert not secrets_mounted & NAMED, name
        assert secrets_mounted <= COPIES, name
        for items in by_volume.values():
            assert all(key == path for _s, key, path in items), name  # a copy's keys are the files
    api = dict(pod_specs(nova, checked=True))["nova"]
    assert mounted(api) == {
        "api-db-tls": [("nova-checked-api-db-tls", f, f) for f in ("ca.crt", "tls.crt", "tls.key")],
        "cell-db-tls": [("nova-checked-cell-db-tls", f, f) for f in ("ca.crt", "tls.crt", "tls.key")],
        "rabbitmq-ca": [("nova-checked-messaging-ca", "ca.crt", "ca.crt")],
    }


def test_without_the_flag_the_pods_mount_the_named_secrets_with_the_same_files() -> None:
    nova = load_nova("full")
    plain, checked = dict(pod_specs(nova, checked=False)), dict(pod_specs(nova, checked=True))
    assert mounted(plain["nova"]) == {
        "api-db-tls": [
            ("db-ca", "ca.crt", "ca.crt"),
            ("db-client", "tls.crt", "tls.crt"),
            ("db-client", "tls.key", "tls.key"),
        ],
        "cell-db-tls": [
            ("db-ca", "ca.crt", "ca.crt"),
            ("db-client", "tls.crt", "tls.crt"),
            ("db-client", "tls.key", "tls.key"),
        ],
        "rabbitmq-ca": [("rabbitmq-ca", "ca.crt", "ca.crt")],
    }
    for name, pod in plain.items():
        files = {v: [path for _s, _k, path in items] for v, items in mounted(pod).items()}
        assert files == {
            v: [path for _s, _k, path in items] for v, items in mounted(checked[name]).items()
        }, name
        # nothing else of the pod differs
        assert [v for v in pod["volumes"] if v["name"] not in files] == [
            v for v in checked[name]["volumes"] if v["name"] not in files
        ]
        assert pod["containers"] == checked[name]["containers"]


def test_what_the_copies_hold_follows_the_spec_keys() -> None:
    nova = load_nova("full")
    table = pod_env.mounted_secrets(nova)
    assert sorted(table) == ["api-db-tls", "cell-db-tls", "messaging-ca"]  # TLS to both databases and the bus
    assert [(m.secret, m.items) for m in table["messaging-ca"]] == [("rabbitmq-ca", (("ca.crt", "ca.crt"),))]
    custom = nova.model_copy(deep=True)
    assert custom.spec.messaging.tls is not None
    custom.spec.messaging.tls.ca_bundle_secret_ref.key = "bundle.pem"
    assert [m.items for m in pod_env.mounted_secrets(custom)["messaging-ca"]] == [(("bundle.pem", "ca.crt"),)]
    assert pod_env.mounted_secrets(load_nova("minimal")) == {}  # no TLS: nothing mounted by name


def test_the_https_bundle_is_mounted_from_its_copy_with_the_flag() -> None:
    nova = load_nova("minimal").model_copy(deep=True)
    nova.spec.tls = HTTPSTLSSpec.model_validate(
        {"caBundleSecretRef": {"name": "private-ca", "key": "root.pem"}}
    )
    assert [(m.secret, m.items) for m in pod_env.mounted_secrets(nova)["https-ca"]] == [
        ("private-ca", (("root.pem", "ca.crt"),))
    ]
    plain, _ = pod_env.https_ca_volume(nova)
    checked, mounts = pod_env.https_ca_volume(nova, checked=True)
    assert plain[0]["secret"]["secretName"] == "private-ca"
    assert checked[0]["secret"]["secretName"] == "nova-checked-https-ca"
    assert checked[0]["secret"]["items"] == [{"key": "ca.crt", "path": "ca.crt"}]
    assert mounts == [{"name": "https-ca", "mountPath": "/etc/nova-https-ca", "readOnly": True}]


def test_a_copy_is_the_novas_child_with_the_data_as_given() -> None:
    value = base64.b64encode(b"-----BEGIN CERTIFICATE-----").decode()
    copy = secrets.checked_copy_secret(load_nova("full"), "cell-db-tls", {"tls.crt": value, "ca.crt": value})
    assert copy["metadata"]["name"] == "nova-checked-cell-db-tls"
    assert copy["metadata"]["labels"] == naming.common_labels("nova")
    assert copy["data"] == {"ca.crt": value, "tls.crt": value}
    assert list(copy["data"]) == ["ca.crt", "tls.crt"]


def test_the_bus_client_certificate_and_the_cache_tls_files_are_mounted_from_their_copies() -> None:
    nova = load_nova("full").model_copy(deep=True)
    assert nova.spec.messaging.tls is not None
    nova.spec.messaging.tls.client_cert_secret_ref = SecretRefSpec.model_validate({"name": "bus-client"})
    nova.spec.cache.tls = CacheTLSSpec.model_validate(
        {"caBundleSecretRef": {"name": "cache-ca"}, "clientCertSecretRef": {"name": "cache-client"}}
    )
    table = pod_env.mounted_secrets(nova)
    assert sorted(table) == sorted(c for c in naming.CHECKED_COPIES if c != "https-ca")
    assert [m.secret for m in table["cache-tls"]] == ["cache-ca", "cache-client"]
    for checked, names in ((False, {"cache-ca", "cache-client"}), (True, {"nova-checked-cache-tls"})):
        (volume,), _ = pod_env.cache_tls_volume(nova, checked=checked)
        assert {s["secret"]["name"] for s in volume["projected"]["sources"]} == names
        files = [i["path"] for s in volume["projected"]["sources"] for i in s["secret"]["items"]]
        assert files == ["ca.crt", "tls.crt", "tls.key"]
    volumes, _ = pod_env.rabbit_ca_volume(nova, checked=True)
    secrets_named = [v["secret"]["secretName"] for v in volumes if "secret" in v]
    projected = [s["secret"]["name"] for v in volumes if "projected" in v for s in v["projected"]["sources"]]
    assert secrets_named == ["nova-checked-messaging-ca"]
    assert projected == ["nova-checked-messaging-client-tls"]


# -- a NovaCompute's own spec.tls bundle: the pool's copy --------------------------------------------


def own_ca_pool() -> NovaCompute:
    """A pool whose ``spec.tls`` names ``private-ca``, key ``root.pem``."""
    return NovaCompute.model_validate(
        {
            "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
            "kind": "NovaCompute",
            "metadata": {"name": "rack7", "namespace": "openstack", "uid": "u1"},
            "spec": {
                "novaRef": {"name": "nova"},
                "nodeSelector": {"pool": "rack7"},
                "tls": {"caBundleSecretRef": {"name": "private-ca", "key": "root.pem"}},
            },
        }
    )


def pool_pod(pool: NovaCompute, *, checked: bool) -> dict[str, Any]:
    inputs = compute_pool.PoolInputs(
        image="i", config_map="rack7-config-0123abcd", contract_secret="nova-compute-config",
        contract_hash="f" * 64, https_ca_hash="a" * 64, checked=checked,
    )  # fmt: skip
    ds = compute_pool.daemonset(pool, inputs)
    assert ds is not None
    spec: dict[str, Any] = ds["spec"]["template"]["spec"]
    return spec


def test_with_the_flag_a_pool_mounts_its_own_bundle_from_the_pools_copy() -> None:
    pool = own_ca_pool()
    plain, checked = pool_pod(pool, checked=False), pool_pod(pool, checked=True)
    assert mounted(plain)["https-ca"] == [("private-ca", "root.pem", "ca.crt")]
    assert mounted(checked)["https-ca"] == [("rack7-nova-compute-checked-https-ca", "ca.crt", "ca.crt")]
    assert compute_pool.checked_ca_name("rack7") == "rack7-nova-compute-checked-https-ca"
    assert "private-ca" not in {s for items in mounted(checked).values() for s, _k, _p in items}
    # nothing else of the pod differs: the same file in the same place
    assert [v for v in plain["volumes"] if v["name"] != "https-ca"] == [
        v for v in checked["volumes"] if v["name"] != "https-ca"
    ]
    assert plain["containers"] == checked["containers"]
    without_tls = own_ca_pool()
    without_tls.spec.tls = None
    assert "https-ca" not in mounted(pool_pod(without_tls, checked=True))


def test_the_pools_copy_is_its_child_and_holds_the_keys_as_read() -> None:
    pool = own_ca_pool()
    source = compute_pool.own_ca_source(pool)
    assert source is not None
    value = base64.b64encode(b"-----BEGIN CERTIFICATE-----").decode()
    assert pod_env.copied_data(source, {"data": {"root.pem": value, "other": "eA=="}}) == {"ca.crt": value}
    assert pod_env.copied_data(source, {"stringData": {"root.pem": "-----BEGIN CERTIFICATE-----"}}) == {
        "ca.crt": value
    }
    assert pod_env.copied_data(source, {"data": {"ca.crt": value}}) == {}  # the key the spec names only
    copy = compute_pool.checked_ca_secret(pool, {"ca.crt": value})
    assert copy["metadata"] == {
        "name": "rack7-nova-compute-checked-https-ca",
        "namespace": "openstack",
        "labels": compute_pool.labels("rack7"),
    }
    assert copy["data"] == {"ca.crt": value}
