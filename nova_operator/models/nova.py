"""The ``Nova`` kind: the whole compute control plane of one cell.

Defaults the upstream mutating webhook applied are schema defaults here (there is no
webhook): a block that is absent is defaulted as a whole (``spec.metadata.deployment``
becomes ``{replicas: 1}``), a block that is present gets its fields' defaults
(``replicas: 3``). What a default cannot express is resolved at render time:
``consoleProxy.deployment`` is ``{replicas: 1}`` while the proxy is enabled and the block
is absent (see ``NovaConsoleProxySpec.effective_deployment``), since a structural default
cannot depend on the sibling ``enabled``.

Every check of the upstream validating webhook that CEL can express is a CEL rule here,
including the create-only name rules (a name cannot change, so checking it on every write
is equivalent). Where CEL cannot help:

- pydantic validators (``model_validate`` fails; the reconciler reports it as a False
  condition and a Warning event): the cron grammar of ``dbArchive.schedule``, the label
  grammar of every ``nodeSelector``;
- the reconciler, which has API access: the existence of a named PriorityClass, the
  extraConfig option catalog (``nova_operator.catalog``), and the upstream *warning* on a
  lowered ``dbArchive.retentionDays`` (an admission warning needs a webhook; an event can
  say it instead).

The upstream webhook admitted a finalizer-removal update of a deleting object without any
check. Here: the name rules are create-only (``optionalOldSelf``; ``oldSelf`` has a value on
every update), transition rules compare unchanged values, and a rule on a field tightened
after the object was created is ratcheted by the API server for unchanged fields (CRD
validation ratcheting, on by default since Kubernetes 1.33).
"""

from __future__ import annotations

import re
from typing import Annotated, Final, Literal

from pydantic import Field, field_validator

from nova_operator.models._schema import CRDModel, Rule, Schema
from nova_operator.models.common import (
    AutoscalingSpec,
    BusDeploymentSpec,
    CacheSpec,
    DatabaseSpec,
    DataKey,
    DeploymentSpec,
    ExtraConfigSection,
    GatewaySpec,
    HTTPSTLSSpec,
    HttpURL,
    ImageSpec,
    JobSpec,
    LoggingSpec,
    MessagingSpec,
    NameRef,
    NetworkPolicySpec,
    PasswordSecretRef,
    SecretConfigSpec,
    SecretStoreRefSpec,
    ServerDeploymentSpec,
    SharedSecretRef,
    SingleLine,
    SubdomainName,
    TransportURLSecretRef,
    UWSGISpec,
    extra_config_shape_rules,
    rejected_deprecated_name_rules,
    rejected_key_rule,
    secret_options_rule,
)
from nova_operator.models.meta import Conditions, Int32, Int64, ObjectMeta

API_VERSION: Final = "nova.openstack.c5c3.io/v1alpha1"

# The operator POSTs the service user's password to <keystoneEndpoint>/v3/auth/tokens: a '?' or a
# '#' in the URL would turn that path into a query or a fragment, so the password would go to
# whatever path the author wrote before it (issue 36). The API server refuses both.
KeystoneURL = Annotated[
    HttpURL,
    Rule(
        "!self.contains('?') && !self.contains('#')",
        "a Keystone URL must not contain '?' or '#': the operator appends /v3/auth/tokens to it, "
        "and a query or fragment would send the service user's password to another path",
    ),
]

# (section, key, owner, impact): extraConfig keys refused at admission (spec §6.6).
_CONFIGMAP = "the config ConfigMap every pod mounts"
NOVA_REJECTED_EXTRA_CONFIG_KEYS: tuple[tuple[str, str, str, str], ...] = (
    (
        "DEFAULT",
        "transport_url",
        "spec.messaging",
        f"it is injected as OS_DEFAULT__TRANSPORT_URL; a file value is inert and would copy the broker "
        f"credentials into {_CONFIGMAP}",
    ),
    ("DEFAULT", "web", "operator-computed", "it is the noVNC client directory the operator mounts"),
    (
        "DEFAULT",
        "host",
        "each pod's hostname (the pod name)",
        "nova names its service rows by host: one shared host collapses the replicas of each role into "
        "one service row",
    ),
    (
        "database",
        "connection",
        "spec.database",
        f"it is injected as OS_DATABASE__CONNECTION; a file value is inert and would copy the database "
        f"password into {_CONFIGMAP}",
    ),
    (
        "api_database",
        "connection",
        "spec.apiDatabase",
        f"it is injected as OS_API_DATABASE__CONNECTION; a file value is inert and would copy the database "
        f"password into {_CONFIGMAP}",
    ),
    *(
        (
            section,
            "password",
            "spec.serviceUser.secretRef",
            f"it is injected as OS_{section.upper()}__PASSWORD; a file value is inert and would copy the "
            f"service-user password into {_CONFIGMAP}",
        )
        for section in ("keystone_authtoken", "service_user", "placement", "neutron", "cinder")
    ),
    (
        "neutron",
        "metadata_proxy_shared_secret",
        "spec.metadata.sharedSecretRef",
        f"it is injected as OS_NEUTRON__METADATA_PROXY_SHARED_SECRET; a file value is inert and would copy "
        f"the secret a proxied request's signature is verified with into {_CONFIGMAP}",
    ),
    (
        "oslo_messaging_rabbit",
        "ssl",
        "spec.messaging.tls",
        "it selects bus encryption, which follows messaging.tls",
    ),
    (
        "oslo_messaging_rabbit",
        "ssl_ca_file",
        "spec.messaging.tls.caBundleSecretRef",
        "it points at the CA bundle the operator mounts",
    ),
    (
        "vnc",
        "novncproxy_host",
        "operator-computed",
        "the proxy Service routes to the address the operator sets",
    ),
    ("vnc", "novncproxy_port", "operator-computed", "the proxy Service routes to the port the operator sets"),
)

NovaExtraConfig = Annotated[
    dict[str, ExtraConfigSection],
    Field(max_length=32),
    *extra_config_shape_rules(),
    *(rejected_key_rule(*entry) for entry in NOVA_REJECTED_EXTRA_CONFIG_KEYS),
    *(rule for entry in NOVA_REJECTED_EXTRA_CONFIG_KEYS for rule in rejected_deprecated_name_rules(*entry)),
    secret_options_rule((s, k) for s, k, _, _ in NOVA_REJECTED_EXTRA_CONFIG_KEYS),
]

# Name rules hold on CREATE only, as upstream's webhook had them: an update (a finalizer
# removal included) of an object created under older rules is never refused for its name.
_ON_CREATE = "oldSelf.hasValue()"
_CHILD_SUFFIXES = ("-api", "-metadata", "-scheduler", "-conductor", "-novncproxy", "-console")
_SUFFIX_LIST = "[" + ", ".join(f"'{s}'" for s in _CHILD_SUFFIXES) + "]"
REMOTE_SUFFIX: Final = "-remote"  # {name}-remote-compute-config ends in another Nova's -compute-config
CELL0_SUFFIX: Final = "-cell0"
REFUSED_NAME_SUFFIXES: Final = (*_CHILD_SUFFIXES, CELL0_SUFFIX, REMOTE_SUFFIX)
"""Every suffix a Nova name may not end in (on create): each makes the name one of another Nova's."""


# The pod selector of each block's Deployment, by the component label (see the renderers).
_COMPONENTS = (
    ("api", "api"),
    ("metadata", "metadata"),
    ("scheduler", "scheduler"),
    ("conductor", "conductor"),
)


def _spread_selector_rule(block: str, component: str) -> Rule:
    """A topology spread constraint must count exactly the pods of its own Deployment."""
    constraints = f"self.spec.{block}.deployment.topologySpreadConstraints"
    selector = (
        "{'app.kubernetes.io/name': 'nova', 'app.kubernetes.io/instance': self.metadata.name, "
        f"'app.kubernetes.io/component': '{component}'}}"
    )
    return Rule(
        f"!has(self.spec.{block}) || !has(self.spec.{block}.deployment) || "
        f"!has({constraints}) || {constraints}.all(c, has(c.labelSelector) && "
        "has(c.labelSelector.matchLabels) && !has(c.labelSelector.matchExpressions) && "
        f"c.labelSelector.matchLabels == {selector})",
        f"topologySpreadConstraints labelSelector must equal the pod selector of the {component} Deployment: "
        "matchLabels app.kubernetes.io/name=nova, app.kubernetes.io/instance=<metadata.name>, "
        f"app.kubernetes.io/component={component}",
        field_path=f".spec.{block}.deployment.topologySpreadConstraints",
    )


def _utilization_rules(resource: str, target: str) -> tuple[Rule, Rule]:
    """A utilization target is a share of the API pods' request: it needs one and must be reachable.

    Without an explicit request the render-time default applies: CPU gets a 70m request and no
    limit (any target is reachable); memory gets one figure as request and limit, as does a
    resource with only a limit (the kubelet copies it into the request), so at most 100 %.
    """
    res = "self.api.deployment.resources"
    has_req = f"(has({res}) && has({res}.requests) && '{resource}' in {res}.requests)"
    has_lim = f"(has({res}) && has({res}.limits) && '{resource}' in {res}.limits)"
    req = f"quantity(string({res}.requests['{resource}']))"
    lim = f"quantity(string({res}.limits['{resource}']))"
    guard = (
        f"!has(self.autoscaling) || !has(self.autoscaling.{target}) || "
        "!has(self.api) || !has(self.api.deployment)"
    )
    share = f"{req}.asApproximateFloat() * double(self.autoscaling.{target})"
    capped_by_default = "true" if resource == "memory" else "false"
    return (
        Rule(
            f"{guard} || !{has_req} || {req}.isGreaterThan(quantity('0'))",
            f"{resource} request must be greater than zero: {target} is a percentage of it",
        ),
        Rule(
            f"{guard} || ({has_req} ? (!{has_lim} || "
            f"{lim}.asApproximateFloat() * 100.0 >= {share})"
            f" : (!({has_lim} || {capped_by_default}) || self.autoscaling.{target} <= 100))",
            f"{target} can never be reached: "
            f"the {resource} limit keeps usage below that share of the request",
        ),
    )


def _harakiri_rule() -> Rule:
    grace = (
        "(has(self.deployment.terminationGracePeriodSeconds) ? "
        "self.deployment.terminationGracePeriodSeconds : 30)"
    )
    pre_stop = "(has(self.deployment.preStopSleepSeconds) ? self.deployment.preStopSleepSeconds : 5)"
    return Rule(
        f"!has(self.uwsgi) || !has(self.uwsgi.harakiri) || !has(self.deployment) || "
        f"self.uwsgi.harakiri < {grace} - {pre_stop}",
        "harakiri must be strictly less than terminationGracePeriodSeconds - preStopSleepSeconds",
    )


class NovaAPISpec(CRDModel):
    __crd_rules__ = (_harakiri_rule(),)

    deployment: Annotated[ServerDeploymentSpec, Schema(default={})] = Field(
        default_factory=ServerDeploymentSpec
    )
    """The compute API Deployment {name}; also the placement fallback of spec.jobs. Default: 3 replicas."""
    uwsgi: Annotated[UWSGISpec, Schema(default={})] = Field(default_factory=UWSGISpec)
    """uWSGI settings of the compute API (port 8774). Default: 2 processes, 1 thread, keep-alive on."""


class NovaMetadataSpec(CRDModel):
    __crd_rules__ = (_harakiri_rule(),)

    deployment: Annotated[ServerDeploymentSpec, Schema(default={"replicas": 1})] = Field(
        default_factory=lambda: ServerDeploymentSpec(replicas=1)
    )
    """The metadata API Deployment {name}-metadata. Default: 1 replica when the block is absent."""
    uwsgi: Annotated[UWSGISpec, Schema(default={})] = Field(default_factory=UWSGISpec)
    """uWSGI settings of the metadata API (port 8775). Default: 2 processes, 1 thread, keep-alive on."""
    shared_secret_ref: SharedSecretRef
    """Secret with the shared secret the Neutron metadata agent signs proxied requests with (key default:
    shared_secret). Required; an empty value blocks reconciliation.
    """
    gateway: GatewaySpec | None = None
    """An HTTPRoute {name}-metadata in front of the metadata API, for metadata agents outside the cluster."""


class NovaSchedulerSpec(CRDModel):
    deployment: Annotated[BusDeploymentSpec, Schema(default={"replicas": 1})] = Field(
        default_factory=lambda: BusDeploymentSpec(replicas=1)
    )
    """The scheduler Deployment {name}-scheduler. Default: 1 replica when the block is absent; grace period
    200 s when unset.
    """
    workers: Annotated[Int32, Field(ge=1)] = 2
    """Number of worker processes ([scheduler] workers). Default: 2."""


class NovaConductorSpec(NovaSchedulerSpec):
    pass


class NovaConsoleProxySpec(CRDModel):
    __crd_rules__ = (
        Rule(
            "!has(self.enabled) || self.enabled || !has(self.deployment)",
            "consoleProxy.deployment must not be set when consoleProxy.enabled is false",
            field_path=".deployment",
            reason="FieldValueForbidden",
        ),
        Rule(
            "!has(self.gateway) || !has(self.gateway.path) || "
            "self.gateway.path == '' || self.gateway.path == '/'",
            "consoleProxy.gateway.path must be empty or /: the console page and its WebSocket are served "
            "from the root of the console hostname",
            field_path=".gateway.path",
        ),
    )

    enabled: bool = True
    """Runs the noVNC console proxy. false deletes its Deployment, Service, HTTPRoute and NetworkPolicy and
    disables [vnc]. Default: true.
    """
    deployment: DeploymentSpec | None = None
    """The console proxy Deployment {name}-novncproxy. Default while enabled: 1 replica. Must be absent while
    enabled is false.
    """
    gateway: GatewaySpec | None = None
    """An HTTPRoute {name}-console in front of the proxy (port 6080); its hostname becomes [vnc]
    novncproxy_base_url. path must be empty or /.
    """

    @property
    def effective_deployment(self) -> DeploymentSpec | None:
        """The block the proxy runs with: ``{replicas: 1}`` when enabled and unset, ``None`` when disabled."""
        if not self.enabled:
            return None
        return self.deployment if self.deployment is not None else DeploymentSpec(replicas=1)


class ServiceUserSpec(CRDModel):
    username: SingleLine = "nova"
    """Keystone user name of the service user. Default: nova."""
    project_name: SingleLine = "service"
    """Keystone project of the service user. Default: service."""
    user_domain_name: SingleLine = "Default"
    """Keystone domain of the user. Default: Default."""
    project_domain_name: SingleLine = "Default"
    """Keystone domain of the project. Default: Default."""
    secret_ref: PasswordSecretRef
    """Secret with the service user's password (key default: password). Injected as environment, never written
    into configuration.
    """


class EndpointOverrideSpec(CRDModel):
    override: HttpURL | None = None
    """An http(s) URL used instead of the Keystone catalog entry of the service."""


class OptionalEndpointSpec(EndpointOverrideSpec):
    enabled: bool = False
    """Configures Nova to use the service. Default: false."""


class NovaEndpointsSpec(CRDModel):
    placement: Annotated[EndpointOverrideSpec, Schema(default={})] = Field(
        default_factory=EndpointOverrideSpec
    )
    """Placement ([placement] endpoint_override); the catalog's internal endpoint when unset."""
    neutron: Annotated[EndpointOverrideSpec, Schema(default={})] = Field(default_factory=EndpointOverrideSpec)
    """Neutron ([neutron] endpoint_override); the catalog's endpoint when unset."""
    glance: Annotated[EndpointOverrideSpec, Schema(default={})] = Field(default_factory=EndpointOverrideSpec)
    """Glance ([glance] endpoint_override); the catalog's endpoint when unset."""
    cinder: Annotated[OptionalEndpointSpec, Schema(default={})] = Field(default_factory=OptionalEndpointSpec)
    """Cinder: renders [cinder] only while enabled; override becomes endpoint_template."""
    barbican: Annotated[OptionalEndpointSpec, Schema(default={})] = Field(
        default_factory=OptionalEndpointSpec
    )
    """Barbican: renders [key_manager] and [barbican] only while enabled; override becomes barbican_endpoint.
    """


class NovaRemoteComputeSpec(CRDModel):
    keystone_endpoint: Annotated[
        KeystoneURL,
        Rule(
            "self.startsWith('https://')",
            "remoteCompute.keystoneEndpoint must use https: the service-user password is sent across a "
            "cluster boundary",
        ),
    ]
    """https URL of Keystone as compute nodes on the other cluster reach it; every auth_url of the remote
    contract.
    """
    transport_url_secret_ref: TransportURLSecretRef = Field(alias="transportURLSecretRef")
    """Secret with the broker's external rabbit:// URL for the remote compute nodes (key default:
    transport_url). Read, never written.
    """


_CRON_DESCRIPTORS = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# (field, lowest, highest, names) as kube's cron parser (robfig/cron ParseStandard) has them
_CRON_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, {n: i + 1 for i, n in enumerate(_MONTHS)}),
    ("day of week", 0, 6, {n: i for i, n in enumerate(_DAYS)}),
)
_DURATION = r"([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+"


def _cron_value_re(low: int, high: int, names: dict[str, int]) -> str:
    """One value of a cron field as a regular expression (leading zeros allowed, as strconv does)."""
    options = {
        (0, 59): "[0-5]?[0-9]",
        (0, 23): "[01]?[0-9]|2[0-3]",
        (1, 31): "0?[1-9]|[12][0-9]|3[01]",
        (1, 12): "0?[1-9]|1[0-2]",
        (0, 6): "[0-6]",
    }[(low, high)]
    named = f"|(?i:{'|'.join(names)})" if names else ""
    return f"0*({options}){named}"


def _cron_rule() -> str:
    fields = []
    for _, low, high, names in _CRON_FIELDS:
        value = _cron_value_re(low, high, names)
        element = f"([*?]|({value})(-({value}))?)(/[0-9]*[1-9][0-9]*)?"
        fields.append(f"{element}(,{element})*")
    five = r"\s+".join(f"({f})" for f in fields)
    descriptors = "|".join(sorted(d[1:] for d in _CRON_DESCRIPTORS))
    regex = rf"^\s*(@({descriptors})|@every {_DURATION}|{five})\s*$"
    return regex.replace("\\", "\\\\")  # a CEL string literal: every backslash escaped


CRON_RULE = Rule(
    f"self.matches('{_cron_rule()}')",
    "schedule must be a cron expression kube's CronJob accepts: five fields (minute 0-59, hour 0-23, "
    "day of month 1-31, month 1-12 or JAN-DEC, day of week 0-6 or SUN-SAT; each '*', '?', a value or a "
    "range, optionally /step, comma-separated) or @yearly, @monthly, @weekly, @daily, @hourly, @every <d>",
)


def _cron_part(part: str, field: str, low: int, high: int, names: dict[str, int]) -> None:
    def number(text: str) -> int:
        if text.lower() in names:
            return names[text.lower()]
        if not text.isdigit():
            raise ValueError(f"invalid cron expression: {field} value {text!r} is not a number")
        return int(text)

    span, slash, step = part.partition("/")
    if slash and (not step.isdigit() or int(step) == 0):
        raise ValueError(f"invalid cron expression: {field} step {step!r} must be a positive number")
    if span in ("*", "?"):
        return
    first, dash, last = span.partition("-")
    start = number(first)
    end = number(last) if dash else start
    if start < low or end > high:
        raise ValueError(f"invalid cron expression: {field} {span!r} is outside {low}-{high}")
    if start > end:
        raise ValueError(f"invalid cron expression: {field} range {span!r} starts after it ends")


def check_cron(schedule: str) -> str:
    """The CronJob schedule grammar, as kube's cron parser checks it: five fields or a descriptor."""
    text = schedule.strip()
    if text.startswith(("TZ=", "CRON_TZ=")):
        raise ValueError(
            "invalid cron expression: time zones are set with spec.timeZone, not in the schedule"
        )
    if text in _CRON_DESCRIPTORS or re.fullmatch(f"@every {_DURATION}", text):
        return schedule
    fields = text.split()
    if len(fields) != 5:
        raise ValueError(f"invalid cron expression: {len(fields)} fields, not 5: {schedule!r}")
    for value, (field, low, high, names) in zip(fields, _CRON_FIELDS, strict=True):
        for part in value.split(","):
            _cron_part(part, field, low, high, names)
    return schedule


class DBArchiveSpec(CRDModel):
    """The db-archive CronJob; every unset knob is resolved at reconcile time (``@daily``, 1000, 1)."""

    schedule: Annotated[str, Field(min_length=1, max_length=128), CRON_RULE] | None = None
    """Cron schedule of the db-archive CronJob (five fields or a descriptor such as @daily). Default: @daily.
    """
    max_rows: Annotated[Int32, Field(ge=1)] | None = None
    """Rows archived per table per batch (--max_rows). Default: 1000."""
    sleep: Annotated[Int32, Field(ge=0)] | None = None
    """Seconds to sleep between batches. Default: 1."""
    retention_days: Annotated[Int32, Field(ge=1)] | None = None
    """When set, archives only rows deleted more than this many days ago (--before), task log records
    included (--task-log). Unset: no age limit.
    """
    purge_after_days: Annotated[Int32, Field(ge=0, le=36500)] | None = None
    """When set, each run then purges the shadow tables of rows deleted more than this many days ago
    (nova-manage db purge --all-cells --before); 0 purges every archived row. Unset: nothing is
    purged, the shadow tables keep every archived row.
    """
    suspend: bool | None = None
    """Suspends the CronJob; DBArchiveReady stays True with reason DBArchiveSuspended. Default: false."""

    @field_validator("schedule")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        return None if value is None else check_cron(value)


MAX_POLICY_RULES: Final = 512
"""Rules ``spec.policy.rules`` holds at most (nova registers about 400 in all)."""
POLICY_RULE_NAME_MAX: Final = 255
POLICY_CHECK_MAX: Final = 4096
POLICY_KEY_DEFAULT: Final = "policy.yaml"

PolicyRules = Annotated[
    dict[str, Annotated[str, Field(max_length=POLICY_CHECK_MAX)]],
    Field(min_length=1, max_length=MAX_POLICY_RULES),
    Rule(
        f"self.all(r, r.size() > 0 && r.size() <= {POLICY_RULE_NAME_MAX})",
        f"policy rule name must be 1 to {POLICY_RULE_NAME_MAX} characters",
    ),
    Rule(
        "self.all(r, r.matches('^[!-~]+$'))",
        "policy rule name must be printable ASCII without blanks: nova's rule names are, and "
        "oslo.policy ignores a name no rule has",
    ),
]


class PolicyConfigMapRef(CRDModel):
    name: SubdomainName
    """Name of the ConfigMap, in the same namespace as this object."""
    key: DataKey | None = POLICY_KEY_DEFAULT
    """Data key holding the policy file (YAML: rule name -> check string). Default: policy.yaml."""


class PolicySpec(CRDModel):
    """Overrides of nova's API policy rules, each checked against the rules the release registers."""

    __crd_rules__ = (
        Rule(
            "has(self.rules) != has(self.configMapRef)",
            "exactly one of policy.rules or policy.configMapRef must be set",
        ),
    )

    rules: PolicyRules | None = None
    """Rule name -> oslo.policy check string (for example os_compute_api:servers:create: role:admin),
    rendered into policy.yaml. Each name must be a rule the release's nova registers."""
    config_map_ref: PolicyConfigMapRef | None = None
    """A ConfigMap whose key holds a policy file (YAML mapping of rule name -> check string); its
    rule names are checked the same way, and an edit of it is rendered and rolled out like a spec change."""


class NovaSpec(CRDModel):
    __crd_rules__ = (
        Rule(
            "self.apiDatabase.database != self.database.database",
            "apiDatabase and database must name different schemas",
            field_path=".apiDatabase.database",
        ),
        Rule(
            "self.apiDatabase.database != self.database.database + '_cell0'",
            "apiDatabase must not name the cell0 schema derived from database",
            field_path=".apiDatabase.database",
        ),
        Rule(
            "(has(self.apiDatabase.credentialsMode) ? self.apiDatabase.credentialsMode : 'Static') == "
            "(has(self.database.credentialsMode) ? self.database.credentialsMode : 'Static')",
            "apiDatabase and database must use the same credentialsMode",
            field_path=".apiDatabase.credentialsMode",
        ),
        Rule(
            "!has(self.remoteCompute) || has(self.messaging.tls)",
            "remoteCompute requires messaging.tls: a compute on another cluster verifies the broker against "
            "the messaging CA bundle",
            field_path=".messaging.tls",
            reason="FieldValueRequired",
        ),
        Rule(
            "!has(self.autoscaling) || has(self.autoscaling.minReplicas) || !has(self.api) || "
            "!has(self.api.deployment) || self.autoscaling.maxReplicas >= self.api.deployment.replicas",
            "autoscaling.maxReplicas must be at least spec.api.deployment.replicas: minReplicas defaults to "
            "spec.api.deployment.replicas",
        ),
        *_utilization_rules("cpu", "targetCPUUtilization"),
        *_utilization_rules("memory", "targetMemoryUtilization"),
        Rule(
            "!has(self.policy) || !has(self.extraConfig) || !('oslo_policy' in self.extraConfig) || "
            "!('policy_file' in self.extraConfig['oslo_policy'])",
            "extraConfig [oslo_policy] policy_file must not be set together with policy: the operator "
            "points it at the policy.yaml it renders",
            field_path=".extraConfig",
        ),
    )

    open_stack_release: Annotated[str, Field(pattern=r"^\d{4}\.[12]$")]
    """Target OpenStack release (YYYY.1 or YYYY.2). A change upgrades the schema; status.installedRelease
    follows after a successful migration. It also selects the extraConfig option catalog.
    """
    image: ImageSpec
    """The image every container, migration Job and the db-archive CronJob run."""
    api_database: Annotated[
        DatabaseSpec,
        Rule(
            "self.database == oldSelf.database",
            "apiDatabase.database is immutable: the schema holds the cell map and every instance mapping",
            field_path=".database",
        ),
        Rule(
            "has(self.clusterRef) == has(oldSelf.clusterRef)",
            "apiDatabase mode (managed clusterRef vs brownfield host) is immutable",
            field_path=".clusterRef",
        ),
    ]
    """The nova_api schema (cell map, flavors, instance mappings). The schema name and the managed/brownfield
    mode are immutable.
    """
    database: Annotated[
        DatabaseSpec,
        Rule(
            "self.database == oldSelf.database",
            "database.database is immutable: the cell mappings store the schema name",
            field_path=".database",
        ),
        Rule(
            "has(self.clusterRef) == has(oldSelf.clusterRef)",
            "database mode (managed clusterRef vs brownfield host) is immutable",
            field_path=".clusterRef",
        ),
        Rule(
            "self.database.size() <= 58",
            "database.database must be at most 58 characters: cell0 is provisioned as <database>_cell0 under "
            "the 64-character schema limit",
            field_path=".database",
        ),
    ]
    """The cell1 schema; cell0 is provisioned as <database>_cell0 beside it. The schema name and the
    managed/brownfield mode are immutable.
    """
    cache: CacheSpec
    """memcached for [cache] and the Keystone token middleware."""
    messaging: MessagingSpec
    """The RabbitMQ message bus: a managed RabbitmqCluster or a Secret with a rabbit:// URL."""
    api: Annotated[NovaAPISpec, Schema(default={})] = Field(default_factory=NovaAPISpec)
    """The compute API: Deployment {name} running uWSGI on port 8774."""
    metadata: NovaMetadataSpec
    """The metadata API: Deployment {name}-metadata running uWSGI on port 8775, and its shared secret."""
    scheduler: Annotated[NovaSchedulerSpec, Schema(default={})] = Field(default_factory=NovaSchedulerSpec)
    """The nova-scheduler Deployment {name}-scheduler."""
    conductor: Annotated[NovaConductorSpec, Schema(default={})] = Field(default_factory=NovaConductorSpec)
    """The nova-conductor Deployment {name}-conductor."""
    console_proxy: Annotated[NovaConsoleProxySpec, Schema(default={})] = Field(
        default_factory=NovaConsoleProxySpec
    )
    """The noVNC console proxy {name}-novncproxy (port 6080); enabled unless enabled is false."""
    jobs: JobSpec | None = None
    """Pods of the db-sync, the upgrade Jobs and the db-archive CronJob. Unset placement copies the API
    Deployment's.
    """
    keystone_endpoint: KeystoneURL
    """In-cluster Keystone URL (http or https), without a query or fragment; every auth_url."""
    keystone_public_endpoint: HttpURL | None = None
    """Keystone URL handed to clients ([keystone_authtoken] www_authenticate_uri). Default: keystoneEndpoint.
    """
    tls: HTTPSTLSSpec | None = None
    """Trust for outgoing HTTPS: a CA bundle every pod mounts and names as cafile of each section that makes
    an HTTPS call, which the compute contract carries to the pools (key https-ca.crt) and the operator's own
    calls to Keystone and the compute API use. Unset: the system's CAs.
    """
    remote_compute: NovaRemoteComputeSpec | None = None
    """Publishes the Secret {name}-remote-compute-config for compute nodes on another cluster. Requires
    messaging.tls.
    """
    service_user: ServiceUserSpec
    """The Keystone service user that validates tokens and makes every outgoing call."""
    region: SingleLine | None = None
    """Region name of the identity and client sections. Unset: omitted."""
    endpoints: Annotated[NovaEndpointsSpec, Schema(default={})] = Field(default_factory=NovaEndpointsSpec)
    """How Nova reaches Placement, Neutron, Glance, Cinder and Barbican; Cinder and Barbican are opt-in."""
    db_archive: DBArchiveSpec | None = None
    """The {name}-db-archive CronJob, which moves deleted rows to the shadow tables. Default: @daily, 1000
    rows per batch, 1 s sleep.
    """
    gateway: GatewaySpec | None = None
    """An HTTPRoute {name} in front of the compute API; with it, status.endpoint is https://<hostname>/."""
    network_policy: NetworkPolicySpec | None = None
    """NetworkPolicies {name} and {name}-novncproxy, created only while this is set."""
    autoscaling: AutoscalingSpec | None = None
    """A HorizontalPodAutoscaler on the compute API Deployment, created only while this is set."""
    logging: Annotated[LoggingSpec, Schema(default={})] = Field(default_factory=LoggingSpec)
    """Log format (text or json), root level and per-logger levels."""
    extra_config: NovaExtraConfig | None = None
    """INI overrides (section -> key -> value) merged over the operator's nova.conf. Keys the operator sets
    from other fields are refused, and so are options nova marks secret: set those in secretConfig.
    """
    secret_config: SecretConfigSpec | None = None
    """Options nova marks secret, from a Secret (never rendered into a ConfigMap)."""
    policy: PolicySpec | None = None
    """API policy overrides, rendered into policy.yaml ([oslo_policy] policy_file) of the API and metadata
    pods. A rule name the release's nova does not register is refused (SecretsReady, ConfigError), and an
    upgrade does not start while the target release drops a rule in use.
    """
    secret_store_ref: SecretStoreRefSpec | None = None
    """The External Secrets store the SecretsReady condition checks. Default: the ClusterSecretStore
    openbao-cluster-store.
    """


MAX_CELLS = 8
"""``status.cells`` holds at most this many cells (cell0 and seven more)."""
CELL_NAME_MAX = 255
"""A cell name in ``status.cells`` (nova's column is 255 characters)."""


class CellStatus(CRDModel):
    name: Annotated[str, Field(max_length=CELL_NAME_MAX)]
    """Cell name (cell0, cell1)."""
    uuid: Annotated[str, Field(max_length=36)]
    """Cell UUID as nova-manage reports it."""


MAX_SERVICE_BINARIES = 16
"""Binaries ``status.services`` lists (nova has eight that register services)."""
SERVICE_BINARY_MAX = 64
HOST_MAX = 255
DOWN_HOSTS_SHOWN = 20


class ServiceBinaryStatus(CRDModel):
    binary: Annotated[str, Field(max_length=SERVICE_BINARY_MAX)]
    """The service binary, e.g. nova-compute, nova-conductor, nova-scheduler."""
    up: Int64
    """Its service records Nova reports up."""
    down: Int64
    """Its service records Nova reports down."""
    down_hosts: (
        Annotated[list[Annotated[str, Field(max_length=HOST_MAX)]], Field(max_length=DOWN_HOSTS_SHOWN)] | None
    ) = None
    """The hosts of the down records, sorted (the first 20; down counts them all)."""


class ServicesStatus(CRDModel):
    up: Int64
    """Service records Nova reports up, every binary."""
    down: Int64
    """Service records Nova reports down, every binary."""
    binaries: Annotated[list[ServiceBinaryStatus], Field(max_length=MAX_SERVICE_BINARIES)] | None = None
    """The same per binary, sorted by name."""


class NovaStatus(CRDModel):
    conditions: Conditions | None = None
    """Ready and one condition per reconcile step; each carries observedGeneration."""
    observed_generation: Int64 | None = None
    """The metadata.generation last reconciled."""
    endpoint: str | None = None
    """URL of the compute API, set once the API Deployment is available."""
    installed_release: str | None = None
    """The release whose schema is installed."""
    target_release: str | None = None
    """The release an upgrade is moving to; empty when no upgrade runs."""
    upgrade_phase: Literal["Expanding", "Migrating", "RollingUpdate", "Contracting"] | None = None
    """Expanding, Migrating, RollingUpdate or Contracting while an upgrade runs; empty otherwise."""
    cells: Annotated[list[CellStatus], Field(max_length=MAX_CELLS)] | None = None
    """The mapped cells, cell0 first."""
    compute_config_secret_ref: NameRef | None = None
    """The compute contract Secret {name}-compute-config that NovaCompute pools mount."""
    remote_compute_config_secret_ref: NameRef | None = None
    """The remote compute contract Secret {name}-remote-compute-config, while spec.remoteCompute is set."""
    services: ServicesStatus | None = None
    """Nova's own view of its services (GET /os-services): up and down records per binary and the
    hosts of the down ones, refreshed at each look of the ServiceRecords step (after a rollout or a
    scale-down of a role, and every 30 s while records wait; no extra call)."""


class Nova(CRDModel):
    """A ``Nova`` object as the API server stores it."""

    __crd_rules__ = (
        Rule(
            f"{_ON_CREATE} || self.metadata.name.size() <= 41",
            field_path=".metadata.name",
            optional_old_self=True,
            message='name must be at most 41 characters: the db-archive CronJob appends "-db-archive" '
            "and Kubernetes caps CronJob names at 52 characters",
        ),
        Rule(
            f"{_ON_CREATE} || !{_SUFFIX_LIST}.exists(s, self.metadata.name.endsWith(s))",
            field_path=".metadata.name",
            optional_old_self=True,
            message="name must not end in "
            + ", ".join(f'"{s}"' for s in _CHILD_SUFFIXES)
            + ": a Nova named like "
            "one of another Nova's children would share and delete that Nova's objects",
            message_expression=(
                f"{_SUFFIX_LIST}.filter(s, self.metadata.name.endsWith(s)).map(s, "
                "'name must not end in \"' + s + '\": a Nova named \"' + "
                "self.metadata.name.substring(0, self.metadata.name.size() - s.size()) + "
                "'\" in this namespace names one of its own children \"' + self.metadata.name + "
                "'\", so the two CRs would share and delete each other\\'s objects')[0]"
            ),
        ),
        Rule(
            f"{_ON_CREATE} || !self.metadata.name.endsWith('{CELL0_SUFFIX}')",
            field_path=".metadata.name",
            optional_old_self=True,
            message='name must not end in "-cell0": the cell0 Database and Grant are named '
            "<name>-<database>-cell0, so a Nova with this name could share them with another Nova "
            "in this namespace",
        ),
        Rule(  # beyond the spec's list (issue 26): the one other suffix that makes a name another Nova's
            f"{_ON_CREATE} || !self.metadata.name.endsWith('{REMOTE_SUFFIX}')",
            field_path=".metadata.name",
            optional_old_self=True,
            message=f'name must not end in "{REMOTE_SUFFIX}": the compute contract Secret '
            f"<name>-compute-config of a Nova named <x>{REMOTE_SUFFIX} is the remote compute contract "
            f"<x>{REMOTE_SUFFIX}-compute-config of a Nova named <x> in this namespace, so the two would "
            "share and delete each other's Secret",
        ),
        *(_spread_selector_rule(block, component) for block, component in _COMPONENTS),
        _spread_selector_rule("consoleProxy", "novncproxy"),
    )

    api_version: Literal["nova.openstack.c5c3.io/v1alpha1"] = API_VERSION
    """Versioned schema of this object: nova.openstack.c5c3.io/v1alpha1."""
    kind: Literal["Nova"] = "Nova"
    """Kind of this object: Nova."""
    metadata: ObjectMeta
    spec: NovaSpec
    """Desired state of the compute control plane."""
    status: NovaStatus | None = None
    """Observed state, written by the operator."""
