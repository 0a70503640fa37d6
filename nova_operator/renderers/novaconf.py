"""nova.conf, the four role overlays, logging.ini and the two compute fragments.

Everything here is a pure function of :class:`ConfInputs` (built from a ``Nova`` by
:func:`conf_inputs`), so the bytes depend on nothing else.  Serialization (spec
nova-crd §8.2): sections sorted by byte order (``DEFAULT`` first), keys sorted by byte
order, ``key = value`` lines, one blank line between sections, a single trailing newline,
no comments.  ``spec.extraConfig`` is merged over the operator defaults in ``nova.conf``
only, never into the overlays or the compute fragments.  Every value the operator renders
(constants and the CR's typed fields: user and project names, region, endpoints, cache
servers) is in oslo.config's literal form (``$`` doubled, ``renderers.oslo``), so nova reads
it as written; ``extraConfig`` values are oslo.config text and are merged as they are.

No password, DSN, transport URL or shared secret is ever rendered: they reach the pods as
``OS_<SECTION>__<KEY>`` environment overrides from Secrets (see ``workload.py``), which is
why the placeholders below exist and why the keys that carry them are rejected in
extraConfig (:data:`REJECTED_KEYS`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import yaml

from nova_operator import digests, image_contract, naming
from nova_operator.catalog import NoCatalogError, load_catalog, oslo_name
from nova_operator.models.nova import NOVA_REJECTED_EXTRA_CONFIG_KEYS
from nova_operator.renderers import db_pools, logging_conf, oslo
from nova_operator.renderers.env import render

if TYPE_CHECKING:
    from nova_operator.models.nova import Nova

__all__ = [
    "COMPUTE_CONFIG_DIR",
    "CONFIG_DIR",
    "LOGGING_INI_PATH",
    "OWNED_KEYS",
    "OWNED_PAIRS",
    "POLICY_CONF",
    "POLICY_DIR",
    "POLICY_FILE",
    "POLICY_YAML",
    "REJECTED_KEYS",
    "ConfInputs",
    "ConfigError",
    "RejectedKey",
    "RemoteComputeInputs",
    "compute_fragment_sections",
    "conf_inputs",
    "config_data",
    "config_map",
    "logging_ini",
    "nova_conf",
    "nova_conf_sections",
    "novncproxy_conf",
    "overridden_owned_keys",
    "policy_conf",
    "policy_data",
    "policy_map",
    "policy_yaml",
    "rejected_keys",
    "render_compute_fragment",
    "serialize",
    "workers_conf",
]

Sections = dict[str, dict[str, str]]

CONFIG_DIR = "/etc/nova/nova.conf.d"
LOGGING_INI_PATH = f"{CONFIG_DIR}/logging.ini"
COMPUTE_CONFIG_DIR = "/etc/nova/compute-config"
POLICY_YAML = "policy.yaml"  # the ConfigMap key of the rendered policy file (spec.policy)
POLICY_CONF = "policy.conf"  # the API's and metadata's overlay naming it ([oslo_policy] policy_file)
# spec.policy has a ConfigMap of its own, {name}-policy-<hash>, mounted here by the API and metadata
# pods only: a policy change rolls those two, not the others nor db-sync (the config ConfigMap keeps
# the keys reconciler.md §4.4 lists). Not /etc/nova/policy.d: oslo.policy reads every file of that
# directory as policy rules ([oslo_policy] policy_dirs), policy.conf too (a 500 on the next check)
POLICY_DIR = "/etc/nova/policy-override"
POLICY_FILE = f"{POLICY_DIR}/{POLICY_YAML}"
RABBIT_CA_FILE = "/etc/rabbitmq-ca/ca.crt"
HTTPS_CA_DIR = "/etc/nova-https-ca"
HTTPS_CA_FILE = f"{HTTPS_CA_DIR}/ca.crt"
CONTRACT_HTTPS_CA_KEY = "https-ca.crt"
"""The compute contract's key for the bundle of ``spec.tls`` (``ca.crt`` is the broker's)."""
#: The sections whose HTTPS client reads ``cafile`` (keystoneauth's session options), in every
#: catalog; ``[barbican]`` has ``verify_ssl_path`` everywhere and ``cafile`` only where
#: ``ConfInputs.barbican_cafile`` says the release's catalog knows it.
HTTPS_CA_SECTIONS = ("keystone_authtoken", "service_user", "placement", "glance", "neutron", "cinder")
RABBIT_CLIENT_DIR = "/etc/rabbitmq-client-tls"
CACHE_TLS_DIR = "/etc/memcached-tls"
NOVNC_WEB = image_contract.NOVNC_WEB
NOVNC_PORT = 6080
PLACEHOLDER_CONNECTION = "mysql+pymysql://placeholder"

# [filter_scheduler] (upstream-latest, spec nova-crd §8.2): the operator pins the failed-build
# weigher to 0 and shuffles equally weighed hosts.  The seed is silent; the spec says to
# implement upstream-latest facts unless the seed owner objects.  To drop them, set this to
# False and remove the section from OWNED_KEYS.
PIN_FILTER_SCHEDULER = True


class ConfigError(ValueError):
    """A rendered section would carry a newline or carriage return (or a rejected key)."""


@dataclass(frozen=True, slots=True)
class ConfInputs:
    """Everything nova.conf and the compute fragments are rendered from."""

    name: str
    namespace: str
    keystone_endpoint: str
    keystone_public_endpoint: str | None = None
    username: str = "nova"
    project_name: str = "service"
    user_domain_name: str = "Default"
    project_domain_name: str = "Default"
    region: str | None = None
    cache_servers: str = ""
    cache_backend: str = "dogpile.cache.pymemcache"
    messaging_tls: bool = False
    https_ca: bool = False  # spec.tls: every HTTPS section names the mounted CA bundle
    barbican_cafile: bool = False  # the release's catalog knows [barbican] cafile
    messaging_client_cert: bool = False  # spec.messaging.tls.clientCertSecretRef
    cache_tls: bool = False  # spec.cache.tls
    cache_client_cert: bool = False  # spec.cache.tls.clientCertSecretRef
    debug: bool = False
    log_format: str = "text"
    log_level: str = "INFO"
    per_logger_levels: Mapping[str, str] = field(default_factory=dict)
    placement_override: str | None = None
    neutron_override: str | None = None
    glance_override: str | None = None
    cinder_enabled: bool = False
    cinder_override: str | None = None
    barbican_enabled: bool = False
    barbican_override: str | None = None
    console_enabled: bool = True
    console_hostname: str | None = None
    scheduler_workers: int = 2
    conductor_workers: int = 2
    db_pool_size: int = 1  # ``max_pool_size`` and ``max_overflow`` of both databases (``db_pools``)
    conductor_db_pool: Mapping[str, str] = field(default_factory=dict)  # its overlay's ``[database]``
    extra_config: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # spec.policy's rules (rule name, check string), sorted; None while spec.policy is unset
    policy: tuple[tuple[str, str], ...] | None = None


@dataclass(frozen=True, slots=True)
class RemoteComputeInputs:
    """Re-addressing of the remote compute fragment (spec nova-crd §11.2)."""

    keystone_endpoint: str


# --------------------------------------------------------------------------- owned keys

_IDENTITY = ("auth_type", "auth_url", "username", "project_name", "user_domain_name", "project_domain_name")

#: Operator-owned keys a user may override in extraConfig; the override is honoured and
#: reported (ExtraConfigHealthy=False, OwnedKeysOverridden).  Static: conditionally
#: rendered keys are registered unconditionally (spec nova-crd §8.5).
OWNED_KEYS: Mapping[str, frozenset[str]] = {
    "DEFAULT": frozenset({"use_stderr", "debug", "default_log_levels", "log_config_append", "state_path"}),
    "api": frozenset({"local_metadata_per_cell"}),
    "api_database": frozenset(db_pools.POOL_OPTIONS),
    "database": frozenset(db_pools.POOL_OPTIONS),
    "keystone_authtoken": frozenset(
        {
            *_IDENTITY,
            "www_authenticate_uri",
            "region_name",
            "memcached_servers",
            "cafile",
            "memcache_use_advanced_pool",
            "memcache_tls_enabled",
            "memcache_tls_cafile",
            "memcache_tls_certfile",
            "memcache_tls_keyfile",
        }
    ),
    "service_user": frozenset({*_IDENTITY, "send_service_user_token", "region_name", "cafile"}),
    "placement": frozenset({*_IDENTITY, "region_name", "valid_interfaces", "endpoint_override", "cafile"}),
    "neutron": frozenset(
        {
            *_IDENTITY,
            "region_name",
            "valid_interfaces",
            "endpoint_override",
            "service_metadata_proxy",
            "cafile",
        }
    ),
    "glance": frozenset({"region_name", "valid_interfaces", "endpoint_override", "cafile"}),
    "cinder": frozenset({*_IDENTITY, "os_region_name", "catalog_info", "endpoint_template", "cafile"}),
    "key_manager": frozenset({"backend"}),
    "barbican": frozenset(
        {
            "auth_endpoint",
            "barbican_endpoint",
            "barbican_endpoint_type",
            "barbican_region_name",
            "send_service_user_token",
            "cafile",
            "verify_ssl_path",
        }
    ),
    "oslo_messaging_rabbit": frozenset(
        {
            "rabbit_quorum_queue",
            "rabbit_transient_quorum_queue",
            "use_queue_manager",
            "ssl_cert_file",
            "ssl_key_file",
        }
    ),
    "oslo_messaging_notifications": frozenset({"driver"}),
    "upgrade_levels": frozenset({"compute"}),
    "oslo_concurrency": frozenset({"lock_path"}),
    "cache": frozenset(
        {"enabled", "backend", "memcache_servers", "tls_enabled", "tls_cafile", "tls_certfile", "tls_keyfile"}
    ),
    "scheduler": frozenset({"discover_hosts_in_cells_interval", "workers"}),
    "conductor": frozenset({"workers"}),
    "filter_scheduler": frozenset({"build_failure_weight_multiplier", "shuffle_best_same_weighed_hosts"}),
    "vnc": frozenset({"enabled", "novncproxy_base_url"}),
}


class RejectedKey(NamedTuple):
    section: str
    key: str
    owner: str
    impact: str

    @property
    def message(self) -> str:
        return f"{self.key} is managed via {self.owner} and must not be set in extraConfig ({self.impact})"


#: Keys extraConfig must never set (spec nova-crd §6.6).  The registry lives with the model
#: (the CRD refuses them at admission); the renderer refuses them again rather than write
#: one into the ConfigMap.
REJECTED_KEYS: tuple[RejectedKey, ...] = tuple(
    RejectedKey(*entry) for entry in NOVA_REJECTED_EXTRA_CONFIG_KEYS
)


#: Every (section, key) the operator owns, reported or rejected: exempt from the option-catalog
#: scan (``catalog.unknown_options(release, extra, exempt=OWNED_PAIRS)``), spec nova-crd §6.6.
OWNED_PAIRS: frozenset[tuple[str, str]] = frozenset(
    {(s, k) for s, keys in OWNED_KEYS.items() for k in keys} | {(r.section, r.key) for r in REJECTED_KEYS}
)


def overridden_owned_keys(extra_config: Mapping[str, Mapping[str, str]]) -> list[tuple[str, str]]:
    """The reported owned keys ``extra_config`` overrides, sorted (drives ExtraConfigHealthy)."""
    return sorted(
        (s, k)
        for s, opts in extra_config.items()
        for k in opts
        if oslo_name(s, k)[1] in OWNED_KEYS.get(oslo_name(s, k)[0], ())
    )


def rejected_keys(extra_config: Mapping[str, Mapping[str, str]]) -> list[RejectedKey]:
    """The rejected keys ``extra_config`` sets, in registry order."""
    present = {oslo_name(s, k) for s, opts in extra_config.items() for k in opts}
    return [r for r in REJECTED_KEYS if (r.section, r.key) in present]


# --------------------------------------------------------------------------- serializer


def _check(sections: Mapping[str, Mapping[str, str]], what: str) -> None:
    for section in sorted(sections):
        if not section or "\n" in section or "\r" in section or "]" in section:
            raise ConfigError(f"{what}: section name {section!r} is not renderable")
        for key, value in sorted(sections[section].items()):
            if not key or any(c in key for c in "\n\r=") or key.strip() != key:
                raise ConfigError(f"{what}: [{section}] key {key!r} is not renderable")
            if "\n" in value or "\r" in value:
                raise ConfigError(f"{what}: [{section}] {key} contains a newline or carriage return")


def serialize(sections: Mapping[str, Mapping[str, str]], *, what: str = "nova.conf") -> str:
    """The deterministic INI text of ``sections`` (sorted sections and keys, ``key = value``)."""
    _check(sections, what)
    ordered = [(s, sorted(sections[s].items())) for s in sorted(sections)]
    return render("nova.conf.j2", sections=ordered)


# --------------------------------------------------------------------------- sections


def _literal(sections: Mapping[str, Mapping[str, str]], what: str) -> Sections:
    """The operator's sections in oslo.config's literal form (``$`` doubled, see ``oslo``).

    Every value here is a constant or comes from a typed field of the CR (a user name, a
    region, an endpoint): nova must read it as written, never expand ``$name`` in it.
    """
    try:
        return oslo.literal_sections(sections, what=what)
    except oslo.NotRepresentable as exc:
        raise ConfigError(str(exc)) from None


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _identity(inputs: ConfInputs, auth_url: str, *, region: bool = True) -> dict[str, str]:
    keys = {
        "auth_type": "password",
        "auth_url": auth_url,
        "username": inputs.username,
        "project_name": inputs.project_name,
        "user_domain_name": inputs.user_domain_name,
        "project_domain_name": inputs.project_domain_name,
    }
    if region and inputs.region:
        keys["region_name"] = inputs.region
    return keys


def _with(keys: dict[str, str], key: str, value: str | None) -> dict[str, str]:
    if value:
        keys[key] = value
    return keys


def novncproxy_base_url(inputs: ConfInputs) -> str:
    if inputs.console_hostname:
        return f"https://{inputs.console_hostname}/vnc_lite.html"
    return f"http://{inputs.name}-novncproxy.{inputs.namespace}.svc.cluster.local:{NOVNC_PORT}/vnc_lite.html"


def _trust(sections: Sections, inputs: ConfInputs, ca_file: str) -> None:
    """``cafile`` (and ``[barbican] verify_ssl_path``) in every rendered section that calls HTTPS."""
    if not inputs.https_ca:
        return
    for section in HTTPS_CA_SECTIONS:
        if section in sections:
            sections[section]["cafile"] = ca_file
    if "barbican" in sections:
        sections["barbican"]["verify_ssl_path"] = ca_file
        if inputs.barbican_cafile:
            sections["barbican"]["cafile"] = ca_file


def _client_sections(
    inputs: ConfInputs, *, remote: RemoteComputeInputs | None = None, ca_file: str = HTTPS_CA_FILE
) -> dict[str, dict[str, str]]:
    """[keystone_authtoken] (without memcached_servers), the client sections, [vnc] and the switches."""
    auth_url = remote.keystone_endpoint if remote else inputs.keystone_endpoint
    interface = "public" if remote else "internal"

    def override(value: str | None) -> str | None:
        return None if remote else value

    authtoken = _identity(inputs, auth_url)
    authtoken["www_authenticate_uri"] = inputs.keystone_public_endpoint or inputs.keystone_endpoint
    # Deviation from spec nova-crd §8.2, which lists `region_name (if set)` in [service_user]:
    # nova registers no such option there (only the auth plugin's options; checked against
    # nova 32.2.1, 33.0.2 and 34.0.0), so oslo-config-validator refuses it and nova would
    # ignore it.  It stays in the owned-key registry, which is static.
    service_user = _identity(inputs, auth_url, region=False)
    service_user["send_service_user_token"] = "true"
    sections: Sections = {
        "keystone_authtoken": authtoken,
        "service_user": service_user,
        "placement": _with(
            {**_identity(inputs, auth_url), "valid_interfaces": interface},
            "endpoint_override",
            override(inputs.placement_override),
        ),
        "neutron": _with(
            {**_identity(inputs, auth_url), "valid_interfaces": interface},
            "endpoint_override",
            override(inputs.neutron_override),
        ),
        "glance": _with(
            _with({"valid_interfaces": interface}, "region_name", inputs.region),
            "endpoint_override",
            override(inputs.glance_override),
        ),
        "vnc": {"enabled": _bool(inputs.console_enabled)},
    }
    if inputs.console_enabled:
        sections["vnc"]["novncproxy_base_url"] = novncproxy_base_url(inputs)
    if inputs.cinder_enabled:
        cinder = _identity(inputs, auth_url, region=False)
        cinder["catalog_info"] = f"block-storage:cinder:{interface}URL"
        _with(cinder, "os_region_name", inputs.region)
        sections["cinder"] = _with(cinder, "endpoint_template", override(inputs.cinder_override))
    if inputs.barbican_enabled:
        sections["key_manager"] = {"backend": "barbican"}
        barbican = {
            "auth_endpoint": auth_url,
            "barbican_endpoint_type": interface,
            "send_service_user_token": "true",
        }
        _with(barbican, "barbican_region_name", inputs.region)
        sections["barbican"] = _with(barbican, "barbican_endpoint", override(inputs.barbican_override))
    _trust(sections, inputs, ca_file)
    return sections


def _rabbit(inputs: ConfInputs, ca_file: str, client_dir: str) -> dict[str, str]:
    """``ca_file``: the broker CA's path; ``client_dir``: where ``tls.crt`` and ``tls.key`` of the client
    certificate are (a pod of the Nova: its own mount; nova-compute: the contract's)."""
    keys = {
        "rabbit_quorum_queue": "true",
        "rabbit_transient_quorum_queue": "true",
        "use_queue_manager": "true",
    }
    if inputs.messaging_tls:
        keys.update(ssl="true", ssl_ca_file=ca_file)
        if inputs.messaging_client_cert:
            keys.update(ssl_cert_file=f"{client_dir}/tls.crt", ssl_key_file=f"{client_dir}/tls.key")
    return keys


def _cache(inputs: ConfInputs) -> dict[str, str]:
    """[cache]: the region, and under ``spec.cache.tls`` TLS with the mounted CA (and client certificate)."""
    keys = {"enabled": "true", "backend": inputs.cache_backend}
    if inputs.cache_servers:
        keys["memcache_servers"] = inputs.cache_servers
    if inputs.cache_tls:
        keys.update(tls_enabled="true", tls_cafile=f"{CACHE_TLS_DIR}/ca.crt")
        if inputs.cache_client_cert:
            keys.update(tls_certfile=f"{CACHE_TLS_DIR}/tls.crt", tls_keyfile=f"{CACHE_TLS_DIR}/tls.key")
    return keys


def _token_cache(inputs: ConfInputs) -> dict[str, str]:
    """keystonemiddleware's token cache in [keystone_authtoken]: the cache's servers, and under
    ``spec.cache.tls`` the same files as [cache]. keystonemiddleware speaks TLS to memcached only
    through its advanced pool (oslo.cache's python-binary-memcached pool, in the image contract);
    its other pool would ignore the TLS options and dial in plaintext, so the advanced one is named."""
    keys = {"memcached_servers": inputs.cache_servers}
    if inputs.cache_tls:
        keys.update(
            memcache_use_advanced_pool="true",
            memcache_tls_enabled="true",
            memcache_tls_cafile=f"{CACHE_TLS_DIR}/ca.crt",
        )
        if inputs.cache_client_cert:
            keys.update(
                memcache_tls_certfile=f"{CACHE_TLS_DIR}/tls.crt",
                memcache_tls_keyfile=f"{CACHE_TLS_DIR}/tls.key",
            )
    return keys


def _pool(inputs: ConfInputs) -> dict[str, str]:
    """oslo.db's pool bounds, which ``db_pools.max_user_connections`` sizes the users' caps from."""
    size = str(inputs.db_pool_size)
    return {"max_pool_size": size, "max_overflow": size}


def nova_conf_sections(inputs: ConfInputs) -> Sections:
    """The operator defaults of nova.conf, then ``extraConfig`` merged over them per key."""
    default = {"use_stderr": "true", "debug": _bool(inputs.debug), "state_path": "/var/lib/nova"}
    if inputs.per_logger_levels:  # replaces oslo.log's and nova's defaults: they are merged in
        default["default_log_levels"] = logging_conf.default_log_levels(_log_levels(inputs))
    if inputs.log_format == "json":
        default["log_config_append"] = LOGGING_INI_PATH
    sections: Sections = {
        "DEFAULT": default,
        "api": {"local_metadata_per_cell": "false"},
        "api_database": {"connection": PLACEHOLDER_CONNECTION, **_pool(inputs)},
        "database": {"connection": PLACEHOLDER_CONNECTION, **_pool(inputs)},
        **_client_sections(inputs),
        "oslo_messaging_rabbit": _rabbit(inputs, RABBIT_CA_FILE, RABBIT_CLIENT_DIR),
        "oslo_messaging_notifications": {"driver": "noop"},
        "oslo_concurrency": {"lock_path": "/var/lib/nova/tmp"},
        "upgrade_levels": {"compute": "auto"},
        "cache": _cache(inputs),
        "scheduler": {"discover_hosts_in_cells_interval": "300"},
    }
    if inputs.cache_servers:
        sections["keystone_authtoken"].update(_token_cache(inputs))
    if PIN_FILTER_SCHEDULER:
        sections["filter_scheduler"] = {
            "build_failure_weight_multiplier": "0",
            "shuffle_best_same_weighed_hosts": "true",
        }
    sections = _literal(sections, "nova.conf")
    if rejected := rejected_keys(inputs.extra_config):
        raise ConfigError("; ".join(f"spec.extraConfig[{r.section}][{r.key}]: {r.message}" for r in rejected))
    for section, options in inputs.extra_config.items():
        sections.setdefault(section, {}).update(options)
    return sections


def nova_conf(inputs: ConfInputs) -> str:
    return serialize(nova_conf_sections(inputs))


def compute_fragment_sections(inputs: ConfInputs, *, remote: RemoteComputeInputs | None = None) -> Sections:
    """The ``nova-compute.conf`` fragment of the compute contract (spec nova-crd §11)."""
    sections: Sections = {
        "DEFAULT": {"use_stderr": "true", "debug": _bool(inputs.debug)},
        **_client_sections(inputs, remote=remote, ca_file=f"{COMPUTE_CONFIG_DIR}/{CONTRACT_HTTPS_CA_KEY}"),
        "oslo_messaging_rabbit": _rabbit(inputs, f"{COMPUTE_CONFIG_DIR}/ca.crt", COMPUTE_CONFIG_DIR),
        "oslo_messaging_notifications": {"driver": "noop"},
        "upgrade_levels": {"compute": "auto"},
    }
    return _literal(sections, "remote nova-compute.conf" if remote else "nova-compute.conf")


class _Rendered:
    """What was rendered for which inputs, the last ``size`` of them (the oldest go first).

    Every pass renders the config of its Nova again and, while the spec and the values it was
    rendered from are unchanged, gets the same text: the key is the ``repr`` of the frozen inputs
    (every field, mappings included; kept as its 128-bit BLAKE2b), so equal inputs read the text
    back instead of rendering it. A ``ConfigError`` is never kept (it is raised again on every call).
    """

    def __init__(self, size: int = 128) -> None:
        self._size = size
        self._texts: dict[bytes, Any] = {}

    @staticmethod
    def _key(text: str) -> bytes:
        return hashlib.blake2b(text.encode(), digest_size=16).digest()

    def get(self, key: str) -> Any:
        return self._texts.get(self._key(key))

    def put(self, key: str, value: Any) -> None:
        hashed = self._key(key)
        self._texts.pop(hashed, None)
        self._texts[hashed] = value
        if len(self._texts) > self._size:
            del self._texts[next(iter(self._texts))]


_FRAGMENTS = _Rendered()
_CONFIGS = _Rendered()


def render_compute_fragment(inputs: ConfInputs, *, remote: RemoteComputeInputs | None = None) -> str:
    key = f"{inputs!r}|{remote!r}"
    found: str | None = _FRAGMENTS.get(key)
    if found is None:
        what = "remote nova-compute.conf" if remote else "nova-compute.conf"
        found = serialize(compute_fragment_sections(inputs, remote=remote), what=what)
        _FRAGMENTS.put(key, found)
    return found


# --------------------------------------------------------------------------- overlays


def metadata_conf() -> str:
    return render("metadata.conf.j2")


def workers_conf(section: str, workers: int, database: Mapping[str, str] | None = None) -> str:
    return render("workers.conf.j2", section=section, workers=int(workers), database=dict(database or {}))


def novncproxy_conf() -> str:
    return render("novncproxy.conf.j2", web=NOVNC_WEB, port=NOVNC_PORT)


def policy_yaml(rules: Sequence[tuple[str, str]]) -> str:
    """The policy file oslo.policy reads: one ``"rule": "check"`` mapping entry per rule, sorted."""
    return yaml.safe_dump(dict(sorted(rules)), default_flow_style=False, sort_keys=True, width=1 << 16)


def policy_conf() -> str:
    """The overlay of the API and metadata pods that points oslo.policy at the rendered policy file."""
    return serialize(_literal({"oslo_policy": {"policy_file": POLICY_FILE}}, POLICY_CONF), what=POLICY_CONF)


def _log_levels(inputs: ConfInputs) -> tuple[tuple[str, str], ...]:
    try:
        return logging_conf.log_levels(inputs.per_logger_levels, inputs.extra_config)
    except logging_conf.LoggerNameError as exc:
        raise ConfigError(str(exc)) from None


def logging_ini(inputs: ConfInputs) -> str:
    """``logging.ini`` (json format): oslo.log reads nothing else once ``log_config_append`` is set, so
    it carries the root level (``DEBUG`` under ``debug``, else ``level``) and every library level."""
    root = "DEBUG" if inputs.debug else inputs.log_level
    try:
        return logging_conf.logging_ini(root, _log_levels(inputs))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def config_data(inputs: ConfInputs) -> dict[str, str]:
    """The ``{name}-config-<hash>`` ConfigMap data: nova.conf, four overlays, logging.ini under json.

    Rendered once per distinct inputs (``_Rendered``); each call returns a dict of its own."""
    key = repr(inputs)
    found: dict[str, str] | None = _CONFIGS.get(key)
    if found is None:
        found = _config_data(inputs)
        _CONFIGS.put(key, found)
    return dict(found)


def _config_data(inputs: ConfInputs) -> dict[str, str]:
    data = {
        "nova.conf": nova_conf(inputs),
        "metadata.conf": metadata_conf(),
        "scheduler.conf": workers_conf("scheduler", inputs.scheduler_workers),
        "conductor.conf": workers_conf("conductor", inputs.conductor_workers, inputs.conductor_db_pool),
        "novncproxy.conf": novncproxy_conf(),
    }
    if inputs.log_format == "json":
        data["logging.ini"] = logging_ini(inputs)
    return dict(sorted(data.items()))


def policy_data(inputs: ConfInputs) -> dict[str, str]:
    """The ``{name}-policy-<hash>`` ConfigMap data: the policy file and its overlay (empty while
    spec.policy is unset: no such ConfigMap)."""
    if inputs.policy is None:
        return {}
    return {POLICY_CONF: policy_conf(), POLICY_YAML: policy_yaml(inputs.policy)}


# --------------------------------------------------------------------------- from the CR


def cache_servers(nova: Nova) -> str:
    """``servers`` joined with ``,`` (brownfield) or ``{clusterRef.name}:11211`` (managed)."""
    cache = nova.spec.cache
    if cache.cluster_ref is not None and cache.cluster_ref.name:
        return f"{cache.cluster_ref.name}:11211"
    return ",".join(cache.servers or [])


def knows_barbican_cafile(release: str) -> bool:
    """Whether the option catalog of ``release`` (a ``-suffix`` ignored) has ``[barbican] cafile``
    (2025.2's has not); a release without a catalog: no."""
    try:
        return load_catalog(release.partition("-")[0]).knows("barbican", "cafile")
    except NoCatalogError:
        return False


def policy_rules(
    nova: Nova, from_config_map: Mapping[str, str] | None = None
) -> tuple[tuple[str, str], ...] | None:
    """spec.policy's rules, sorted: the map, or ``from_config_map`` (what the Config step read from the
    ConfigMap ``spec.policy.configMapRef`` names); None while spec.policy is unset."""
    policy = nova.spec.policy
    if policy is None:
        return None
    rules = policy.rules if policy.rules is not None else (from_config_map or {})
    return tuple(sorted(rules.items()))


def conf_inputs(nova: Nova, *, policy_from_config_map: Mapping[str, str] | None = None) -> ConfInputs:
    """The :class:`ConfInputs` of a (defaulted) Nova; reads the model, never mutates it.

    ``policy_from_config_map``: the rules of the ConfigMap ``spec.policy.configMapRef`` names, read by
    the caller (no I/O here)."""
    spec = nova.spec
    user = spec.service_user
    endpoints = spec.endpoints
    logging = spec.logging
    console = spec.console_proxy
    if not nova.metadata.name:
        raise ConfigError("metadata.name is required to render nova.conf")
    bus_tls, cache_tls = spec.messaging.tls, spec.cache.tls
    return ConfInputs(
        name=nova.metadata.name,
        namespace=nova.metadata.namespace or "default",
        keystone_endpoint=spec.keystone_endpoint,
        keystone_public_endpoint=spec.keystone_public_endpoint or None,
        username=user.username,
        project_name=user.project_name,
        user_domain_name=user.user_domain_name,
        project_domain_name=user.project_domain_name,
        region=spec.region or None,
        cache_servers=cache_servers(nova),
        cache_backend=spec.cache.backend or "dogpile.cache.pymemcache",
        messaging_tls=spec.messaging.tls is not None,
        https_ca=spec.tls is not None,
        barbican_cafile=spec.tls is not None and knows_barbican_cafile(spec.open_stack_release),
        messaging_client_cert=bus_tls is not None and bus_tls.client_cert_secret_ref is not None,
        cache_tls=cache_tls is not None,
        cache_client_cert=cache_tls is not None and cache_tls.client_cert_secret_ref is not None,
        debug=bool(logging.debug),
        log_format=logging.format or "text",
        log_level=logging.level or "INFO",
        per_logger_levels=dict(logging.per_logger_levels or {}),
        placement_override=endpoints.placement.override or None,
        neutron_override=endpoints.neutron.override or None,
        glance_override=endpoints.glance.override or None,
        cinder_enabled=bool(endpoints.cinder.enabled),
        cinder_override=endpoints.cinder.override or None,
        barbican_enabled=bool(endpoints.barbican.enabled),
        barbican_override=endpoints.barbican.override or None,
        console_enabled=console.enabled is not False,
        console_hostname=console.gateway.hostname if console.gateway is not None else None,
        scheduler_workers=spec.scheduler.workers or 2,
        conductor_workers=spec.conductor.workers or 2,
        db_pool_size=db_pools.threads(nova),
        conductor_db_pool=db_pools.conductor_pool_keys(nova),
        extra_config={s: dict(opts) for s, opts in (spec.extra_config or {}).items()},
        policy=policy_rules(nova, policy_from_config_map),
    )


def config_map(nova: Nova, data: Mapping[str, str], *, base: str = "config") -> dict[str, Any]:
    """The immutable, content-addressed ``{name}-{base}-<hash>`` ConfigMap of ``data`` (``base``:
    ``config``, or ``policy`` for ``policy_map``), labelled ``config-base: {name}-{base}``."""
    name = nova.metadata.name or ""
    if not name:
        raise ConfigError(f"metadata.name is required to render the {base} ConfigMap")
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": naming.config_map_name(name, digests.config_hash(data), base=base),
            "namespace": nova.metadata.namespace or "default",
            "labels": {
                **naming.common_labels(name),
                naming.CONFIG_BASE_LABEL: naming.config_base_label(name, base=base),
            },
        },
        "immutable": True,
        "data": dict(sorted(data.items())),
    }


def policy_map(nova: Nova, data: Mapping[str, str]) -> dict[str, Any]:
    """The immutable, content-addressed ``{name}-policy-<hash>`` ConfigMap of ``policy_data``."""
    return config_map(nova, data, base="policy")
