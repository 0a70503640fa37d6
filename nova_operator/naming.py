"""Names of the children of a Nova, the standard label set and the selectors."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from enum import StrEnum
from typing import Final, Literal

__all__ = [
    "CHECKED_COPIES",
    "CHILD_SUFFIXES",
    "CONFIG_BASE_LABEL",
    "SERVICE_BINARIES",
    "CheckedCopy",
    "Component",
    "api_endpoint",
    "cell0_object_name",
    "cell0_schema",
    "checked_copy",
    "common_labels",
    "config_base",
    "config_base_label",
    "config_map_name",
    "db_archive_name",
    "deployment_name",
    "label_value",
    "labels",
    "selector_labels",
]

NAME_LABEL = "app.kubernetes.io/name"
INSTANCE_LABEL = "app.kubernetes.io/instance"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
COMPONENT_LABEL = "app.kubernetes.io/component"
MANAGED_BY = "nova-operator"
# The label that groups a Nova's content-addressed ConfigMaps (spec nova-crd §8.1, §16: the
# upstream key, kept as the one stable key of this implementation).
CONFIG_BASE_LABEL = "cobaltcore.c5c3.io/config-base"


class Component(StrEnum):
    API = "api"
    METADATA = "metadata"
    SCHEDULER = "scheduler"
    CONDUCTOR = "conductor"
    NOVNCPROXY = "novncproxy"
    COMPUTE_CONFIG = "compute-config"
    REMOTE_COMPUTE_CONFIG = "remote-compute-config"
    DB_ARCHIVE = "db-archive"


def digest_key_secret(name: str) -> str:
    """The Nova's HMAC key of the digests in annotations (Secret key ``key``); the pools read it too."""
    return f"{name}-digest-key"


def secret_config_secret(name: str) -> str:
    """The derived Secret of a Nova's ``spec.secretConfig`` (keys ``section.option``, oslo.config form)."""
    return f"{name}-secret-config"


CheckedCopy = Literal[
    "api-db-tls", "cell-db-tls", "messaging-ca", "messaging-client-tls", "cache-tls", "https-ca"
]
"""What a label-checked copy holds: a database block's TLS files, the message bus's CA bundle or
client certificate, the cache's TLS files, the CA bundle for HTTPS (``spec.tls``)."""
CHECKED_COPIES: Final[tuple[CheckedCopy, ...]] = (
    "api-db-tls",
    "cell-db-tls",
    "messaging-ca",
    "messaging-client-tls",
    "cache-tls",
    "https-ca",
)


def checked_copy(name: str, which: CheckedCopy) -> str:
    """``{name}-checked-<which>``: with ``--secret-ref-label``, the copy of a Secret the pods mount by
    name, written only while the source carries the label (``reconcilers.nova.checked_copies``)."""
    return f"{name}-checked-{which}"


def common_labels(name: str) -> dict[str, str]:
    """name + instance + managed-by: what every child carries (and what the NetworkPolicy selects)."""
    return {NAME_LABEL: "nova", INSTANCE_LABEL: name, MANAGED_BY_LABEL: MANAGED_BY}


def labels(name: str, component: Component | str) -> dict[str, str]:
    return {**common_labels(name), COMPONENT_LABEL: str(component)}


def selector_labels(name: str, component: Component | str) -> dict[str, str]:
    """A Deployment's selector: name + instance + component."""
    return {NAME_LABEL: "nova", INSTANCE_LABEL: name, COMPONENT_LABEL: str(component)}


_SUFFIX = {
    Component.API: "",
    Component.METADATA: "-metadata",
    Component.SCHEDULER: "-scheduler",
    Component.CONDUCTOR: "-conductor",
    Component.NOVNCPROXY: "-novncproxy",
}


def deployment_name(name: str, component: Component) -> str:
    return f"{name}{_SUFFIX[component]}"


SERVICE_BINARIES: Final[Mapping[str, Component]] = {
    "nova-conductor": Component.CONDUCTOR,
    "nova-scheduler": Component.SCHEDULER,
    "nova-osapi_compute": Component.API,
    "nova-metadata": Component.METADATA,
}
"""The binary each control-plane role registers its service record under (host: the pod's hostname).
The console proxy registers none; nova-compute rows are the pools'. Nova's service list leaves out the
two API binaries (they report no heartbeat), so in practice only the first two are ever listed."""


def api_endpoint(name: str, namespace: str, gateway_hostname: str | None) -> str:
    """``status.endpoint``: ``https://<gateway hostname>/`` with a gateway, else the in-cluster URL."""
    if gateway_hostname:
        return f"https://{gateway_hostname}/"
    return f"http://{name}.{namespace}.svc.cluster.local:8774"


def config_base(name: str, base: str = "config") -> str:
    """``{name}-config``: the prefix of a Nova's config ConfigMaps (``{name}-policy``: its policy ones)."""
    return f"{name}-{base}"


LABEL_VALUE_MAX = 63
"""Kubernetes' bound on a label value (and its shape: alphanumeric at both ends)."""
_LABEL_HASH = 10


def label_value(value: str) -> str:
    """``value`` when it fits a label value, else its first characters and a digest of the whole.

    Deterministic (the same value always maps to the same label, so selectors written with it
    keep matching) and at most 63 characters: ``<first 52>-<10 hex of sha256(value)>``. Values
    of 63 characters or fewer are kept as they are.
    """
    if len(value) <= LABEL_VALUE_MAX:
        return value
    digest = hashlib.sha256(value.encode()).hexdigest()[:_LABEL_HASH]
    return f"{value[: LABEL_VALUE_MAX - _LABEL_HASH - 1]}-{digest}"


def config_base_label(name: str, base: str = "config") -> str:
    """The ``config-base`` label value of ``name``'s ConfigMaps: ``{name}-config`` (or
    ``{name}-policy``), fitted to 63."""
    return label_value(config_base(name, base))


def config_map_name(name: str, content_hash: str, base: str = "config") -> str:
    return f"{name}-{base}-{content_hash}"


def _short(name: str, keep: int) -> str:
    head = name[:keep].rstrip("-.")
    return f"{head}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def db_archive_name(name: str) -> str:
    """``{name}-db-archive``; a name over 41 characters is shortened to fit the 52-character CronJob cap."""
    if len(name) <= 41:
        return f"{name}-db-archive"
    return f"{_short(name, 32)}-db-archive"


CELL0_PLACEHOLDER: Final = "-<database>-cell0"
CONFIG_HASH_PLACEHOLDER: Final = "-config-<hash>"
CHILD_SUFFIXES: Final[Mapping[str, tuple[str, ...]]] = {
    "Deployment": ("", "-metadata", "-scheduler", "-conductor", "-novncproxy"),
    "Service": ("", "-metadata", "-novncproxy"),
    "PodDisruptionBudget": ("",),
    "HorizontalPodAutoscaler": ("",),
    "NetworkPolicy": ("", "-novncproxy"),
    "HTTPRoute": ("", "-metadata", "-console"),
    "ConfigMap": (CONFIG_HASH_PLACEHOLDER,),
    "Secret": (
        "-api-db-connection",
        "-db-connection",
        "-transport-url",
        "-compute-config",
        "-remote-compute-config",
        "-oslo-credentials",
        "-digest-key",
        *(f"-checked-{which}" for which in CHECKED_COPIES),
    ),
    "Job": ("-db-sync", "-db-expand", "-db-migrate", "-db-contract", "-discover-hosts"),
    "CronJob": ("-db-archive",),
    "Database": ("-api", "", CELL0_PLACEHOLDER),
    "User": ("-api", ""),
    "Grant": ("-api", "", CELL0_PLACEHOLDER),
}
"""Every child of a Nova ``{name}`` by kind, as ``{name}<suffix>`` (spec nova-crd §13 and the additions
``-oslo-credentials``, ``-digest-key``, the ``-checked-*`` copies of ``--secret-ref-label``;
``-discover-hosts`` is the pools' Job, owned by the Nova).
Two Novas share a child name when one suffix of a kind ends in another: the Nova name refusals of
``models.nova.REFUSED_NAME_SUFFIXES`` cover every such pair but the cell0 one, which the ownership
check catches (``nova_operator.ownership``)."""


def cell0_schema(database: str) -> str:
    return f"{database}_cell0"


def cell0_object_name(name: str, database: str) -> str:
    """``{name}-<database>_cell0`` lowercased with ``_`` turned into ``-`` (e.g. ``nova-nova-cell0``)."""
    return f"{name}-{cell0_schema(database).lower().replace('_', '-')}"
