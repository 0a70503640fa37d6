"""The ``NovaCompute`` kind: nova-compute on one node pool, joined to one Nova.

Every default is a schema default (``libvirt: {virtType: kvm}``, ``updateStrategy:
{type: RollingUpdate}``); the image, ``maxUnavailable = 1`` and resources are resolved at
reconcile time and never written back. The upstream webhook's checks are CEL rules here,
except the label grammar of ``nodeSelector`` (a pydantic validator) and the extraConfig
option catalog (checked by the reconciler).
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field, field_validator

from nova_operator.models._schema import CRDModel, Rule, Schema
from nova_operator.models.common import (
    DIGEST,
    REPOSITORY,
    TAG,
    ExtraConfigSection,
    HTTPSTLSSpec,
    ImagePullSecrets,
    IntOrString,
    NonEmptyLabelMap,
    PullPolicy,
    ResourceRequirements,
    SecretConfigSpec,
    SubdomainName,
    Tolerations,
    check_label_map,
    extra_config_shape_rules,
    rejected_deprecated_name_rules,
    rejected_key_rule,
    secret_options_rule,
)
from nova_operator.models.meta import Conditions, Int32, Int64, ObjectMeta

API_VERSION: Final = "nova.openstack.c5c3.io/v1alpha1"
OFFBOARDING_TAINT = "kvm.cloud.sap/offboarding"

_CONTRACT = "the compute contract"
_HOST_IP = "status.hostIP (downward API)"
_LIVE_MIGRATION = "the operator computes the live-migration transport from the node's TLS setup"

# (section, key, owner, impact): extraConfig keys of compute-pool.conf refused at admission.
NOVACOMPUTE_REJECTED_EXTRA_CONFIG_KEYS: tuple[tuple[str, str, str, str], ...] = (
    ("DEFAULT", "host", "spec.nodeName (downward API)", "the service host must equal the node name"),
    ("DEFAULT", "my_ip", _HOST_IP, "it must be the node's own address"),
    (
        "DEFAULT",
        "transport_url",
        _CONTRACT,
        "a file value would copy the broker credentials into a ConfigMap",
    ),
    ("DEFAULT", "state_path", "the /var/lib/nova host mount", "instances live under the mounted path"),
    ("oslo_concurrency", "lock_path", "the /var/lib/nova host mount", "locks must be shared on the host"),
    ("libvirt", "connection_uri", "the /run/libvirt host mount", "nova-compute talks to the node's libvirt"),
    ("libvirt", "live_migration_scheme", "operator-computed", _LIVE_MIGRATION),
    ("libvirt", "live_migration_with_native_tls", "operator-computed", _LIVE_MIGRATION),
    ("libvirt", "live_migration_uri", "operator-computed", _LIVE_MIGRATION),
    ("libvirt", "live_migration_tunnelled", "operator-computed", _LIVE_MIGRATION),
    ("libvirt", "live_migration_inbound_addr", _HOST_IP, "migrations must arrive at the node's own address"),
    ("os_vif_ovs", "ovsdb_connection", "the /run/openvswitch host mount", "os-vif talks to the node's OVS"),
    ("vnc", "server_proxyclient_address", _HOST_IP, "the console proxy must reach the node's own address"),
    *(
        (
            section,
            "password",
            _CONTRACT,
            f"it is injected as OS_{section.upper()}__PASSWORD; a file value would copy the service-user "
            "password into a ConfigMap",
        )
        for section in ("keystone_authtoken", "service_user", "placement", "neutron", "cinder")
    ),
)

NovaComputeExtraConfig = Annotated[
    dict[str, ExtraConfigSection],
    Field(max_length=32),
    *extra_config_shape_rules(),
    *(rejected_key_rule(*entry) for entry in NOVACOMPUTE_REJECTED_EXTRA_CONFIG_KEYS),
    *(
        rule
        for entry in NOVACOMPUTE_REJECTED_EXTRA_CONFIG_KEYS
        for rule in rejected_deprecated_name_rules(*entry)
    ),
    secret_options_rule((s, k) for s, k, _, _ in NOVACOMPUTE_REJECTED_EXTRA_CONFIG_KEYS),
]


class NovaRef(CRDModel):
    """The Nova in the pool's own namespace (a Nova's name is a DNS-1123 subdomain)."""

    name: SubdomainName
    """Name of the Nova, in the pool's own namespace."""


class NovaComputeLibvirtSpec(CRDModel):
    __crd_rules__ = (
        Rule(
            "(has(self.cpuMode) && self.cpuMode == 'custom') == "
            "(has(self.cpuModels) && size(self.cpuModels) > 0)",
            "cpuModels is required when cpuMode is custom and must be empty otherwise",
            field_path=".cpuModels",
        ),
    )

    virt_type: Literal["kvm", "qemu"] = "kvm"
    """[libvirt] virt_type: kvm or qemu. Default: kvm."""
    cpu_mode: Literal["host-model", "host-passthrough", "custom", "none"] | None = None
    """[libvirt] cpu_mode: host-model, host-passthrough, custom or none. Unset: not rendered."""
    cpu_models: (
        Annotated[
            list[Annotated[str, Field(max_length=128, pattern=r"^[A-Za-z0-9_.-]+$")]], Field(max_length=32)
        ]
        | None
    ) = None
    """[libvirt] cpu_models; required when cpuMode is custom and empty otherwise."""
    images_type: Literal["default", "qcow2", "raw", "flat"] | None = None
    """[libvirt] images_type: default, qcow2, raw or flat. Unset: not rendered."""


class NovaComputeUpdateStrategy(CRDModel):
    __crd_rules__ = (
        Rule(
            "!has(self.maxUnavailable) || self.type == 'RollingUpdate'",
            "maxUnavailable applies to RollingUpdate only",
            field_path=".maxUnavailable",
        ),
        Rule(
            "!has(self.maxUnavailable) || type(self.maxUnavailable) == int || "
            "string(self.maxUnavailable).matches('^[0-9]+%$')",
            'maxUnavailable must be an integer or a percentage such as "25%"',
            field_path=".maxUnavailable",
        ),
        Rule(
            "!has(self.maxUnavailable) || "
            "(type(self.maxUnavailable) == int ? int(self.maxUnavailable) >= 1 : "
            "!string(self.maxUnavailable).matches('^0+%$'))",
            "maxUnavailable must resolve to at least 1 for RollingUpdate",
            field_path=".maxUnavailable",
        ),
    )

    type: Literal["RollingUpdate", "OnDelete"] = "RollingUpdate"
    """RollingUpdate (default) or OnDelete (a pod is replaced only when someone deletes it)."""
    max_unavailable: Annotated[IntOrString, Schema(max_length=8)] | None = None
    """Nodes whose pod may be down at once during a RollingUpdate: a number or a percentage such as 25%.
    Default: 1.
    """

    @field_validator("max_unavailable")
    @classmethod
    def _short(cls, value: int | str | None) -> int | str | None:
        if isinstance(value, str) and len(value) > 8:
            raise ValueError('maxUnavailable must be an integer or a percentage such as "25%"')
        return value


class NovaComputeImageSpec(CRDModel):
    """The pool's image: a repository is optional, so pull settings can be set on the default image.

    ``ImageSpec`` (the Nova's) requires a repository; a pool's default image follows the Nova's
    installed release, which the pool cannot name in advance. Without a repository the pool runs
    that default, and a tag or digest would have nothing to apply to.
    """

    __crd_rules__ = (
        Rule(
            "has(self.repository) || (!has(self.tag) && !has(self.digest))",
            "image.tag and image.digest need image.repository: without a repository the pool runs "
            "ghcr.io/c5c3/nova-compute at the Nova's installed release, which no tag or digest may replace",
        ),
        Rule(
            "!has(self.repository) || has(self.tag) != has(self.digest)",
            "exactly one of image.tag or image.digest must be set with image.repository",
        ),
    )

    repository: REPOSITORY | None = None
    """OCI repository of the nova-compute image, optionally with a registry host and port. Unset: the default
    image ghcr.io/c5c3/nova-compute:<status.installedRelease of the Nova>, and tag and digest must be unset.
    """
    tag: TAG | None = None
    """Image tag; only with repository, and exactly one of tag and digest."""
    digest: DIGEST | None = None
    """Image digest (sha256:<64 hex>) that pins the image; only with repository, and exactly one of tag and
    digest.
    """
    pull_secrets: ImagePullSecrets | None = None
    """Secrets with the registry's credentials, rendered as the imagePullSecrets of the pool's DaemonSet
    pods (the Nova's spec.image.pullSecrets are not inherited). At most 16, each named once.
    """
    pull_policy: PullPolicy | None = None
    """imagePullPolicy of the pool's containers: Always, IfNotPresent or Never. Unset: the operator's
    --default-image-pull-policy, else Always for a tag and IfNotPresent for a digest.
    """


# extraConfig [DEFAULT] graceful_shutdown_timeout as a number, or -1 when unset or not a plain integer
_OWN_GRACEFUL = (
    "(has(self.extraConfig) && 'DEFAULT' in self.extraConfig && "
    "'graceful_shutdown_timeout' in self.extraConfig['DEFAULT'] && "
    "self.extraConfig['DEFAULT']['graceful_shutdown_timeout'].trim().matches('^[0-9]{1,9}$') ? "
    "int(self.extraConfig['DEFAULT']['graceful_shutdown_timeout'].trim()) : -1)"
)

_TOLERATES_OFFBOARDING = (
    "(has(t.tolerationSeconds) || "
    "(has(t.effect) && t.effect != '' && t.effect != 'NoExecute') || "
    "!((has(t.key) && t.key == '" + OFFBOARDING_TAINT + "') || "
    "((!has(t.key) || t.key == '') && has(t.operator) && t.operator == 'Exists')))"
)


class NovaComputeSpec(CRDModel):
    __crd_rules__ = (
        Rule("self.novaRef.name == oldSelf.novaRef.name", "novaRef is immutable", field_path=".novaRef.name"),
        Rule(
            f"!has(self.tolerations) || self.tolerations.all(t, {_TOLERATES_OFFBOARDING})",
            f"a toleration tolerates {OFFBOARDING_TAINT}:NoExecute; "
            "openstack-hypervisor-operator deletes the compute service only after every agent pod "
            "on the node is gone, and a nova-compute that stays "
            "re-registers it",
        ),
        Rule(
            f"!has(self.terminationGracePeriodSeconds) || {_OWN_GRACEFUL} <= 0 || "
            f"self.terminationGracePeriodSeconds > {_OWN_GRACEFUL}",
            "terminationGracePeriodSeconds must exceed extraConfig [DEFAULT] graceful_shutdown_timeout: the "
            "kubelet would kill nova-compute before nova's own stop ends",
            field_path=".terminationGracePeriodSeconds",
        ),
    )

    nova_ref: NovaRef
    """The Nova in this namespace the pool joins. Immutable."""
    node_selector: NonEmptyLabelMap
    """Label pairs that pick the pool's nodes; all must match and the map must not be empty. A node that stops
    matching is drained.
    """
    tolerations: Tolerations | None = None
    """Tolerations copied into the pod template; none may tolerate the offboarding taint
    kvm.cloud.sap/offboarding:NoExecute indefinitely.
    """
    image: NovaComputeImageSpec | None = None
    """The nova-compute image and how it is pulled. Default: the image
    ghcr.io/c5c3/nova-compute:<status.installedRelease of the Nova>, pulled by the operator's default policy.
    """
    libvirt: Annotated[NovaComputeLibvirtSpec, Schema(default={})] = Field(
        default_factory=NovaComputeLibvirtSpec
    )
    """The [libvirt] tuning keys."""
    update_strategy: Annotated[NovaComputeUpdateStrategy, Schema(default={})] = Field(
        default_factory=NovaComputeUpdateStrategy
    )
    """How fast the DaemonSet rolls out. Default: RollingUpdate, one node at a time."""
    resources: ResourceRequirements | None = None
    """Requests and limits of the pod's containers; unset resources are resolved by the operator and never
    written back.
    """
    termination_grace_period_seconds: Annotated[Int64, Field(ge=10)] | None = None
    """Seconds a nova-compute pod gets to stop after SIGTERM (at least 10) before the kubelet kills it. Unset:
    nova's own bound on the stop, [DEFAULT] graceful_shutdown_timeout (from extraConfig, else the default of
    the Nova's installed release), plus 20 s; must exceed a graceful_shutdown_timeout set in extraConfig.
    """
    tls: HTTPSTLSSpec | None = None
    """Trust for this pool's outgoing HTTPS: a CA bundle its pods mount and name as cafile in every HTTPS
    section of compute-pool.conf, over the bundle of the compute contract (the Nova's spec.tls). Unset: the
    contract's bundle when the Nova sets one, else the system's CAs. The operator's own calls for the pool
    trust the Nova's bundle.
    """
    extra_config: NovaComputeExtraConfig | None = None
    """INI overrides (section -> key -> value) merged over compute-pool.conf. Keys the operator owns are
    refused, and so are options nova marks secret: set those in secretConfig.
    """
    secret_config: SecretConfigSpec | None = None
    """Options nova marks secret, from a Secret (never rendered into a ConfigMap)."""

    _labels = field_validator("node_selector")(check_label_map)


class NovaComputeNodeStatus(CRDModel):
    name: SubdomainName
    """Node name, also the host of its compute service."""
    phase: Literal["Pending", "Active", "Draining", "Releasing", "Conflict"]
    """Pending, Active, Draining, Releasing or Conflict."""
    zone: str | None = None
    """The node's topology.kubernetes.io/zone label."""
    service_id: str | None = Field(default=None, alias="serviceID")
    """UUID of the nova-compute service of the node."""
    service_status: str | None = None
    """enabled or disabled, as Nova reports the service."""
    service_state: str | None = None
    """up or down, as Nova reports the service."""
    disabled_reason: str | None = None
    """Nova's disabled_reason of the service."""
    instances: Int32 | None = None
    """Servers still on the host, while the node is Draining."""
    conflicts_with: str | None = None
    """On a Conflict entry: the other pool that holds the node."""


class NovaComputeStatus(CRDModel):
    conditions: Conditions | None = None
    """Ready and one condition per reconcile step; each carries observedGeneration."""
    observed_generation: Int64 | None = None
    """Stamped with metadata.generation on every status write."""
    installed_image: str | None = None
    """The image the DaemonSet runs, stamped once it is fully rolled out."""
    desired_number_scheduled: Int32 | None = None
    """Nodes that should run the pod, copied from the DaemonSet status."""
    number_ready: Int32 | None = None
    """Nodes whose pod is ready, copied from the DaemonSet status."""
    nodes: (
        Annotated[
            list[NovaComputeNodeStatus],
            Schema(x_kubernetes_list_type="map", x_kubernetes_list_map_keys=["name"]),
        ]
        | None
    ) = None
    """The per-node ledger, sorted by name; an entry stays after the node leaves the pool until its compute
    service is deleted.
    """


class NovaCompute(CRDModel):
    """A ``NovaCompute`` object as the API server stores it."""

    __crd_rules__ = (
        Rule(
            "oldSelf.hasValue() || self.metadata.name.size() <= 63",
            field_path=".metadata.name",
            optional_old_self=True,
            message="name must be at most 63 characters: "
            "it is the app.kubernetes.io/instance label value of every child",
        ),
    )

    api_version: Literal["nova.openstack.c5c3.io/v1alpha1"] = API_VERSION
    """Versioned schema of this object: nova.openstack.c5c3.io/v1alpha1."""
    kind: Literal["NovaCompute"] = "NovaCompute"
    """Kind of this object: NovaCompute."""
    metadata: ObjectMeta
    spec: NovaComputeSpec
    """Desired state of the node pool."""
    status: NovaComputeStatus | None = None
    """Observed state, written by the operator."""
