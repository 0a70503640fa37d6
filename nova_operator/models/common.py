"""Spec blocks shared by Nova and NovaCompute (and by several Nova fields).

Each CEL rule sits on the type it constrains, so a block used in several places carries
its rules everywhere it appears. String, list and map bounds exist so that every rule's
estimated cost stays within the API server's budget; they are generous on purpose.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Any, Final, Literal

from pydantic import Field, field_validator

from nova_operator import catalog
from nova_operator.models._schema import CRDModel, K8sType, Rule, Schema, SchemaFrom
from nova_operator.models.meta import Int32, Int64

DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# A key of a Secret's or ConfigMap's data (apimachinery IsConfigMapKey: [-._a-zA-Z0-9]+, but
# not "." and not starting with ".."), as one regular expression (RE2 has no look-ahead).
DATA_KEY = r"^(\.[-_a-zA-Z0-9]|[-_a-zA-Z0-9])[-._a-zA-Z0-9]*$"

# Names that end up in a request path or in another object's reference. Both the API server
# (schema pattern) and the models enforce them; ``kube.paths`` refuses a bad path segment again.
SubdomainName = Annotated[str, Field(min_length=1, max_length=253, pattern=DNS1123_SUBDOMAIN)]
LabelName = Annotated[str, Field(min_length=1, max_length=63, pattern=DNS1123_LABEL)]
# priorityClassName: empty is the Kubernetes "no class" (the pod spec field allows it).
PriorityClassName = Annotated[str, Field(max_length=253, pattern=r"^$|" + DNS1123_SUBDOMAIN)]
DataKey = Annotated[str, Field(min_length=1, max_length=253, pattern=DATA_KEY)]
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
NO_NEWLINE = r"^[^\n\r]*$"

NEWLINE_MESSAGE = (
    "value must not contain a newline or carriage return: "
    "it is rendered verbatim into nova.conf and nova-compute.conf"
)

# Free-form Kubernetes objects the operator copies verbatim into what it renders
# (NetworkPolicyEgressRule). The API server validates them again when the rendered object is
# created; here they are kept as opaque objects.
Opaque = Annotated[dict[str, Any], Schema(x_kubernetes_preserve_unknown_fields=True)]
# core/v1 Affinity with upstream's schema (pruned and type-checked by the API server, documented
# by `kubectl explain`); Python keeps the dict the renderers copy into the pod spec.
Affinity = Annotated[dict[str, Any], K8sType("affinity")]

IntOrString = Annotated[int | str, Schema(x_kubernetes_int_or_string=True)]
Quantity = Annotated[
    int | str, Schema(x_kubernetes_int_or_string=True, pattern=QUANTITY_PATTERN, max_length=64)
]

SingleLine = Annotated[
    str,
    Field(max_length=255),
    Rule("!self.contains('\\n') && !self.contains('\\r')", NEWLINE_MESSAGE),
]

# An http(s) URL with a host. The pattern refuses other schemes; the two rules refuse what
# does not parse and what parses without a host (the webhook's URL-shape checks).
HttpURL = Annotated[
    str,
    Field(min_length=1, max_length=2048, pattern=r"^https?://"),
    Rule("isURL(self)", "must be a valid URL"),
    Rule("!isURL(self) || url(self).getHost() != ''", "URL must include a host"),
]


def check_label_map(labels: dict[str, str] | None) -> dict[str, str] | None:
    """Kubernetes label-key and label-value grammar (CEL cannot check map keys cheaply)."""
    if labels is None:
        return None
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        if prefix and (len(prefix) > 253 or not re.fullmatch(DNS1123_SUBDOMAIN, prefix)):
            raise ValueError(f"label key {key!r}: prefix must be a DNS-1123 subdomain")
        if not name or len(name) > 63 or not _LABEL_NAME.fullmatch(name):
            raise ValueError(f"label key {key!r}: name must be a qualified name of at most 63 characters")
        if len(value) > 63 or (value and not _LABEL_NAME.fullmatch(value)):
            raise ValueError(f"label value {value!r} for {key!r} is not a valid label value")
    return labels


_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


def _qualified(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not re.fullmatch(DNS1123_SUBDOMAIN, prefix)):
        return False
    return bool(name) and len(name) <= 63 and _LABEL_NAME.fullmatch(name) is not None


# --- references ----------------------------------------------------------------------------


class SecretRefSpec(CRDModel):
    """A Secret in the CR's namespace, and optionally one data key of it."""

    name: SubdomainName
    """Name of the Secret, in the same namespace as this object."""
    key: DataKey | None = None
    """Data key of the Secret to read; each use documents its default."""


class PasswordSecretRef(SecretRefSpec):
    key: DataKey | None = "password"
    """Data key holding the password. Default: password."""


class SharedSecretRef(SecretRefSpec):
    key: DataKey | None = "shared_secret"
    """Data key holding the metadata proxy shared secret. Default: shared_secret."""


class TransportURLSecretRef(SecretRefSpec):
    key: DataKey | None = "transport_url"
    """Data key holding the rabbit:// transport URL. Default: transport_url."""


class SecretConfigRef(CRDModel):
    name: SubdomainName
    """Name of the Secret, in the same namespace as this object."""


class SecretConfigSpec(CRDModel):
    """Options nova marks secret (passwords, keys, URLs with credentials), kept out of every ConfigMap."""

    secret_ref: SecretConfigRef
    """A Secret whose data keys are section.option (for example database.slave_connection or
    vault.root_token_id) and whose values are the option values, as written (never expanded by
    oslo.config). Each key must be an option of the release's catalog and not one the operator sets;
    the values reach the pods as OS_<SECTION>__<OPTION> environment variables from a derived Secret,
    and a change rolls them.
    """


class LocalObjectReference(CRDModel):
    """core/v1 LocalObjectReference: an atomic map whose ``name`` defaults to ``""``.

    Every ``clusterRef`` names a MariaDB, memcached or RabbitmqCluster in the CR's namespace
    whose Service carries the same name (``{name}.{namespace}.svc``), so the name must be a
    DNS-1123 label; the schema default ``""`` is kept (the contract) and refused by the pattern.
    """

    __crd_schema__ = Schema(x_kubernetes_map_type="atomic")
    __crd_rules__ = (
        Rule(
            "self.name != ''",
            "clusterRef.name must be set: it names an object in the CR's namespace",
            field_path=".name",
            reason="FieldValueRequired",
        ),
    )

    # The schema admits the default "" (a schema default must validate) and the rule above
    # refuses it; the model refuses it directly.
    name: Annotated[
        str, Field(max_length=63, pattern=DNS1123_LABEL), Schema(pattern=r"^$|" + DNS1123_LABEL)
    ] = ""
    """Name of the referenced object in the same namespace (its Service has the same name). Required."""


class NameRef(CRDModel):
    """A bare ``{name}`` reference used in status (an object in the CR's own namespace)."""

    name: SubdomainName
    """Name of the object, in the same namespace as this object."""


# --- image ---------------------------------------------------------------------------------


PullPolicy = Literal["Always", "IfNotPresent", "Never"]
MAX_PULL_SECRETS: Final = 16


class ImagePullSecretRef(CRDModel):
    """core/v1 LocalObjectReference, as a pod's ``imagePullSecrets`` items are."""

    name: SubdomainName
    """Name of a Secret in this namespace with registry credentials (type kubernetes.io/dockerconfigjson).
    """


# A list-map keyed by name: the API server refuses the same Secret twice.
ImagePullSecrets = Annotated[
    list[ImagePullSecretRef],
    Field(max_length=MAX_PULL_SECRETS),
    Schema(x_kubernetes_list_type="map", x_kubernetes_list_map_keys=["name"]),
]
REPOSITORY = Annotated[str, Field(min_length=1, max_length=512, pattern=r"^[a-z0-9]+([._:/-][a-z0-9]+)*$")]
TAG = Annotated[str, Field(pattern=r"^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$")]
DIGEST = Annotated[str, Field(pattern=r"^sha256:[a-f0-9]{64}$")]


class ImageSpec(CRDModel):
    __crd_rules__ = (
        Rule("has(self.tag) != has(self.digest)", "exactly one of image.tag or image.digest must be set"),
    )

    repository: REPOSITORY
    """OCI repository of the image, optionally with a registry host and port (for example ghcr.io/c5c3/nova).
    """
    tag: TAG | None = None
    """Image tag. Exactly one of tag and digest must be set."""
    digest: DIGEST | None = None
    """Image digest (sha256:<64 hex>) that pins the image; used instead of the tag. Exactly one of tag and
    digest must be set.
    """
    pull_secrets: ImagePullSecrets | None = None
    """Secrets with the registry's credentials, rendered as imagePullSecrets of every pod the Nova runs: the
    five Deployments, the db-sync and upgrade Jobs, the db-archive CronJob and the host discovery Job. At most
    16, each named once.
    """
    pull_policy: PullPolicy | None = None
    """imagePullPolicy of every container of those pods: Always, IfNotPresent or Never. Unset: none is
    rendered (the cluster's default: Always for a :latest or untagged image, else IfNotPresent), except on
    the host discovery Job, which takes the operator's --default-image-pull-policy, else Always for a tag
    and IfNotPresent for a digest.
    """

    @property
    def reference(self) -> str:
        """``repository@digest`` when a digest is set, else ``repository:tag``."""
        if self.digest:
            return f"{self.repository}@{self.digest}"
        return f"{self.repository}:{self.tag}"


# --- database ------------------------------------------------------------------------------


class DatabaseTLSSpec(CRDModel):
    mode: Literal["disabled", "prefer", "require", "verify-ca", "verify-full"] | None = None
    """TLS mode of the database connection. Unset or disabled: no TLS. prefer and require: TLS with the client
    certificate, the server's certificate not verified. verify-ca: the server's certificate must chain to the
    caBundleSecretRef CA; its name is not checked. verify-full: the CA and the name nova dials (host, or the
    clusterRef Service name). The client (PyMySQL) starts TLS only when the server offers it, in every mode:
    to refuse plaintext, require TLS on the server (REQUIRE SSL or X509 for the user; for a clusterRef
    MariaDB, its spec.tls.required).
    """
    ca_bundle_secret_ref: SecretRefSpec
    """Secret whose ca.crt key holds the CA bundle that verifies the database server."""
    client_cert_secret_ref: SecretRefSpec
    """Secret whose tls.crt and tls.key keys hold the client certificate and key (mutual TLS)."""

    @property
    def enabled(self) -> bool:
        return self.mode not in (None, "disabled")


class DatabaseSpec(CRDModel):
    __crd_rules__ = (
        Rule("has(self.clusterRef) != has(self.host)", "exactly one of clusterRef or host must be set"),
        Rule(
            "!has(self.credentialsMode) || self.credentialsMode != 'Dynamic' || has(self.clusterRef)",
            "credentialsMode Dynamic requires clusterRef (managed mode)",
        ),
    )

    cluster_ref: LocalObjectReference | None = None
    """Managed mode: a mariadb-operator MariaDB in this namespace; the operator creates the schema, user and
    grant. Exactly one of clusterRef and host must be set.
    """
    host: Annotated[str, Field(min_length=1, max_length=253, pattern=r"^[a-zA-Z0-9._:-]+$")] | None = None
    """Brownfield mode: host name or address of an existing database server. Exactly one of clusterRef and
    host must be set.
    """
    port: Annotated[Int32, Field(ge=1, le=65535)] | None = None
    """TCP port of the database server (both modes). Default: 3306."""
    database: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_]+$")]
    """Name of the schema (letters, digits and underscores, at most 64 characters). Immutable."""
    secret_ref: SecretRefSpec
    """Secret with the database credentials in the data keys username and password (the key field is ignored).
    """
    credentials_mode: Literal["Static", "Dynamic"] | None = None
    """Static (default): the credentials Secret is fixed. Dynamic: an external engine issues short-lived users
    and the operator creates no MariaDB User or Grant; needs clusterRef.
    """
    tls: DatabaseTLSSpec | None = None
    """TLS of the database connection; unset means no TLS."""
    replicas: Annotated[Int32, Field(ge=1)] | None = None
    """Not used by the Nova operator (read by the ControlPlane operator)."""
    storage_size: Annotated[str, Field(pattern=r"^[0-9]+(Mi|Gi|Ti)$")] | None = None
    """Not used by the Nova operator (read by the ControlPlane operator), for example 10Gi."""

    @property
    def effective_port(self) -> int:
        return self.port or 3306

    @property
    def effective_credentials_mode(self) -> str:
        return self.credentials_mode or "Static"


# --- cache and messaging -------------------------------------------------------------------


#: The oslo.cache backends whose ``[cache] tls_enabled`` works (oslo.cache refuses the option with
#: any other backend at the first use of the cache).
CACHE_TLS_BACKENDS: Final = (
    "dogpile.cache.pymemcache",
    "dogpile.cache.bmemcache",
    "oslo_cache.memcache_pool",
)


class CacheTLSSpec(CRDModel):
    ca_bundle_secret_ref: SecretRefSpec
    """Secret holding the CA bundle that verifies the memcached servers (key default: ca.crt). The servers'
    certificates must name the host each entry of servers (or the clusterRef Service) dials.
    """
    client_cert_secret_ref: SecretRefSpec | None = None
    """Secret whose tls.crt and tls.key keys hold the client certificate and key nova presents to memcached
    (mutual TLS; the key field is ignored). Unset: no client certificate.
    """


class CacheSpec(CRDModel):
    __crd_rules__ = (
        Rule(
            "has(self.clusterRef) != (has(self.servers) && size(self.servers) > 0)",
            "exactly one of clusterRef or servers must be set",
        ),
        Rule(
            "!has(self.clusterRef) || "
            "!(self.clusterRef.name.contains('\\n') || self.clusterRef.name.contains('\\r'))",
            "clusterRef.name must not contain a newline or carriage return",
        ),
        Rule(
            "!has(self.tls) || !has(self.backend) || self.backend in " + repr(list(CACHE_TLS_BACKENDS)),
            "tls needs a cache backend with TLS: " + ", ".join(CACHE_TLS_BACKENDS),
            field_path=".backend",
        ),
    )

    cluster_ref: LocalObjectReference | None = None
    """Managed memcached in this namespace; the servers are {name}:11211. Exactly one of clusterRef and
    servers must be set.
    """
    servers: (
        Annotated[list[Annotated[str, Field(max_length=512, pattern=NO_NEWLINE)]], Field(max_length=64)]
        | None
    ) = None
    """Brownfield memcached servers as host:port, joined with commas into the configuration. Exactly one of
    clusterRef and servers must be set.
    """
    backend: Annotated[str, Field(min_length=1, max_length=255)] = "dogpile.cache.pymemcache"
    """oslo.cache backend of the [cache] section. Default: dogpile.cache.pymemcache."""
    tls: CacheTLSSpec | None = None
    """When set, nova's [cache] region talks to memcached over TLS only ([cache] tls_enabled), verified
    against this CA bundle, with the client certificate when one is named. The Keystone token middleware
    then keeps its token cache in each process: its memcached TLS client needs python-binary-memcached,
    which the image contract does not carry. Needs a backend with TLS: dogpile.cache.pymemcache (the
    default), dogpile.cache.bmemcache or oslo_cache.memcache_pool.
    """
    replicas: Annotated[Int32, Field(ge=1)] | None = None
    """Not used by the Nova operator (read by the ControlPlane operator)."""


class MessagingTLSSpec(CRDModel):
    ca_bundle_secret_ref: SecretRefSpec
    """Secret holding the broker's CA bundle; the key defaults to ca.crt."""
    client_cert_secret_ref: SecretRefSpec | None = None
    """Secret whose tls.crt and tls.key keys hold the client certificate and key every nova process
    presents to the broker (mutual TLS; [oslo_messaging_rabbit] ssl_cert_file and ssl_key_file, and the
    tls.crt and tls.key keys of the compute contract; the key field is ignored). Unset: no client
    certificate.
    """


class CABundleSecretRef(SecretRefSpec):
    key: DataKey | None = "ca.crt"
    """Data key holding the PEM bundle. Default: ca.crt."""


class HTTPSTLSSpec(CRDModel):
    """Trust for every outgoing HTTPS connection (Keystone, Placement, Glance, Neutron, Cinder, Barbican)."""

    ca_bundle_secret_ref: CABundleSecretRef
    """Secret whose key (default ca.crt) holds the PEM CA bundle that verifies the HTTPS endpoints, in place
    of the system's CAs: named as cafile in [keystone_authtoken], [service_user], [placement], [glance],
    [neutron], [cinder] and [barbican] (verify_ssl_path too). A changed bundle rolls the pods once.
    """


class MessagingSpec(CRDModel):
    __crd_rules__ = (
        Rule(
            "has(self.clusterRef) != has(self.secretRef)",
            "exactly one of clusterRef or secretRef must be set",
        ),
    )

    cluster_ref: LocalObjectReference | None = None
    """Managed mode: a RabbitmqCluster (rabbitmq.com/v1beta1) in this namespace. Exactly one of clusterRef and
    secretRef must be set.
    """
    secret_ref: SecretRefSpec | None = None
    """Brownfield mode: a Secret holding a complete rabbit:// transport URL (key default: transport_url).
    Exactly one of clusterRef and secretRef must be set.
    """
    tls: MessagingTLSSpec | None = None
    """When set, the message bus uses TLS, verified against this CA bundle."""
    replicas: Annotated[Int32, Field(ge=1)] | None = None
    """Not used by the Nova operator (read by the ControlPlane operator)."""


# --- pods ----------------------------------------------------------------------------------

ResourceList = Annotated[dict[str, Quantity], Field(max_length=8)]


class ResourceRequirements(CRDModel):
    """core/v1 ResourceRequirements (without ``claims``)."""

    __crd_rules__ = (
        Rule(
            "!has(self.requests) || !has(self.limits) || self.requests.all(r, !(r in self.limits) || "
            "quantity(string(self.requests[r])).compareTo(quantity(string(self.limits[r]))) <= 0)",
            "a resource request must not exceed its limit",
        ),
    )

    limits: ResourceList | None = None
    """Maximum amount of each resource (cpu, memory, ...) a container may use, as Kubernetes quantities."""
    requests: ResourceList | None = None
    """Amount of each resource the scheduler reserves for a container, as Kubernetes quantities; must not
    exceed the limit.
    """


class Toleration(CRDModel):
    """core/v1 Toleration."""

    __crd_rules__ = (
        Rule(
            "(has(self.key) && self.key != '') || (has(self.operator) && self.operator == 'Exists')",
            "operator must be Exists when key is empty",
        ),
    )

    key: Annotated[str, Field(max_length=317)] | None = None
    """Taint key the toleration matches; empty matches every key and then requires operator Exists."""
    operator: Literal["Exists", "Equal"] | None = None
    """Equal (default: the taint's value must equal value) or Exists (any value)."""
    value: Annotated[str, Field(max_length=63)] | None = None
    """Taint value to match when the operator is Equal."""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    """Taint effect to match: NoSchedule, PreferNoSchedule or NoExecute; empty matches every effect."""
    toleration_seconds: Int64 | None = None
    """For NoExecute taints: seconds the pod stays bound after the taint appears; unset means forever."""


Tolerations = Annotated[list[Toleration], Field(max_length=32)]
# Label and annotation grammar as the API server checks it on the children (apimachinery
# IsQualifiedName, IsValidLabelValue): values by schema pattern, map keys by CEL (a schema
# cannot constrain map keys). The pydantic validator ``check_label_map`` says the same.
QUALIFIED_NAME_RE = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"
LABEL_KEY_MESSAGE = (
    "label key must be a qualified name: an optional DNS-1123 subdomain prefix of at most 253 "
    "characters and '/', then at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
)
ANNOTATION_KEY_MESSAGE = LABEL_KEY_MESSAGE.replace("label key", "annotation key")


def _qualified_keys(message: str) -> Rule:
    return Rule(
        f"self.all(k, k.size() <= 317 && (!k.contains('/') || k.indexOf('/') <= 253) "
        f"&& k.matches('{QUALIFIED_NAME_RE}'))",
        message,
    )


LabelValue = Annotated[str, Field(max_length=63, pattern=LABEL_VALUE_PATTERN)]
LabelMap = Annotated[dict[str, LabelValue], Field(max_length=32), _qualified_keys(LABEL_KEY_MESSAGE)]
NonEmptyLabelMap = Annotated[
    dict[str, LabelValue], Field(min_length=1, max_length=32), _qualified_keys(LABEL_KEY_MESSAGE)
]
NodeSelector = LabelMap
AnnotationMap = Annotated[
    dict[str, Annotated[str, Field(max_length=4096)]],
    Field(max_length=64),
    _qualified_keys(ANNOTATION_KEY_MESSAGE),
]


class LabelSelectorRequirement(CRDModel):
    key: Annotated[str, Field(max_length=317)]
    """Label key the requirement applies to."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    """Relation of the key to the values: In, NotIn, Exists or DoesNotExist."""
    values: Annotated[list[Annotated[str, Field(max_length=63)]], Field(max_length=64)] | None = None
    """Label values; non-empty for In and NotIn, empty for Exists and DoesNotExist."""


class LabelSelector(CRDModel):
    __crd_schema__ = Schema(x_kubernetes_map_type="atomic")

    match_labels: LabelMap | None = None
    """Label pairs that must all match (each is an In requirement with one value)."""
    match_expressions: Annotated[list[LabelSelectorRequirement], Field(max_length=32)] | None = None
    """Label requirements that must all match, ANDed with matchLabels."""


class RollingUpdateDeployment(CRDModel):
    max_unavailable: IntOrString | None = None
    """Pods that may be unavailable during a rollout, as a number or a percentage of replicas."""
    max_surge: IntOrString | None = None
    """Pods that may be created above replicas during a rollout, as a number or a percentage."""


class DeploymentStrategy(CRDModel):
    __crd_rules__ = (
        Rule(
            "!has(self.rollingUpdate) || !has(self.type) || self.type != 'Recreate'",
            "rollingUpdate may not be set when strategy type is Recreate",
        ),
    )

    type: Literal["RollingUpdate", "Recreate"] | None = None
    """RollingUpdate (replace pods gradually) or Recreate (stop all pods first)."""
    rolling_update: RollingUpdateDeployment | None = None
    """Pace of a RollingUpdate; not allowed with Recreate."""


class TopologySpreadConstraint(CRDModel):
    """core/v1 TopologySpreadConstraint."""

    max_skew: Annotated[Int32, Field(ge=1)]
    """Largest allowed difference in matching pods between any two topology domains (at least 1)."""
    topology_key: Annotated[str, Field(min_length=1, max_length=317)]
    """Node label key whose values define the topology domains, for example topology.kubernetes.io/zone."""
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"]
    """DoNotSchedule keeps a pod pending rather than exceed maxSkew; ScheduleAnyway only prefers domains that
    reduce the skew.
    """
    label_selector: LabelSelector | None = None
    """Selects the pods counted in each domain; must equal this Deployment's pod selector."""
    min_domains: Annotated[Int32, Field(ge=1)] | None = None
    """Minimum number of eligible domains (DoNotSchedule only); fewer domains count as zero pods."""
    node_affinity_policy: Literal["Honor", "Ignore"] | None = None
    """Honor (default) counts only nodes matching the pod's node affinity and selector; Ignore counts all
    nodes.
    """
    node_taints_policy: Literal["Honor", "Ignore"] | None = None
    """Honor counts only nodes whose taints the pod tolerates; Ignore (default) counts all nodes."""
    match_label_keys: Annotated[list[Annotated[str, Field(max_length=317)]], Field(max_length=16)] | None = (
        None
    )
    """Pod label keys whose values from the incoming pod are added to labelSelector."""


class ProbeTiming(CRDModel):
    """When and how often one probe runs; the handler (command, path, port) stays the operator's.

    Each unset field keeps the operator's default for that probe (the field of the role names it).
    """

    initial_delay_seconds: Annotated[Int32, Field(ge=0, le=3600)] | None = None
    """Seconds after the container starts before the probe first runs (0 to 3600)."""
    period_seconds: Annotated[Int32, Field(ge=1, le=3600)] | None = None
    """Seconds between two runs of the probe (1 to 3600)."""
    timeout_seconds: Annotated[Int32, Field(ge=1, le=3600)] | None = None
    """Seconds after which one run counts as failed (1 to 3600)."""
    failure_threshold: Annotated[Int32, Field(ge=1, le=1000)] | None = None
    """Failed runs in a row after which the probe fails (1 to 1000): the pod leaves its Service
    (readiness), or the container is restarted (liveness, startup).
    """


class ReadinessProbeTiming(ProbeTiming):
    """A readiness probe's timing; only it may ask for several successes (Kubernetes wants 1 elsewhere)."""

    success_threshold: Annotated[Int32, Field(ge=1, le=1000)] | None = None
    """Successful runs in a row after a failure before the pod is ready again (1 to 1000)."""


class ReadinessProbeSpec(CRDModel):
    """The probes of a role that has only a readiness probe (scheduler, conductor, console proxy)."""

    readiness: ReadinessProbeTiming | None = None
    """Timing of the readiness probe."""


class ServerProbeSpec(ReadinessProbeSpec):
    """The probes of an HTTP API role (compute API, metadata API): startup, liveness and readiness."""

    startup: ProbeTiming | None = None
    """Timing of the startup probe, which holds the other two until uWSGI answers. Default: period 10 s,
    timeout 8 s, failure threshold 30 (up to 300 s to start).
    """
    liveness: ProbeTiming | None = None
    """Timing of the liveness probe. Default: initial delay 15 s, period 20 s, timeout 10 s, failure
    threshold 3.
    """
    readiness: ReadinessProbeTiming | None = None
    """Timing of the readiness probe. Default: initial delay 10 s, period 15 s, timeout 10 s, failure
    threshold 3, success threshold 1.
    """


DRAIN_WINDOW_RULE = Rule(
    "(has(self.preStopSleepSeconds) ? self.preStopSleepSeconds : 5) < "
    "(has(self.terminationGracePeriodSeconds) ? self.terminationGracePeriodSeconds : 30)",
    "preStopSleepSeconds must be strictly less than terminationGracePeriodSeconds",
)


class DeploymentSpec(CRDModel):
    """Every ``*.deployment`` block. Unset grace/preStop resolve to 30 s / 5 s at render time."""

    __crd_rules__ = (DRAIN_WINDOW_RULE,)

    replicas: Annotated[Int32, Field(ge=1)] = 3
    """Number of pods. Default: 3 for the API; 1 for metadata, scheduler, conductor and the console proxy when
    their block is absent.
    """
    resources: ResourceRequirements | None = None
    """Requests and limits of the containers. Unset resources are resolved at render time (70m CPU request
    without limit; a memory figure sized from processes and threads as request and limit) and never written
    back.
    """
    termination_grace_period_seconds: Annotated[Int64, Field(ge=10)] | None = None
    """Seconds a pod gets to stop after SIGTERM (at least 10). Default: 30."""
    pre_stop_sleep_seconds: Annotated[Int64, Field(ge=0)] | None = None
    """Seconds the preStop hook sleeps so endpoints drain before the process stops; must be less than
    terminationGracePeriodSeconds. Default: 5.
    """
    strategy: DeploymentStrategy | None = None
    """Rollout strategy. Default: RollingUpdate with maxUnavailable 0 and maxSurge 1."""
    topology_spread_constraints: (
        Annotated[list[Annotated[dict[str, Any], SchemaFrom(TopologySpreadConstraint)]], Field(max_length=16)]
        | None
    ) = None
    """How pods spread across topology domains. Unset: spread by zone and by hostname (maxSkew 1,
    ScheduleAnyway); an empty list turns spreading off.
    """
    priority_class_name: PriorityClassName | None = None
    """PriorityClass of the pods; it must exist. Empty means no class."""
    node_selector: NodeSelector | None = None
    """Node labels the pods' nodes must carry (all pairs must match)."""
    tolerations: Tolerations | None = None
    """Taints the pods tolerate."""
    affinity: Affinity | None = None
    """Node affinity and pod (anti-)affinity scheduling rules of the pods."""
    probes: ReadinessProbeSpec | None = None
    """Timing of the container's readiness probe; each unset field keeps the default. Default of the console
    proxy: the kubelet's (period 10 s, timeout 1 s, failure threshold 3).
    """

    _labels = field_validator("node_selector")(check_label_map)

    @property
    def effective_termination_grace_period_seconds(self) -> int:
        return 30 if self.termination_grace_period_seconds is None else self.termination_grace_period_seconds

    @property
    def effective_pre_stop_sleep_seconds(self) -> int:
        return 5 if self.pre_stop_sleep_seconds is None else self.pre_stop_sleep_seconds


STOP_MARGIN_SECONDS: Final = 20
"""What a grace period adds to nova's own bound on a stop ([DEFAULT] graceful_shutdown_timeout, after
which oslo.service ends the process): the exit itself. 2026.1's 180 s plus this is the scheduler's and
the conductor's 200 s; a pool's grace is its release's bound plus this."""
BUS_GRACE_SECONDS: Final = 200


class BusDeploymentSpec(DeploymentSpec):
    """Scheduler and conductor: an unset grace period is 200 s (covers the RPC server drain).

    A schema default cannot follow the release; it covers the longest bound of every shipped
    release plus ``STOP_MARGIN_SECONDS`` (a unit test holds it to the catalogs).
    """

    termination_grace_period_seconds: Annotated[Int64, Field(ge=10)] | None = BUS_GRACE_SECONDS
    """Seconds a pod gets to stop after SIGTERM (at least 10). Default: 200, which covers the drain of the RPC
    server.
    """
    probes: ReadinessProbeSpec | None = None
    """Timing of the readiness probe (nova-amqp-ready: a connection to the broker); each unset field keeps the
    default: period 5 s, timeout 5 s, failure threshold 1.
    """


class ServerDeploymentSpec(DeploymentSpec):
    """The compute API and the metadata API: an HTTP server with startup, liveness and readiness probes."""

    probes: ServerProbeSpec | None = None
    """Timing of the startup, liveness and readiness probes (HTTP GET / on the server's port); each unset
    field keeps the default.
    """


class UWSGISpec(CRDModel):
    __crd_rules__ = (
        Rule(
            "!has(self.httpKeepAliveTimeout) || !has(self.httpKeepAlive) || self.httpKeepAlive",
            "httpKeepAliveTimeout may only be set when httpKeepAlive is true",
        ),
    )

    processes: Annotated[Int32, Field(ge=1)] = 2
    """Number of uWSGI worker processes. Default: 2."""
    threads: Annotated[Int32, Field(ge=1)] = 1
    """Threads per uWSGI worker process. Default: 1."""
    http_keep_alive: bool = True
    """Whether uWSGI keeps HTTP connections open (--http-keepalive). Default: true."""
    harakiri: Annotated[Int32, Field(ge=1)] | None = None
    """Seconds after which uWSGI kills a stuck request (--harakiri); must be less than
    terminationGracePeriodSeconds - preStopSleepSeconds. Unset: no limit.
    """
    http_keep_alive_timeout: Annotated[Int32, Field(ge=1)] | None = None
    """Seconds an idle kept-alive connection stays open, rendered as --http-keepalive=N (uWSGI 2.0 has no
    --http-keepalive-timeout; 1 leaves uWSGI's own idle timeout); only with httpKeepAlive true.
    """


# --- routing, scaling, policy, logging -----------------------------------------------------

HOSTNAME_PATTERN = r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


class GatewayParentRef(CRDModel):
    name: SubdomainName
    """Name of an existing Gateway (gateway.networking.k8s.io)."""
    namespace: LabelName | None = None
    """Namespace of the Gateway. Default: this object's namespace."""
    section_name: SubdomainName | None = None
    """Listener of the Gateway to attach to. Default: every listener."""


class GatewaySpec(CRDModel):
    """An HTTPRoute in front of one Service. ``hostname`` is a DNS name (no newline can reach nova.conf)."""

    hostname: Annotated[str, Field(min_length=1, max_length=253, pattern=HOSTNAME_PATTERN)]
    """Host name the HTTPRoute matches (a DNS name, optionally with a leading *.)."""
    parent_ref: GatewayParentRef
    """The Gateway the HTTPRoute attaches to."""
    path: Annotated[str, Field(max_length=1024)] | None = None
    """Path prefix the HTTPRoute matches. Default: /."""
    annotations: AnnotationMap | None = None
    """Annotations copied onto the HTTPRoute."""

    @field_validator("annotations")
    @classmethod
    def _annotation_keys(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for key in value or {}:
            if not _qualified(key):
                raise ValueError(f"annotation key {key!r}: {ANNOTATION_KEY_MESSAGE}")
        return value


class HPAScalingPolicy(CRDModel):
    type: Literal["Pods", "Percent"]
    """Pods (change by a number of pods) or Percent (by a share of the current replicas)."""
    value: Annotated[Int32, Field(ge=1)]
    """Amount of change the policy allows per period (at least 1)."""
    period_seconds: Annotated[Int32, Field(ge=1, le=1800)]
    """Window in seconds over which the policy holds (1 to 1800)."""


class HPAScalingRules(CRDModel):
    stabilization_window_seconds: Annotated[Int32, Field(ge=0, le=3600)] | None = None
    """Seconds of past recommendations considered before scaling (0 to 3600)."""
    select_policy: Literal["Max", "Min", "Disabled"] | None = None
    """Which policy wins when several apply: Max (default), Min, or Disabled (no scaling in this direction).
    """
    policies: Annotated[list[HPAScalingPolicy], Field(max_length=16)] | None = None
    """Limits on how fast replicas may change."""


class HPABehavior(CRDModel):
    """autoscaling/v2 HorizontalPodAutoscalerBehavior, copied verbatim onto the HPA."""

    scale_up: HPAScalingRules | None = None
    """Rules for scaling up."""
    scale_down: HPAScalingRules | None = None
    """Rules for scaling down."""


class AutoscalingSpec(CRDModel):
    __crd_rules__ = (
        Rule(
            "has(self.targetCPUUtilization) || has(self.targetMemoryUtilization)",
            "at least one of targetCPUUtilization or targetMemoryUtilization must be set",
        ),
        Rule(
            "!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",
            "minReplicas must not exceed maxReplicas",
        ),
    )

    min_replicas: Annotated[Int32, Field(ge=1)] | None = None
    """Lower bound of the HorizontalPodAutoscaler, also the PodDisruptionBudget's. Default:
    spec.api.deployment.replicas.
    """
    max_replicas: Annotated[Int32, Field(ge=1)]
    """Upper bound of the HorizontalPodAutoscaler."""
    target_cpu_utilization: Annotated[Int32, Field(ge=1)] | None = Field(
        default=None, alias="targetCPUUtilization"
    )
    """Target average CPU use, in percent of the API pods' CPU request."""
    target_memory_utilization: Annotated[Int32, Field(ge=1)] | None = Field(
        default=None, alias="targetMemoryUtilization"
    )
    """Target average memory use, in percent of the API pods' memory request."""
    behavior: Annotated[dict[str, Any], SchemaFrom(HPABehavior)] | None = None
    """Scale-up and scale-down behavior, copied onto the HorizontalPodAutoscaler."""


class NetworkPolicyIngressSource(CRDModel):
    namespace_selector: LabelSelector
    """Namespaces allowed to reach the pods."""
    pod_selector: LabelSelector | None = None
    """Pods allowed to reach the pods, within the selected namespaces. Default: all pods there."""


class NetworkPolicySpec(CRDModel):
    __crd_rules__ = (Rule("size(self.ingress) > 0", "at least one ingress source must be specified"),)

    ingress: Annotated[list[NetworkPolicyIngressSource], Field(max_length=32)]
    """Sources allowed to reach the Nova pods; at least one."""
    additional_egress: Annotated[list[Opaque], Field(max_length=32)] | None = None
    """NetworkPolicy egress rules appended after the ones the operator derives."""


LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


class LoggingSpec(CRDModel):
    format: Literal["text", "json"] = "text"
    """text (oslo.log default) or json (ships logging.ini and sets log_config_append). Default: text."""
    level: LogLevel = "INFO"
    """Root log level in logging.ini (json format only; DEBUG while debug is set). Default: INFO."""
    debug: bool = False
    """Sets [DEFAULT] debug and, under the json format, the root level of logging.ini to DEBUG. Default:
    false."""
    per_logger_levels: (
        Annotated[
            dict[str, Annotated[str, Field(max_length=16)]],
            Field(max_length=64),
            Rule("self.all(k, k.size() > 0)", "logger name must not be empty"),
            Rule(
                "self.all(k, !k.contains('\\n') && !k.contains('\\r'))",
                "logger name must not contain a newline or carriage return",
            ),
            Rule(
                "self.all(k, self[k] in ['DEBUG', 'INFO', 'WARNING', 'ERROR', 'CRITICAL'])",
                "per-logger level must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL",
            ),
        ]
        | None
    ) = None
    """Log level per logger name (DEBUG, INFO, WARNING, ERROR or CRITICAL), merged over oslo.log's and
    nova's per-library defaults into [DEFAULT] default_log_levels and, under the json format, logging.ini.
    """


class SecretStoreRefSpec(CRDModel):
    kind: Literal["ClusterSecretStore", "SecretStore"] = "ClusterSecretStore"
    """ClusterSecretStore (default) or SecretStore (in this namespace)."""
    name: SubdomainName
    """Name of the External Secrets store."""


class JobSpec(CRDModel):
    """Pods of the db-sync, upgrade and archive Jobs. Unset placement copies the API Deployment's."""

    resources: ResourceRequirements | None = None
    """Requests and limits of every Job and CronJob container. Default: 70m CPU request, 368Mi memory request
    and limit.
    """
    priority_class_name: PriorityClassName | None = None
    """PriorityClass of the Job pods. Unset: the API Deployment's; empty: none."""
    node_selector: NodeSelector | None = None
    """Node labels of the Job pods. Unset: the API Deployment's; empty: none."""
    tolerations: Tolerations | None = None
    """Tolerations of the Job pods. Unset: the API Deployment's; empty: none."""
    affinity: Affinity | None = None
    """Affinity of the Job pods. Unset: only the API Deployment's node affinity (never pod affinity); empty:
    none.
    """

    _labels = field_validator("node_selector")(check_label_map)


# --- extraConfig ---------------------------------------------------------------------------


def extra_config_shape_rules() -> tuple[Rule, ...]:
    """The webhook's shape checks on a section -> key -> value map, as CEL on the outer map."""
    return (
        Rule("self.all(s, s.size() > 0)", "extraConfig section name must not be empty"),
        Rule(
            "self.all(s, !s.contains('\\n') && !s.contains('\\r'))",
            "extraConfig section name must not contain a newline or carriage return",
        ),
        Rule("self.all(s, self[s].all(k, k.size() > 0))", "extraConfig key must not be empty"),
        # oslo.config lowercases section names (but DEFAULT) and ends a key at ':' or '=': a name
        # in any other form would reach a different option than the one the guards check.
        # Python's str.lower(), which oslo.config applies to section names, folds some letters
        # outside ASCII into ASCII ones (U+212A KELVIN SIGN becomes 'k'): '[\u212aeystone_authtoken]'
        # is [keystone_authtoken] to nova but passes every rule here, which compare ASCII names.
        Rule(
            "self.all(s, s.matches('^[ -~]*$') && self[s].all(k, k.matches('^[ -~]*$')))",
            "extraConfig section and key names must be printable ASCII: oslo.config folds some other "
            "letters into ASCII ones (a Kelvin sign reads as k), so a look-alike name would pass these "
            "rules and still set the option they refuse",
        ),
        Rule(
            "self.all(s, s == 'DEFAULT' || s == s.lowerAscii())",
            "extraConfig section name must be DEFAULT or lower case: oslo.config lowercases section names",
        ),
        Rule(
            "self.all(s, self[s].all(k, !k.contains(':') && !k.contains('=') && k == k.trim()))",
            "extraConfig key must not contain ':' or '=' nor start or end with a blank: oslo.config would "
            "read another key",
        ),
    )


def deprecated_names(section: str, key: str) -> list[tuple[str, str]]:
    """The deprecated names of ``[section] key`` in any shipped catalog, sorted.

    Only names the shape rules admit (section ``DEFAULT`` or lower case): oslo.config reads such a
    name as the option itself, so a rule that refuses the option must refuse them too.
    """
    return sorted(
        {
            (old_section, old_key)
            for release in catalog.supported_releases()
            for old, new in catalog.load_catalog(release).aliases.items()
            if new == f"{section}/{key}"
            for old_section, _, old_key in [old.partition("/")]
            if old_section == "DEFAULT" or old_section == old_section.lower()
        }
    )


def secret_options_rule(rejected: Iterable[tuple[str, str]]) -> Rule:
    """No option any shipped catalog marks secret, by its name or a deprecated one (but ``rejected``,
    refused by their own rules).

    The Config steps refuse them again against the release's own catalog; the API server
    refuses the names at once.
    """
    refused = set(rejected)
    secret = {
        (section, key)
        for release in catalog.supported_releases()
        for section, options in catalog.load_catalog(release).sections.items()
        for key, info in options.items()
        if info.secret
    } - refused
    pairs = sorted(secret | {old for s, k in secret for old in deprecated_names(s, k)})
    # one map lookup per pair (as the rejected-key rules): no string building, so a constant cost
    rule = " && ".join(f"!('{s}' in self && '{k}' in self['{s}'])" for s, k in pairs)
    return Rule(
        rule,
        "extraConfig must not set an option nova marks secret: it is rendered into a ConfigMap; put it under "
        "key section.option of the Secret named by spec.secretConfig.secretRef",
        reason="FieldValueForbidden",
    )


def rejected_key_rule(section: str, key: str, owner: str, impact: str) -> Rule:
    """``[section] key`` may not appear in extraConfig: the operator sets it from ``owner``."""
    return Rule(
        f"!('{section}' in self) || !('{key}' in self['{section}'])",
        f"{key} is managed via {owner} and must not be set in extraConfig ({impact})",
        field_path=f"['{section}']['{key}']",
        reason="FieldValueForbidden",
    )


def rejected_deprecated_name_rules(section: str, key: str, owner: str, impact: str) -> list[Rule]:
    """As :func:`rejected_key_rule`, for each deprecated name of ``[section] key`` (oslo.config
    reads ``[DEFAULT] novncproxy_host`` as ``[vnc] novncproxy_host``)."""
    return [
        Rule(
            f"!('{old_section}' in self) || !('{old_key}' in self['{old_section}'])",
            f"[{old_section}] {old_key} is a deprecated name of [{section}] {key}, which is managed via "
            f"{owner} and must not be set in extraConfig ({impact})",
            field_path=f"['{old_section}']['{old_key}']",
            reason="FieldValueForbidden",
        )
        for old_section, old_key in deprecated_names(section, key)
    ]


ExtraConfigValue = Annotated[
    str,
    Field(max_length=2048),
    Rule(
        "!self.contains('\\n') && !self.contains('\\r')",
        "extraConfig key and value must not contain a newline or carriage return: "
        "each entry is rendered as one INI line",
    ),
]
ExtraConfigSection = Annotated[
    dict[str, ExtraConfigValue],
    Field(max_length=64),
    Rule(
        "self.all(k, !k.contains('\\n') && !k.contains('\\r'))",
        "extraConfig key and value must not contain a newline or carriage return: "
        "each entry is rendered as one INI line",
    ),
]
