"""Mutual TLS to the bus and TLS to the cache (issue 38 item 5): nova.conf, the compute fragment, the
pods' volumes and the compute contract."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest

from nova_operator import catalog
from nova_operator.models.nova import Nova
from nova_operator.reconcilers.nova import secret_reads
from nova_operator.renderers import novaconf, workload
from nova_operator.renderers import secrets as derived
from nova_operator.renderers.pod_env import cache_tls_volume, rabbit_ca_volume

Load = Callable[[str], Nova]

CLIENT = {"name": "nova-bus-client"}
CACHE_TLS = {
    "caBundleSecretRef": {"name": "memcached-ca", "key": "bundle.pem"},
    "clientCertSecretRef": {"name": "nova-cache-client"},
}


def _with(nova: Nova, *, bus_client: bool = True, cache_tls: dict[str, Any] | None = None) -> Nova:
    body = nova.model_dump(by_alias=True, exclude_none=True, mode="json")
    if bus_client:
        body["spec"]["messaging"]["tls"]["clientCertSecretRef"] = CLIENT
    if cache_tls is not None:
        body["spec"]["cache"]["tls"] = cache_tls
    return Nova.model_validate(body)


def _sections(nova: Nova) -> novaconf.Sections:
    return novaconf.nova_conf_sections(novaconf.conf_inputs(nova))


def test_the_bus_client_certificate_is_named_in_nova_conf_and_in_the_compute_fragment(
    load_sample: Load,
) -> None:
    nova = _with(load_sample("full"))
    rabbit = _sections(nova)["oslo_messaging_rabbit"]
    assert rabbit["ssl"] == "true"
    assert rabbit["ssl_ca_file"] == "/etc/rabbitmq-ca/ca.crt"
    assert rabbit["ssl_cert_file"] == "/etc/rabbitmq-client-tls/tls.crt"
    assert rabbit["ssl_key_file"] == "/etc/rabbitmq-client-tls/tls.key"
    inputs = novaconf.conf_inputs(nova)
    fragment = novaconf.compute_fragment_sections(inputs)["oslo_messaging_rabbit"]
    assert fragment["ssl_cert_file"] == "/etc/nova/compute-config/tls.crt"
    assert fragment["ssl_key_file"] == "/etc/nova/compute-config/tls.key"
    remote = novaconf.compute_fragment_sections(
        inputs, remote=novaconf.RemoteComputeInputs(keystone_endpoint="https://ks.example.org/v3")
    )
    assert remote["oslo_messaging_rabbit"]["ssl_cert_file"] == "/etc/nova/compute-config/tls.crt"


def test_without_a_client_certificate_no_client_file_is_named(load_sample: Load) -> None:
    nova = load_sample("full")  # a TLS bus with a CA bundle only
    inputs = novaconf.conf_inputs(nova)
    for rabbit in (
        _sections(nova)["oslo_messaging_rabbit"],
        novaconf.compute_fragment_sections(inputs)["oslo_messaging_rabbit"],
    ):
        assert rabbit["ssl"] == "true"
        assert "ssl_cert_file" not in rabbit
        assert "ssl_key_file" not in rabbit


def test_the_pods_mount_the_bus_client_certificate_owner_only(load_sample: Load) -> None:
    volumes, mounts = rabbit_ca_volume(_with(load_sample("full")))
    client = next(v for v in volumes if v["name"] == "rabbitmq-client-tls")
    assert client["projected"] == {
        "defaultMode": 0o400,
        "sources": [
            {
                "secret": {
                    "name": "nova-bus-client",
                    "items": [{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}],
                }
            }
        ],
    }
    assert {
        "name": "rabbitmq-client-tls",
        "mountPath": "/etc/rabbitmq-client-tls",
        "readOnly": True,
    } in mounts
    volumes, _ = rabbit_ca_volume(load_sample("full"))
    assert [v["name"] for v in volumes] == ["rabbitmq-ca"]


def test_cache_tls_renders_the_cache_section_and_the_token_cache_over_tls(load_sample: Load) -> None:
    nova = _with(load_sample("full"), bus_client=False, cache_tls=CACHE_TLS)
    sections = _sections(nova)
    servers = "memcached-0.memcached:11211,memcached-1.memcached:11211"
    assert sections["cache"] == {
        "backend": "oslo_cache.memcache_pool",
        "enabled": "true",
        "memcache_servers": servers,
        "tls_cafile": "/etc/memcached-tls/ca.crt",
        "tls_certfile": "/etc/memcached-tls/tls.crt",
        "tls_enabled": "true",
        "tls_keyfile": "/etc/memcached-tls/tls.key",
    }
    token_cache = {k: v for k, v in sections["keystone_authtoken"].items() if k.startswith("memcache")}
    assert token_cache == {
        "memcached_servers": servers,
        "memcache_use_advanced_pool": "true",  # the only pool of keystonemiddleware that speaks TLS
        "memcache_tls_enabled": "true",
        "memcache_tls_cafile": "/etc/memcached-tls/ca.crt",
        "memcache_tls_certfile": "/etc/memcached-tls/tls.crt",
        "memcache_tls_keyfile": "/etc/memcached-tls/tls.key",
    }
    # the pools run no keystonemiddleware and mount no cache files: their fragment names none
    fragment = novaconf.compute_fragment_sections(novaconf.conf_inputs(nova))["keystone_authtoken"]
    assert not any(k.startswith("memcache") for k in fragment)
    plain = _sections(load_sample("full"))
    assert not any(k.startswith("tls_") for k in plain["cache"])
    plain_token_cache = [k for k in plain["keystone_authtoken"] if k.startswith("memcache")]
    assert plain_token_cache == ["memcached_servers"]
    assert plain["keystone_authtoken"]["memcached_servers"] == plain["cache"]["memcache_servers"]


@pytest.mark.parametrize("release", catalog.supported_releases())
def test_the_token_cache_options_are_known_to_the_release_and_owned(load_sample: Load, release: str) -> None:
    nova = _with(load_sample("full"), bus_client=False, cache_tls=CACHE_TLS)
    body = nova.model_dump(by_alias=True, exclude_none=True, mode="json")
    body["spec"]["openStackRelease"] = release
    authtoken = _sections(Nova.model_validate(body))["keystone_authtoken"]
    known = catalog.load_catalog(release)
    for key in (k for k in authtoken if k.startswith("memcache")):
        assert known.knows("keystone_authtoken", key), (release, key)
        assert key in novaconf.OWNED_KEYS["keystone_authtoken"], key


def test_cache_tls_without_a_client_certificate_names_the_ca_only(load_sample: Load) -> None:
    nova = _with(
        load_sample("full"), bus_client=False, cache_tls={"caBundleSecretRef": {"name": "memcached-ca"}}
    )
    cache = _sections(nova)["cache"]
    assert (cache["tls_enabled"], cache["tls_cafile"]) == ("true", "/etc/memcached-tls/ca.crt")
    assert "tls_certfile" not in cache
    assert "tls_keyfile" not in cache
    authtoken = _sections(nova)["keystone_authtoken"]
    assert authtoken["memcache_tls_cafile"] == "/etc/memcached-tls/ca.crt"
    assert "memcache_tls_certfile" not in authtoken
    assert "memcache_tls_keyfile" not in authtoken
    volumes, _ = cache_tls_volume(nova)
    assert volumes[0]["projected"]["sources"] == [
        {"secret": {"name": "memcached-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
    ]


def test_every_deployment_mounts_the_bus_and_cache_tls_files(load_sample: Load) -> None:
    nova = _with(load_sample("full"), cache_tls=CACHE_TLS)
    deployments = workload.deployments(
        nova, workload.WorkloadInputs(config_map="nova-config-0", broker_port=5671)
    )
    assert len(deployments) == 5
    for key, dep in deployments.items():
        pod = dep["spec"]["template"]["spec"]
        volume = next(v for v in pod["volumes"] if v["name"] == "memcached-tls")
        assert volume["projected"]["defaultMode"] == 0o400, key
        assert volume["projected"]["sources"] == [
            {"secret": {"name": "memcached-ca", "items": [{"key": "bundle.pem", "path": "ca.crt"}]}},
            {
                "secret": {
                    "name": "nova-cache-client",
                    "items": [{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}],
                }
            },
        ], key
        mounts = pod["containers"][0]["volumeMounts"]
        assert {"name": "memcached-tls", "mountPath": "/etc/memcached-tls", "readOnly": True} in mounts, key
        assert any(v["name"] == "rabbitmq-client-tls" for v in pod["volumes"]), key


def test_the_compute_contract_carries_the_client_pair_under_mutual_tls(load_sample: Load) -> None:
    nova = _with(load_sample("full"))
    kwargs: dict[str, Any] = {"fragment": "f", "transport_url": "t", "password": "p", "metadata_secret": "m"}
    secret = derived.compute_config_secret(nova, ca_crt="CA", client_cert=("CERT", "KEY"), **kwargs)
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert (data["ca.crt"], data["tls.crt"], data["tls.key"]) == ("CA", "CERT", "KEY")
    with pytest.raises(ValueError, match="client certificate"):
        derived.compute_config_secret(nova, ca_crt="CA", **kwargs)
    without = derived.compute_config_secret(
        load_sample("full"), ca_crt="CA", client_cert=("CERT", "KEY"), **kwargs
    )
    assert "tls.crt" not in without["data"]
    assert "tls.key" not in without["data"]


def test_the_client_certificates_and_the_cache_ca_are_secrets_the_nova_names(load_sample: Load) -> None:
    """They are read (the Secrets cache keeps their data) and checked by ``--secret-ref-label``."""
    nova = _with(load_sample("full"), cache_tls=CACHE_TLS)
    body = nova.model_dump(by_alias=True, exclude_none=True, mode="json")
    fields = dict(secret_reads.secret_ref_fields(body))
    assert fields["spec.messaging.tls.clientCertSecretRef"] == "nova-bus-client"
    assert fields["spec.cache.tls.caBundleSecretRef"] == "memcached-ca"
    assert fields["spec.cache.tls.clientCertSecretRef"] == "nova-cache-client"
