"""What a Nova pod reads: credentials as env from their Secrets, the database TLS, RabbitMQ TLS and
memcached TLS volumes, the config volume."""

from __future__ import annotations

from typing import Any

from nova_operator.models.common import (
    DatabaseSpec,
    SecretRefSpec,
)
from nova_operator.models.nova import Nova
from nova_operator.renderers.novaconf import CACHE_TLS_DIR, RABBIT_CLIENT_DIR

Manifest = dict[str, Any]

RABBIT_CA_DIR = "/etc/rabbitmq-ca"
DB_TLS_DIR = {"api": "/etc/nova-db-tls/api", "cell": "/etc/nova-db-tls/cell"}


def nova_name(nova: Nova) -> str:
    """The Nova's name; a Nova without one cannot be rendered."""
    if not nova.metadata.name:
        raise ValueError("a Nova without metadata.name cannot be rendered")
    return nova.metadata.name


def secret_env(name: str, secret: str, key: str) -> Manifest:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def secret_config_env(secret: str, keys: tuple[str, ...] | list[str]) -> list[Manifest]:
    """``OS_<SECTION>__<OPTION>`` from key ``section.option`` of ``secret``, for each key (sorted).

    oslo.config reads an option from that variable before any file, so the option is set
    without its value ever being in a ConfigMap (spec.secretConfig).
    """
    env = []
    for key in sorted(keys):
        section, _, option = key.partition(".")
        env.append(secret_env(f"OS_{section.upper()}__{option.upper()}", secret, key))
    return env


def oslo_credentials(nova: Nova) -> str:
    """The derived Secret with the password and the shared secret in oslo.config form."""
    return f"{nova_name(nova)}-oslo-credentials"


def password_env(nova: Nova) -> list[Manifest]:
    sections = ["KEYSTONE_AUTHTOKEN", "SERVICE_USER", "PLACEMENT", "NEUTRON"]
    if nova.spec.endpoints.cinder.enabled:
        sections.append("CINDER")
    return [secret_env(f"OS_{s}__PASSWORD", oslo_credentials(nova), "password") for s in sections]


def base_env(nova: Nova, *, api_db: bool = True) -> list[Manifest]:
    name = nova_name(nova)
    env = [
        secret_env("OS_DEFAULT__TRANSPORT_URL", f"{name}-transport-url", "transport_url"),
        secret_env("OS_DATABASE__CONNECTION", f"{name}-db-connection", "connection"),
    ]
    if api_db:
        env.append(secret_env("OS_API_DATABASE__CONNECTION", f"{name}-api-db-connection", "connection"))
    return env + password_env(nova)


def manage_env(nova: Nova) -> list[Manifest]:
    """The "manage" role environment of the Jobs and the CronJob: bus, both DSNs, the passwords."""
    return base_env(nova)


def db_tls_enabled(block: DatabaseSpec) -> bool:
    return block.tls is not None and bool(block.tls.mode) and block.tls.mode != "disabled"


def db_tls_volumes(nova: Nova) -> tuple[list[Manifest], list[Manifest]]:
    """(volumes, mounts) of the DB TLS projections of the blocks whose TLS is enabled."""
    volumes: list[Manifest] = []
    mounts: list[Manifest] = []
    for which, block in (("api", nova.spec.api_database), ("cell", nova.spec.database)):
        if not db_tls_enabled(block) or block.tls is None:
            continue
        volumes.append(
            {
                "name": f"{which}-db-tls",
                "projected": {
                    "defaultMode": 0o400,
                    "sources": [
                        {
                            "secret": {
                                "name": block.tls.ca_bundle_secret_ref.name,
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                            }
                        },
                        {
                            "secret": {
                                "name": block.tls.client_cert_secret_ref.name,
                                "items": [
                                    {"key": "tls.crt", "path": "tls.crt"},
                                    {"key": "tls.key", "path": "tls.key"},
                                ],
                            }
                        },
                    ],
                },
            }
        )
        mounts.append({"name": f"{which}-db-tls", "mountPath": DB_TLS_DIR[which], "readOnly": True})
    return volumes, mounts


def _client_cert_source(ref: SecretRefSpec) -> Manifest:
    """The projection of a client certificate Secret's ``tls.crt`` and ``tls.key`` (as the database's)."""
    return {
        "secret": {
            "name": ref.name,
            "items": [{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}],
        }
    }


def rabbit_ca_volume(nova: Nova) -> tuple[list[Manifest], list[Manifest]]:
    """(volumes, mounts) of the broker's CA bundle and, under mutual TLS, of the client certificate."""
    tls = nova.spec.messaging.tls
    if tls is None:
        return [], []
    ref = tls.ca_bundle_secret_ref
    volumes: list[Manifest] = [
        {
            "name": "rabbitmq-ca",
            "secret": {
                "secretName": ref.name,
                "defaultMode": 0o444,
                "items": [{"key": ref.key or "ca.crt", "path": "ca.crt"}],
            },
        }
    ]
    mounts: list[Manifest] = [{"name": "rabbitmq-ca", "mountPath": RABBIT_CA_DIR, "readOnly": True}]
    if tls.client_cert_secret_ref is not None:
        sources = [_client_cert_source(tls.client_cert_secret_ref)]
        volumes.append(
            {"name": "rabbitmq-client-tls", "projected": {"defaultMode": 0o400, "sources": sources}}
        )
        mounts.append({"name": "rabbitmq-client-tls", "mountPath": RABBIT_CLIENT_DIR, "readOnly": True})
    return volumes, mounts


def cache_tls_volume(nova: Nova) -> tuple[list[Manifest], list[Manifest]]:
    """(volumes, mounts) of ``spec.cache.tls``: its CA bundle as ``ca.crt`` and the client certificate."""
    tls = nova.spec.cache.tls
    if tls is None:
        return [], []
    ca = tls.ca_bundle_secret_ref
    sources: list[Manifest] = [
        {"secret": {"name": ca.name, "items": [{"key": ca.key or "ca.crt", "path": "ca.crt"}]}}
    ]
    if tls.client_cert_secret_ref is not None:
        sources.append(_client_cert_source(tls.client_cert_secret_ref))
    volume = {"name": "memcached-tls", "projected": {"defaultMode": 0o400, "sources": sources}}
    return [volume], [{"name": "memcached-tls", "mountPath": CACHE_TLS_DIR, "readOnly": True}]


def config_volume(config_map: str, items: list[str] | None = None, *, name: str = "config") -> Manifest:
    source: Manifest = {"name": config_map}
    if items is not None:
        source["items"] = [{"key": key, "path": key} for key in items]
    return {"name": name, "configMap": source}
