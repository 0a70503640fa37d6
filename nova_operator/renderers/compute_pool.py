"""A NovaCompute pool's children: ``compute-pool.conf``, its immutable ConfigMap, the DaemonSet,
and the Nova's shared host-discovery Job the pool starts.

Pure (novacompute-crd.md §8, §9): a function of the NovaCompute and ``PoolInputs`` only.
Node membership lives entirely in the pod template's required node affinity: the pool
term (the selector, minus Conflict nodes) ORed with one hold term per Draining node.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from nova_operator import naming
from nova_operator.catalog import oslo_name
from nova_operator.digests import config_hash, keyed_digest
from nova_operator.models.common import STOP_MARGIN_SECONDS, ResourceRequirements
from nova_operator.models.nova import Nova
from nova_operator.models.novacompute import NOVACOMPUTE_REJECTED_EXTRA_CONFIG_KEYS, NovaCompute
from nova_operator.naming import CONFIG_BASE_LABEL
from nova_operator.renderers import oslo
from nova_operator.renderers.novaconf import (
    CONFIG_DIR,
    HTTPS_CA_DIR,
    HTTPS_CA_FILE,
    HTTPS_CA_SECTIONS,
    ConfigError,
    knows_barbican_cafile,
    serialize,
)
from nova_operator.renderers.pod_env import (
    Mounted,
    ca_bundle,
    config_volume,
    db_tls_volumes,
    https_ca_volume,
    manage_env,
    secret_config_env,
    secret_env,
    secret_volume,
)
from nova_operator.renderers.secrets import copy_secret
from nova_operator.renderers.stops import graceful_shutdown_timeout
from nova_operator.renderers.wait_for_chassis import SCRIPT as WAIT_FOR_CHASSIS
from nova_operator.renderers.workload import (
    OPENSTACK_GID,
    image_pull_secrets,
    job_pod_settings,
    memory_figure,
    plain,
    restricted_container_security_context,
)
from nova_operator.renderers.workload import resolve_resources as resolve_job_resources

__all__ = [
    "COMPUTE_CONFIG_HASH_ANNOTATION",
    "CONFIG_FILE",
    "DEFAULT_REPOSITORY",
    "DISCOVER_HOSTS",
    "HTTPS_CA_HASH_ANNOTATION",
    "OWNED_KEYS",
    "REPORTED_KEYS",
    "REQUIRED_CONTRACT_KEYS",
    "SECRET_CONFIG_HASH_ANNOTATION",
    "PoolInputs",
    "checked_ca_name",
    "checked_ca_secret",
    "config_base",
    "config_base_label",
    "config_map",
    "config_map_name",
    "contract_hash",
    "daemonset",
    "daemonset_name",
    "default_image",
    "discover_hosts_job",
    "discover_hosts_job_name",
    "labels",
    "node_affinity_terms",
    "overridden_owned_keys",
    "own_ca_source",
    "pool_conf",
    "pool_conf_sections",
    "pool_image",
    "pull_policy",
    "resolve_resources",
    "secret_config_name",
    "secret_config_secret",
    "selector_labels",
    "termination_grace",
]

Manifest = dict[str, Any]
Sections = dict[str, dict[str, str]]

CONFIG_FILE: Final = "compute-pool.conf"
DEFAULT_REPOSITORY: Final = "ghcr.io/c5c3/nova-compute"
COMPUTE_CONFIG_HASH_ANNOTATION: Final = "nova.openstack.c5c3.io/compute-config-hash"
SECRET_CONFIG_HASH_ANNOTATION: Final = "nova.openstack.c5c3.io/secret-config-hash"
HTTPS_CA_HASH_ANNOTATION: Final = "nova.openstack.c5c3.io/https-ca-hash"
REQUIRED_CONTRACT_KEYS: Final = ("nova-compute.conf", "transport_url", "password")
CONTRACT_MOUNT: Final = "/etc/nova/compute-config"
POOL_CONFIG_MOUNT: Final = "/etc/nova/compute-pool.conf.d"
DEFAULT_CPU_REQUEST: Final = "150m"
DEFAULT_MEMORY: Final = "768Mi"

NAME_LABEL: Final = "app.kubernetes.io/name"
INSTANCE_LABEL: Final = "app.kubernetes.io/instance"
MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
COMPONENT_LABEL: Final = "app.kubernetes.io/component"

#: ``[libvirt]`` keys the spec fields own: honored in extraConfig, but flagged (ExtraConfigHealthy).
REPORTED_KEYS: Final[tuple[tuple[str, str], ...]] = (
    ("libvirt", "virt_type"),
    ("libvirt", "cpu_mode"),
    ("libvirt", "cpu_models"),
    ("libvirt", "images_type"),
)
OWNED_KEYS: Final = frozenset(
    {(s, k) for s, k, _, _ in NOVACOMPUTE_REJECTED_EXTRA_CONFIG_KEYS} | set(REPORTED_KEYS)
)


@dataclass(frozen=True, slots=True)
class PoolInputs:
    """What a pass hands the DaemonSet renderer besides the NovaCompute."""

    image: str
    config_map: str
    contract_secret: str
    contract_hash: str
    excluded: frozenset[str] = field(default_factory=frozenset)  # Conflict nodes: NotIn
    keep_pods: frozenset[str] = field(default_factory=frozenset)  # Draining nodes: hold terms
    deleting: bool = False
    pull_policy: str = "Always"
    release: str = ""  # the Nova's installed release: the default image's, and its stop bound
    secret_config_secret: str = ""  # secret_config_name(cr) while spec.secretConfig is set
    secret_config_keys: tuple[str, ...] = ()  # its section.option keys
    secret_config_hash: str = ""  # keyed digest of their values (empty: no spec.secretConfig)
    https_ca_hash: str = ""  # SHA-256 of the pool's own spec.tls bundle (empty: no spec.tls)
    checked: bool = False  # --secret-ref-label: the pods mount checked_ca_name, never spec.tls's Secret


# --------------------------------------------------------------------------- names, labels


def labels(name: str) -> dict[str, str]:
    return {
        NAME_LABEL: "novacompute",
        INSTANCE_LABEL: name,
        MANAGED_BY_LABEL: "novacompute-operator",
        COMPONENT_LABEL: "nova-compute",
    }


def selector_labels(name: str) -> dict[str, str]:
    return {NAME_LABEL: "novacompute", INSTANCE_LABEL: name, COMPONENT_LABEL: "nova-compute"}


def daemonset_name(name: str) -> str:
    return f"{name}-nova-compute"


def secret_config_name(name: str) -> str:
    """The pool's derived ``spec.secretConfig`` Secret (``OS_<SECTION>__<OPTION>`` of its pods)."""
    return f"{daemonset_name(name)}-secret-config"


def secret_config_secret(pool: NovaCompute, data: Mapping[str, str]) -> Manifest:
    """``secret_config_name``: keys ``section.option``, values in oslo.config form (the caller's)."""
    name = pool.metadata.name or ""
    return plain(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {
                "name": secret_config_name(name),
                "namespace": pool.metadata.namespace,
                "labels": labels(name),
            },
            "data": {k: base64.b64encode(v.encode("utf-8")).decode("ascii") for k, v in sorted(data.items())},
        }
    )


def own_ca_source(pool: NovaCompute) -> Mounted | None:
    """The Secret of the pool's own ``spec.tls`` bundle and the key its pods take (None while unset)."""
    return ca_bundle(pool.spec.tls.ca_bundle_secret_ref) if pool.spec.tls is not None else None


def checked_ca_name(name: str) -> str:
    """``{name}-nova-compute-checked-https-ca``: with ``--secret-ref-label``, the pool's copy of its own
    ``spec.tls`` bundle that its pods mount, written only while the source carries the label (the
    Nova's copies are ``naming.checked_copy`` of the Nova's name; this one is of the DaemonSet's)."""
    return naming.checked_copy(daemonset_name(name), "https-ca")


def checked_ca_secret(pool: NovaCompute, data: Mapping[str, str]) -> Manifest:
    """``checked_ca_name``: ``data`` is ``pod_env.copied_data`` of ``own_ca_source`` (base64 as read)."""
    name = pool.metadata.name or ""
    return copy_secret(checked_ca_name(name), pool.metadata.namespace or "default", labels(name), data)


def config_base(name: str) -> str:
    return f"{name}-config"


def config_base_label(name: str) -> str:
    """The ``config-base`` label of the pool's ConfigMaps: ``{name}-config`` fitted to a label value
    (a NovaCompute name of 57 to 63 characters makes it longer than 63: a digest replaces the tail)."""
    return naming.label_value(config_base(name))


def config_map_name(name: str, data: Mapping[str, str]) -> str:
    return f"{config_base(name)}-{config_hash(data)}"


# --------------------------------------------------------------------------- compute-pool.conf


def overridden_owned_keys(extra_config: Mapping[str, Mapping[str, str]] | None) -> list[tuple[str, str]]:
    """Every owned key (§4.3, reported or rejected) that ``extra_config`` sets, sorted."""
    return sorted(
        (s, k) for s, opts in (extra_config or {}).items() for k in opts if oslo_name(s, k) in OWNED_KEYS
    )


def _own_trust(pool: NovaCompute, release: str) -> Sections:
    """The pool's own ``spec.tls``: ``cafile`` in every HTTPS section, over the contract fragment's."""
    if pool.spec.tls is None:
        return {}
    sections: Sections = {section: {"cafile": HTTPS_CA_FILE} for section in HTTPS_CA_SECTIONS}
    sections["barbican"] = {"verify_ssl_path": HTTPS_CA_FILE}
    if knows_barbican_cafile(release):
        sections["barbican"]["cafile"] = HTTPS_CA_FILE
    return sections


def pool_conf_sections(pool: NovaCompute, release: str = "") -> Sections:
    """The operator's keys (typed fields in oslo.config's literal form), then ``extraConfig`` over them.

    ``release`` (the Nova's ``spec.openStackRelease``) decides whether ``[barbican] cafile`` exists."""
    libvirt = pool.spec.libvirt
    typed: Sections = {
        "DEFAULT": {"compute_driver": "libvirt.LibvirtDriver", "state_path": "/var/lib/nova"},
        "libvirt": {
            "virt_type": libvirt.virt_type or "kvm",
            "connection_uri": "qemu:///system",
            "live_migration_scheme": "tls",
            "live_migration_with_native_tls": "true",
        },
        "os_vif_ovs": {"ovsdb_connection": "unix:/run/openvswitch/db.sock"},
        "oslo_concurrency": {"lock_path": "/var/lib/nova/tmp"},
        **_own_trust(pool, release),
    }
    if libvirt.cpu_mode:
        typed["libvirt"]["cpu_mode"] = libvirt.cpu_mode
        if libvirt.cpu_mode == "custom" and libvirt.cpu_models:
            typed["libvirt"]["cpu_models"] = ",".join(libvirt.cpu_models)
    if libvirt.images_type:
        typed["libvirt"]["images_type"] = libvirt.images_type
    try:
        sections = oslo.literal_sections(typed, what=CONFIG_FILE)
    except oslo.NotRepresentable as exc:
        raise ConfigError(str(exc)) from None
    # Never a wildcard: the pod is on the host network and consoles have no password. Meant
    # as oslo.config text: nova substitutes its own [DEFAULT] my_ip.
    sections["vnc"] = {"server_listen": "$my_ip"}
    for section, options in (pool.spec.extra_config or {}).items():
        sections.setdefault(section, {}).update(options)  # user values win, key by key
    return sections


def pool_conf(pool: NovaCompute, release: str = "") -> str:
    """The deterministic INI text (sorted sections, sorted keys, ``key = value``)."""
    return serialize(pool_conf_sections(pool, release), what=CONFIG_FILE)


def config_map(pool: NovaCompute, text: str) -> Manifest:
    """The immutable, content-addressed ConfigMap ``{cr}-config-<8 hex>`` (owner set by the caller)."""
    data = {CONFIG_FILE: text}
    name = pool.metadata.name or ""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": config_map_name(name, data),
            "namespace": pool.metadata.namespace,
            "labels": {**labels(name), CONFIG_BASE_LABEL: config_base_label(name)},
        },
        "data": data,
        "immutable": True,
    }


def _pod_annotations(inputs: PoolInputs) -> dict[str, str]:
    annotations = {COMPUTE_CONFIG_HASH_ANNOTATION: inputs.contract_hash}
    if inputs.secret_config_hash:
        annotations[SECRET_CONFIG_HASH_ANNOTATION] = inputs.secret_config_hash
    if inputs.https_ca_hash:
        annotations[HTTPS_CA_HASH_ANNOTATION] = inputs.https_ca_hash
    return annotations


def contract_hash(data: Mapping[str, bytes | str], key: bytes) -> str:
    """HMAC-SHA-256 hex, keyed with the Nova's ``{name}-digest-key``, over the contract Secret's
    decoded data: keys sorted, ``key=value\n`` each (spec novacompute-crd §8 step 7 names a plain
    SHA-256: keyed here, so the pod annotation changes on a rotation but cannot be used to test
    guesses of the credentials it covers)."""
    preimage = b"".join(
        k.encode() + b"=" + (v.encode() if isinstance(v, str) else v) + b"\n" for k, v in sorted(data.items())
    )
    return keyed_digest(preimage, key)


# --------------------------------------------------------------------------- image, resources


def default_image(installed_release: str) -> str:
    """The image of a pool without ``spec.image``: the Nova's *installed* release, not its target."""
    return f"{DEFAULT_REPOSITORY}:{installed_release}"


def pool_image(pool: NovaCompute, installed_release: str) -> str:
    """The image the pool runs: ``spec.image``'s repository with its tag or digest, else the default."""
    image = pool.spec.image
    if image is None or image.repository is None:
        return default_image(installed_release)
    if image.digest:
        return f"{image.repository}@{image.digest}"
    return f"{image.repository}:{image.tag}"


def pull_policy(image: str, *, policy: str | None = None, operator_default: str | None = None) -> str:
    """The CR's own ``spec.image.pullPolicy``, else the operator-wide default if configured, else
    Always for a tag and IfNotPresent for a digest.

    Unconfirmed upstream (§9.7): a digest-addressed image gets IfNotPresent, because the
    digest pins the content and a pull can change nothing.
    """
    if policy:
        return policy
    if operator_default:
        return operator_default
    return "IfNotPresent" if "@sha256:" in image else "Always"


def resolve_resources(resources: ResourceRequirements | None) -> Manifest:
    """§9.6: CPU named nowhere -> request 150m; memory named nowhere -> request = limit = 768Mi."""
    return resolve_job_resources(resources, DEFAULT_MEMORY, cpu=DEFAULT_CPU_REQUEST)


# --------------------------------------------------------------------------- graceful stop


def termination_grace(pool: NovaCompute, release: str) -> int:
    """The pod's grace period: ``spec.terminationGracePeriodSeconds``, else nova's bound plus the margin."""
    own = pool.spec.termination_grace_period_seconds
    if own is not None:
        return own
    return graceful_shutdown_timeout(release, pool.spec.extra_config) + STOP_MARGIN_SECONDS


# --------------------------------------------------------------------------- DaemonSet


def node_affinity_terms(
    selector: Mapping[str, str], *, excluded: Iterable[str], keep_pods: Iterable[str], deleting: bool
) -> list[Manifest]:
    """The ORed node selector terms (§9.2); empty only while deleting with no Draining node."""
    terms: list[Manifest] = []
    if not deleting:
        term: Manifest = {
            "matchExpressions": [
                {"key": k, "operator": "In", "values": [selector[k]]} for k in sorted(selector)
            ]
        }
        fields = [{"key": "metadata.name", "operator": "NotIn", "values": [n]} for n in sorted(set(excluded))]
        if fields:
            term["matchFields"] = fields
        terms.append(term)
    for node in sorted(set(keep_pods)):
        terms.append({"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]})
    return terms


def _host_path(name: str, path: str, type_: str | None = "DirectoryOrCreate") -> Manifest:
    source: Manifest = {"path": path}
    if type_:
        source["type"] = type_
    return {"name": name, "hostPath": source}


def _field_env(name: str, path: str) -> Manifest:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def _own_ca(pool: NovaCompute, *, checked: bool) -> tuple[list[Manifest], list[Manifest]]:
    """The pool's own ``spec.tls`` bundle as ``ca.crt`` under ``HTTPS_CA_DIR`` (nothing while unset):
    from its Secret, or (``checked``, with ``--secret-ref-label``) from the pool's copy of it."""
    source = own_ca_source(pool)
    if source is None:
        return [], []
    copy = checked_ca_name(pool.metadata.name or "") if checked else None
    return secret_volume(source, "https-ca", HTTPS_CA_DIR, copy=copy)


def _volumes(inputs: PoolInputs) -> list[Manifest]:
    return [
        {"name": "compute-config", "secret": {"secretName": inputs.contract_secret}},
        {"name": "pool-config", "configMap": {"name": inputs.config_map}},
        _host_path("run-libvirt", "/run/libvirt"),
        _host_path("var-lib-nova", "/var/lib/nova"),
        _host_path("run-openvswitch", "/run/openvswitch"),
        _host_path("dev", "/dev", None),
        _host_path("sys-fs-cgroup", "/sys/fs/cgroup", None),
        _host_path("lib-modules", "/lib/modules", None),
        _host_path("etc-iscsi", "/etc/iscsi"),
        _host_path("etc-nvme", "/etc/nvme"),
        _host_path("etc-multipath", "/etc/multipath"),
        _host_path("etc-multipath-conf", "/etc/multipath.conf", "FileOrCreate"),
        {"name": "tmp", "emptyDir": {}},
    ]


def _compute_mounts() -> list[Manifest]:
    return [
        {"name": "compute-config", "mountPath": CONTRACT_MOUNT, "readOnly": True},
        {"name": "pool-config", "mountPath": POOL_CONFIG_MOUNT, "readOnly": True},
        {"name": "run-libvirt", "mountPath": "/run/libvirt"},
        {"name": "var-lib-nova", "mountPath": "/var/lib/nova", "mountPropagation": "Bidirectional"},
        {"name": "run-openvswitch", "mountPath": "/run/openvswitch"},
        {"name": "dev", "mountPath": "/dev"},
        {"name": "sys-fs-cgroup", "mountPath": "/sys/fs/cgroup", "readOnly": True},
        {"name": "lib-modules", "mountPath": "/lib/modules", "readOnly": True},
        {"name": "etc-iscsi", "mountPath": "/etc/iscsi"},
        {"name": "etc-nvme", "mountPath": "/etc/nvme"},
        {"name": "etc-multipath", "mountPath": "/etc/multipath"},
        {"name": "etc-multipath-conf", "mountPath": "/etc/multipath.conf"},
        {"name": "tmp", "mountPath": "/tmp"},
    ]


def _containers(inputs: PoolInputs, resources: Manifest) -> tuple[list[Manifest], list[Manifest]]:
    common = {"image": inputs.image, "imagePullPolicy": inputs.pull_policy, "resources": resources}
    create_dir = {
        "name": "create-instances-dir",
        **common,
        "command": ["mkdir", "-p", "-m", "0755", "/var/lib/nova/instances"],
        "securityContext": {
            "runAsUser": 0,
            "runAsGroup": 0,
            "runAsNonRoot": False,
            "privileged": False,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "seccompProfile": {"type": "RuntimeDefault"},
            "capabilities": {"drop": ["ALL"], "add": ["DAC_OVERRIDE"]},
        },
        "volumeMounts": [{"name": "var-lib-nova", "mountPath": "/var/lib/nova"}],
    }
    wait_for_chassis = {
        "name": "wait-for-chassis",
        **common,
        "command": ["python3", "-c", WAIT_FOR_CHASSIS],
        "env": [{"name": "OVSDB_SOCKET", "value": "/run/openvswitch/db.sock"}],
        "securityContext": {
            "runAsUser": 42424,
            "runAsGroup": 42424,
            "runAsNonRoot": True,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [{"name": "run-openvswitch", "mountPath": "/run/openvswitch"}],
    }
    secret = inputs.contract_secret
    env = [
        _field_env("OS_DEFAULT__HOST", "spec.nodeName"),
        _field_env("OS_DEFAULT__MY_IP", "status.hostIP"),
        _field_env("OS_VNC__SERVER_PROXYCLIENT_ADDRESS", "status.hostIP"),
        _field_env("OS_LIBVIRT__LIVE_MIGRATION_INBOUND_ADDR", "status.hostIP"),
        secret_env("OS_DEFAULT__TRANSPORT_URL", secret, "transport_url"),
        *(
            secret_env(f"OS_{section.upper()}__PASSWORD", secret, "password")
            for section in ("keystone_authtoken", "service_user", "placement", "neutron", "cinder")
        ),
        *secret_config_env(inputs.secret_config_secret, inputs.secret_config_keys),
    ]
    compute = {
        "name": "nova-compute",
        **common,
        "command": [
            "nova-compute",
            "--config-file",
            f"{CONTRACT_MOUNT}/nova-compute.conf",
            "--config-dir",
            POOL_CONFIG_MOUNT,
        ],
        "env": env,
        "securityContext": {
            "privileged": True,
            "allowPrivilegeEscalation": True,
            "readOnlyRootFilesystem": True,
            "runAsUser": 0,
            "runAsNonRoot": False,
        },
        "volumeMounts": _compute_mounts(),
    }
    return [create_dir, wait_for_chassis], [compute]


def _update_strategy(pool: NovaCompute) -> Manifest:
    strategy = pool.spec.update_strategy
    if strategy.type == "OnDelete":
        return {"type": "OnDelete"}
    max_unavailable = strategy.max_unavailable if strategy.max_unavailable is not None else 1
    return {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": max_unavailable}}


def daemonset(pool: NovaCompute, inputs: PoolInputs) -> Manifest | None:
    """``{cr}-nova-compute``, or None when no term is left (deleting, no Draining node): delete it."""
    terms = node_affinity_terms(
        pool.spec.node_selector,
        excluded=inputs.excluded,
        keep_pods=inputs.keep_pods,
        deleting=inputs.deleting,
    )
    if not terms:
        return None
    name = pool.metadata.name or ""
    init, main = _containers(inputs, resolve_resources(pool.spec.resources))
    own_volumes, own_mounts = _own_ca(pool, checked=inputs.checked)
    main[0]["volumeMounts"] = [*main[0]["volumeMounts"], *own_mounts]
    pod_spec: Manifest = {
        "automountServiceAccountToken": False,  # nova-compute never talks to the Kubernetes API
        "hostNetwork": True,
        "dnsPolicy": "ClusterFirstWithHostNet",
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "terminationGracePeriodSeconds": termination_grace(pool, inputs.release),
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
        },
        "initContainers": init,
        "containers": main,
        "volumes": [*_volumes(inputs), *own_volumes],
        **image_pull_secrets(pool.spec.image.pull_secrets if pool.spec.image is not None else None),
    }
    if pool.spec.tolerations:
        pod_spec["tolerations"] = [
            t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in pool.spec.tolerations
        ]
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": daemonset_name(name),
            "namespace": pool.metadata.namespace,
            "labels": labels(name),
        },
        "spec": {
            "selector": {"matchLabels": selector_labels(name)},
            "updateStrategy": _update_strategy(pool),
            "template": {
                "metadata": {
                    "labels": labels(name),
                    "annotations": _pod_annotations(inputs),
                },
                "spec": pod_spec,
            },
        },
    }


# --------------------------------------------------------------------------- host discovery (§15)

DISCOVER_HOSTS: Final = "discover-hosts"
_DISCOVER_SUFFIX: Final = "-discover-hosts"
DISCOVER_BACKOFF_LIMIT: Final = 0
DISCOVER_ACTIVE_DEADLINE: Final = 300
DISCOVER_TTL: Final = 300


def discover_hosts_job_name(nova: str) -> str:
    """``{nova}-discover-hosts``, or a hashed short form when that exceeds 63 characters."""
    name = f"{nova}{_DISCOVER_SUFFIX}"
    if len(name) <= 63:
        return name
    head = nova[: 63 - len(_DISCOVER_SUFFIX) - 9].rstrip("-.")
    return f"{head}-{hashlib.sha256(nova.encode()).hexdigest()[:8]}{_DISCOVER_SUFFIX}"


def discover_hosts_job(
    nova: Nova, *, image: str, config_map: str, pull_policy: str, checked: bool = False
) -> dict[str, Any]:
    """The Nova's host discovery Job (§15): plain ``discover_hosts --verbose``, the API's image and config;
    ``checked`` (``--secret-ref-label``): the Nova's label-checked copies of its TLS Secrets mounted."""
    name = nova.metadata.name or ""
    labels = naming.labels(name, DISCOVER_HOSTS)
    placement, resources = job_pod_settings(nova)
    tls_volumes, tls_mounts = db_tls_volumes(nova, checked=checked)
    https_volumes, https_mounts = https_ca_volume(nova, checked=checked)
    container = {
        "name": DISCOVER_HOSTS,
        "image": image,
        "imagePullPolicy": pull_policy,
        "command": ["nova-manage", "--config-dir", CONFIG_DIR, "cell_v2", "discover_hosts", "--verbose"],
        "env": manage_env(nova),
        "resources": resolve_job_resources(resources, memory_figure(1)),
        "securityContext": restricted_container_security_context(),
        "volumeMounts": [
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
            *tls_mounts,
            *https_mounts,
        ],
    }
    return plain(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": discover_hosts_job_name(name),
                "namespace": nova.metadata.namespace,
                "labels": labels,
            },
            "spec": {
                "backoffLimit": DISCOVER_BACKOFF_LIMIT,
                "activeDeadlineSeconds": DISCOVER_ACTIVE_DEADLINE,
                "ttlSecondsAfterFinished": DISCOVER_TTL,
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "automountServiceAccountToken": False,  # nova-manage needs no Kubernetes API
                        "restartPolicy": "Never",
                        "securityContext": {"fsGroup": OPENSTACK_GID},
                        "containers": [container],
                        "volumes": [
                            config_volume(config_map),
                            {"name": "tmp", "emptyDir": {}},
                            *tls_volumes,
                            *https_volumes,
                        ],
                        **placement,
                        **image_pull_secrets(nova.spec.image.pull_secrets),
                    },
                },
            },
        }
    )
