"""What a Nova pod reads: credentials as env from their Secrets, the database TLS, RabbitMQ TLS,
memcached TLS and HTTPS CA volumes, the config volume."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nova_operator.models.common import (
    DatabaseSpec,
    SecretRefSpec,
)
from nova_operator.models.nova import Nova
from nova_operator.naming import CheckedCopy, checked_copy
from nova_operator.renderers.novaconf import CACHE_TLS_DIR, HTTPS_CA_DIR, RABBIT_CLIENT_DIR

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


_CA = ("ca.crt", "ca.crt")
_CLIENT_PAIR = (("tls.crt", "tls.crt"), ("tls.key", "tls.key"))
_DB_VOLUMES: tuple[tuple[str, CheckedCopy], ...] = (("api", "api-db-tls"), ("cell", "cell-db-tls"))


@dataclass(frozen=True, slots=True)
class Mounted:
    """A Secret the spec names that the pods mount by name: the keys they take from it, each as
    ``(key in the Secret, file in the pod)``; the file is the key in the label-checked copy too."""

    secret: str
    items: tuple[tuple[str, str], ...]


def ca_bundle(ref: SecretRefSpec) -> Mounted:
    """A CA bundle's Secret: its key (default ``ca.crt``) as the file ``ca.crt``."""
    return Mounted(ref.name, ((ref.key or "ca.crt", "ca.crt"),))


def encoded(secret: Mapping[str, Any], key: str) -> str | None:
    """The base64 value of ``key`` as a Secret holds it (``stringData`` encoded); None when absent."""
    value = (secret.get("data") or {}).get(key)
    if isinstance(value, str):
        return value
    text = (secret.get("stringData") or {}).get(key)
    return base64.b64encode(text.encode("utf-8")).decode("ascii") if isinstance(text, str) else None


def copied_data(source: Mounted, secret: Mapping[str, Any]) -> dict[str, str]:
    """What a label-checked copy takes of ``source`` read as ``secret``: each key's base64 value (never
    decoded) under its file name; a key the Secret lacks is left out."""
    return {path: value for key, path in source.items if (value := encoded(secret, key)) is not None}


def mounted_secrets(nova: Nova) -> dict[CheckedCopy, tuple[Mounted, ...]]:
    """The Secrets the pods mount by name (never read by the pods' environment), by the volume and
    the checked copy (``naming.checked_copy``) they make: the TLS files of each database block whose
    TLS is on, the message bus's CA bundle and client certificate, the cache's TLS files and the
    ``spec.tls`` bundle for HTTPS."""
    found: dict[CheckedCopy, tuple[Mounted, ...]] = {}
    blocks: tuple[tuple[CheckedCopy, DatabaseSpec], ...] = (
        ("api-db-tls", nova.spec.api_database),
        ("cell-db-tls", nova.spec.database),
    )
    for which, block in blocks:
        if not db_tls_enabled(block) or block.tls is None:
            continue
        found[which] = (
            Mounted(block.tls.ca_bundle_secret_ref.name, (_CA,)),
            Mounted(block.tls.client_cert_secret_ref.name, _CLIENT_PAIR),
        )
    tls = nova.spec.messaging.tls
    if tls is not None:
        found["messaging-ca"] = (ca_bundle(tls.ca_bundle_secret_ref),)
        if tls.client_cert_secret_ref is not None:
            found["messaging-client-tls"] = (Mounted(tls.client_cert_secret_ref.name, _CLIENT_PAIR),)
    cache = nova.spec.cache.tls
    if cache is not None:
        found["cache-tls"] = (ca_bundle(cache.ca_bundle_secret_ref),)
        if cache.client_cert_secret_ref is not None:
            found["cache-tls"] += (Mounted(cache.client_cert_secret_ref.name, _CLIENT_PAIR),)
    if nova.spec.tls is not None:
        found["https-ca"] = (ca_bundle(nova.spec.tls.ca_bundle_secret_ref),)
    return found


def _items(pairs: tuple[tuple[str, str], ...]) -> list[Manifest]:
    return [{"key": key, "path": path} for key, path in pairs]


def _copied(mounted: tuple[Mounted, ...]) -> tuple[tuple[str, str], ...]:
    """The items of a checked copy: its keys are the files."""
    return tuple((path, path) for m in mounted for _key, path in m.items)


def _projected(
    nova: Nova, copy: CheckedCopy, volume: str, directory: str, *, checked: bool
) -> tuple[list[Manifest], list[Manifest]]:
    """(volumes, mounts) of the files of ``copy`` (``mounted_secrets``), projected under ``directory``
    from the Secrets the spec names or (``checked``, with ``--secret-ref-label``) from the Nova's
    label-checked copy of them; nothing while the spec names none."""
    mounted = mounted_secrets(nova).get(copy)
    if mounted is None:
        return [], []
    if checked:
        name = checked_copy(nova_name(nova), copy)
        sources = [{"secret": {"name": name, "items": _items(_copied(mounted))}}]
    else:
        sources = [{"secret": {"name": m.secret, "items": _items(m.items)}} for m in mounted]
    spec = {"name": volume, "projected": {"defaultMode": 0o400, "sources": sources}}
    return [spec], [{"name": volume, "mountPath": directory, "readOnly": True}]


def db_tls_volumes(nova: Nova, *, checked: bool = False) -> tuple[list[Manifest], list[Manifest]]:
    """(volumes, mounts) of the DB TLS projections of the blocks whose TLS is enabled: from the
    Secrets the spec names, or (``checked``, with ``--secret-ref-label``) from the Nova's
    label-checked copies of them (``naming.checked_copy``)."""
    volumes: list[Manifest] = []
    mounts: list[Manifest] = []
    for which, copy in _DB_VOLUMES:
        more, mounted = _projected(nova, copy, f"{which}-db-tls", DB_TLS_DIR[which], checked=checked)
        volumes += more
        mounts += mounted
    return volumes, mounts


def _ca_volume(
    nova: Nova, copy: CheckedCopy, volume: str, directory: str, *, checked: bool
) -> tuple[list[Manifest], list[Manifest]]:
    """(volumes, mounts) of a CA bundle the spec names, as ``ca.crt`` under ``directory``: from the
    Secret itself or (``checked``) from the Nova's label-checked copy of it; nothing while unset."""
    mounted = mounted_secrets(nova).get(copy)
    if mounted is None:
        return [], []
    (ca,) = mounted
    return secret_volume(ca, volume, directory, copy=checked_copy(nova_name(nova), copy) if checked else None)


def secret_volume(
    source: Mounted, volume: str, directory: str, *, copy: str | None = None
) -> tuple[list[Manifest], list[Manifest]]:
    """(volumes, mounts) of ``source``'s files under ``directory`` (mode 0444): from the Secret itself,
    or (``copy``, with ``--secret-ref-label``) from the label-checked copy of that name, whose keys are
    the files (``copied_data``)."""
    name, pairs = (source.secret, source.items) if copy is None else (copy, _copied((source,)))
    spec = {"name": volume, "secret": {"secretName": name, "defaultMode": 0o444, "items": _items(pairs)}}
    return [spec], [{"name": volume, "mountPath": directory, "readOnly": True}]


def rabbit_ca_volume(nova: Nova, *, checked: bool = False) -> tuple[list[Manifest], list[Manifest]]:
    """The message bus's CA bundle under ``RABBIT_CA_DIR`` and, under mutual TLS, its client
    certificate under ``RABBIT_CLIENT_DIR``."""
    volumes, mounts = _ca_volume(nova, "messaging-ca", "rabbitmq-ca", RABBIT_CA_DIR, checked=checked)
    more, mounted = _projected(
        nova, "messaging-client-tls", "rabbitmq-client-tls", RABBIT_CLIENT_DIR, checked=checked
    )
    return volumes + more, mounts + mounted


def cache_tls_volume(nova: Nova, *, checked: bool = False) -> tuple[list[Manifest], list[Manifest]]:
    """``spec.cache.tls``: its CA bundle as ``ca.crt`` and the client certificate, under ``CACHE_TLS_DIR``."""
    return _projected(nova, "cache-tls", "memcached-tls", CACHE_TLS_DIR, checked=checked)


def https_ca_volume(nova: Nova, *, checked: bool = False) -> tuple[list[Manifest], list[Manifest]]:
    """The ``spec.tls`` bundle under ``HTTPS_CA_DIR``."""
    return _ca_volume(nova, "https-ca", "https-ca", HTTPS_CA_DIR, checked=checked)


def config_volume(config_map: str, items: list[str] | None = None, *, name: str = "config") -> Manifest:
    source: Manifest = {"name": config_map}
    if items is not None:
        source["items"] = [{"key": key, "path": key} for key in items]
    return {"name": name, "configMap": source}
