"""Spec blocks shared by Nova and NovaCompute (and by several Nova fields).

Each CEL rule sits on the type it constrains, so a block used in several places carries
its rules everywhere it appears. String, list and map bounds exist so that every rule's
estimated cost stays within the API server's budget; they are generous on purpose.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from nova_operator.models._schema import CRDModel, Rule, Schema, SchemaFrom
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

# Free-form Kubernetes objects the operator copies verbatim into what it renders (Affinity,
# TopologySpreadConstraint, HPA behavior, NetworkPolicyEgressRule). The API server validates
# them again when the rendered object is created; here they are kept as opaque objects.
Opaque = Annotated[dict[str, Any], Schema(x_kubernetes_preserve_unknown_fields=True)]

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
    key: DataKey | None = None


class PasswordSecretRef(SecretRefSpec):
    key: DataKey | None = "password"


class SharedSecretRef(SecretRefSpec):
    key: DataKey | None = "shared_secret"


class TransportURLSecretRef(SecretRefSpec):
    key: DataKey | None = "transport_url"


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


class NameRef(CRDModel):
    """A bare ``{name}`` reference used in status (an object in the CR's own namespace)."""

    name: SubdomainName


# --- image ---------------------------------------------------------------------------------


class ImageSpec(CRDModel):
    __crd_rules__ = (
        Rule("has(self.tag) != has(self.digest)", "exactly one of image.tag or image.digest must be set"),
    )

    repository: Annotated[str, Field(min_length=1, max_length=512, pattern=r"^[a-z0-9]+([._:/-][a-z0-9]+)*$")]
    tag: Annotated[str, Field(pattern=r"^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$")] | None = None
    digest: Annotated[str, Field(pattern=r"^sha256:[a-f0-9]{64}$")] | None = None

    @property
    def reference(self) -> str:
        """``repository@digest`` when a digest is set, else ``repository:tag``."""
        if self.digest:
            return f"{self.repository}@{self.digest}"
        return f"{self.repository}:{self.tag}"


# --- database ------------------------------------------------------------------------------


class DatabaseTLSSpec(CRDModel):
    mode: Literal["disabled", "prefer", "require", "verify-ca", "verify-full"] | None = None
    ca_bundle_secret_ref: SecretRefSpec
    client_cert_secret_ref: SecretRefSpec

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
    host: Annotated[str, Field(min_length=1, max_length=253, pattern=r"^[a-zA-Z0-9._:-]+$")] | None = None
    port: Annotated[Int32, Field(ge=1, le=65535)] | None = None
    database: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_]+$")]
    secret_ref: SecretRefSpec
    credentials_mode: Literal["Static", "Dynamic"] | None = None
    tls: DatabaseTLSSpec | None = None
    replicas: Annotated[Int32, Field(ge=1)] | None = None
    storage_size: Annotated[str, Field(pattern=r"^[0-9]+(Mi|Gi|Ti)$")] | None = None

    @property
    def effective_port(self) -> int:
        return self.port or 3306

    @property
    def effective_credentials_mode(self) -> str:
        return self.credentials_mode or "Static"


# --- cache and messaging -------------------------------------------------------------------


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
    )

    cluster_ref: LocalObjectReference | None = None
    servers: (
        Annotated[list[Annotated[str, Field(max_length=512, pattern=NO_NEWLINE)]], Field(max_length=64)]
        | None
    ) = None
    backend: Annotated[str, Field(min_length=1, max_length=255)] = "dogpile.cache.pymemcache"
    replicas: Annotated[Int32, Field(ge=1)] | None = None


class MessagingTLSSpec(CRDModel):
    ca_bundle_secret_ref: SecretRefSpec


class MessagingSpec(CRDModel):
    __crd_rules__ = (
        Rule(
            "has(self.clusterRef) != has(self.secretRef)",
            "exactly one of clusterRef or secretRef must be set",
        ),
    )

    cluster_ref: LocalObjectReference | None = None
    secret_ref: SecretRefSpec | None = None
    tls: MessagingTLSSpec | None = None
    replicas: Annotated[Int32, Field(ge=1)] | None = None


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
    requests: ResourceList | None = None


class Toleration(CRDModel):
    """core/v1 Toleration."""

    __crd_rules__ = (
        Rule(
            "(has(self.key) && self.key != '') || (has(self.operator) && self.operator == 'Exists')",
            "operator must be Exists when key is empty",
        ),
    )

    key: Annotated[str, Field(max_length=317)] | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: Annotated[str, Field(max_length=63)] | None = None
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: Int64 | None = None


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
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: Annotated[list[Annotated[str, Field(max_length=63)]], Field(max_length=64)] | None = None


class LabelSelector(CRDModel):
    __crd_schema__ = Schema(x_kubernetes_map_type="atomic")

    match_labels: LabelMap | None = None
    match_expressions: Annotated[list[LabelSelectorRequirement], Field(max_length=32)] | None = None


class RollingUpdateDeployment(CRDModel):
    max_unavailable: IntOrString | None = None
    max_surge: IntOrString | None = None


class DeploymentStrategy(CRDModel):
    __crd_rules__ = (
        Rule(
            "!has(self.rollingUpdate) || !has(self.type) || self.type != 'Recreate'",
            "rollingUpdate may not be set when strategy type is Recreate",
        ),
    )

    type: Literal["RollingUpdate", "Recreate"] | None = None
    rolling_update: RollingUpdateDeployment | None = None


class TopologySpreadConstraint(CRDModel):
    """core/v1 TopologySpreadConstraint."""

    max_skew: Annotated[Int32, Field(ge=1)]
    topology_key: Annotated[str, Field(min_length=1, max_length=317)]
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"]
    label_selector: LabelSelector | None = None
    min_domains: Annotated[Int32, Field(ge=1)] | None = None
    node_affinity_policy: Literal["Honor", "Ignore"] | None = None
    node_taints_policy: Literal["Honor", "Ignore"] | None = None
    match_label_keys: Annotated[list[Annotated[str, Field(max_length=317)]], Field(max_length=16)] | None = (
        None
    )


DRAIN_WINDOW_RULE = Rule(
    "(has(self.preStopSleepSeconds) ? self.preStopSleepSeconds : 5) < "
    "(has(self.terminationGracePeriodSeconds) ? self.terminationGracePeriodSeconds : 30)",
    "preStopSleepSeconds must be strictly less than terminationGracePeriodSeconds",
)


class DeploymentSpec(CRDModel):
    """Every ``*.deployment`` block. Unset grace/preStop resolve to 30 s / 5 s at render time."""

    __crd_rules__ = (DRAIN_WINDOW_RULE,)

    replicas: Annotated[Int32, Field(ge=1)] = 3
    resources: ResourceRequirements | None = None
    termination_grace_period_seconds: Annotated[Int64, Field(ge=10)] | None = None
    pre_stop_sleep_seconds: Annotated[Int64, Field(ge=0)] | None = None
    strategy: DeploymentStrategy | None = None
    topology_spread_constraints: (
        Annotated[list[Annotated[dict[str, Any], SchemaFrom(TopologySpreadConstraint)]], Field(max_length=16)]
        | None
    ) = None
    priority_class_name: PriorityClassName | None = None
    node_selector: NodeSelector | None = None
    tolerations: Tolerations | None = None
    affinity: Opaque | None = None

    _labels = field_validator("node_selector")(check_label_map)

    @property
    def effective_termination_grace_period_seconds(self) -> int:
        return 30 if self.termination_grace_period_seconds is None else self.termination_grace_period_seconds

    @property
    def effective_pre_stop_sleep_seconds(self) -> int:
        return 5 if self.pre_stop_sleep_seconds is None else self.pre_stop_sleep_seconds


class BusDeploymentSpec(DeploymentSpec):
    """Scheduler and conductor: an unset grace period is 200 s (covers the RPC server drain)."""

    termination_grace_period_seconds: Annotated[Int64, Field(ge=10)] | None = 200


class UWSGISpec(CRDModel):
    __crd_rules__ = (
        Rule(
            "!has(self.httpKeepAliveTimeout) || !has(self.httpKeepAlive) || self.httpKeepAlive",
            "httpKeepAliveTimeout may only be set when httpKeepAlive is true",
        ),
    )

    processes: Annotated[Int32, Field(ge=1)] = 2
    threads: Annotated[Int32, Field(ge=1)] = 1
    http_keep_alive: bool = True
    harakiri: Annotated[Int32, Field(ge=1)] | None = None
    http_keep_alive_timeout: Annotated[Int32, Field(ge=1)] | None = None


# --- routing, scaling, policy, logging -----------------------------------------------------

HOSTNAME_PATTERN = r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


class GatewayParentRef(CRDModel):
    name: SubdomainName
    namespace: LabelName | None = None
    section_name: SubdomainName | None = None


class GatewaySpec(CRDModel):
    """An HTTPRoute in front of one Service. ``hostname`` is a DNS name (no newline can reach nova.conf)."""

    hostname: Annotated[str, Field(min_length=1, max_length=253, pattern=HOSTNAME_PATTERN)]
    parent_ref: GatewayParentRef
    path: Annotated[str, Field(max_length=1024)] | None = None
    annotations: AnnotationMap | None = None

    @field_validator("annotations")
    @classmethod
    def _annotation_keys(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for key in value or {}:
            if not _qualified(key):
                raise ValueError(f"annotation key {key!r}: {ANNOTATION_KEY_MESSAGE}")
        return value


class HPAScalingPolicy(CRDModel):
    type: Literal["Pods", "Percent"]
    value: Annotated[Int32, Field(ge=1)]
    period_seconds: Annotated[Int32, Field(ge=1, le=1800)]


class HPAScalingRules(CRDModel):
    stabilization_window_seconds: Annotated[Int32, Field(ge=0, le=3600)] | None = None
    select_policy: Literal["Max", "Min", "Disabled"] | None = None
    policies: Annotated[list[HPAScalingPolicy], Field(max_length=16)] | None = None


class HPABehavior(CRDModel):
    """autoscaling/v2 HorizontalPodAutoscalerBehavior, copied verbatim onto the HPA."""

    scale_up: HPAScalingRules | None = None
    scale_down: HPAScalingRules | None = None


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
    max_replicas: Annotated[Int32, Field(ge=1)]
    target_cpu_utilization: Annotated[Int32, Field(ge=1)] | None = Field(
        default=None, alias="targetCPUUtilization"
    )
    target_memory_utilization: Annotated[Int32, Field(ge=1)] | None = Field(
        default=None, alias="targetMemoryUtilization"
    )
    behavior: Annotated[dict[str, Any], SchemaFrom(HPABehavior)] | None = None


class NetworkPolicyIngressSource(CRDModel):
    namespace_selector: LabelSelector
    pod_selector: LabelSelector | None = None


class NetworkPolicySpec(CRDModel):
    __crd_rules__ = (Rule("size(self.ingress) > 0", "at least one ingress source must be specified"),)

    ingress: Annotated[list[NetworkPolicyIngressSource], Field(max_length=32)]
    additional_egress: Annotated[list[Opaque], Field(max_length=32)] | None = None


LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


class LoggingSpec(CRDModel):
    format: Literal["text", "json"] = "text"
    level: LogLevel = "INFO"
    debug: bool = False
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


class SecretStoreRefSpec(CRDModel):
    kind: Literal["ClusterSecretStore", "SecretStore"] = "ClusterSecretStore"
    name: SubdomainName


class JobSpec(CRDModel):
    """Pods of the db-sync, upgrade and archive Jobs. Unset placement copies the API Deployment's."""

    resources: ResourceRequirements | None = None
    priority_class_name: PriorityClassName | None = None
    node_selector: NodeSelector | None = None
    tolerations: Tolerations | None = None
    affinity: Opaque | None = None

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


def rejected_key_rule(section: str, key: str, owner: str, impact: str) -> Rule:
    """``[section] key`` may not appear in extraConfig: the operator sets it from ``owner``."""
    return Rule(
        f"!('{section}' in self) || !('{key}' in self['{section}'])",
        f"{key} is managed via {owner} and must not be set in extraConfig ({impact})",
        field_path=f"['{section}']['{key}']",
        reason="FieldValueForbidden",
    )


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
