"""Every CEL rule of the generated CRDs, against the real API server.

The rule table: for every CEL rule of the generated CRDs, an object the API server must
refuse with that rule's message and the nearest object it must accept.

A case names the rule it covers by the schema path the rule is attached to and the rule's
``message``; ``test_every_rule_is_covered`` checks that these keys are exactly the rules
of the generated CRDs. Shared blocks (deployment, resources, tolerations, URLs, ...) appear
once per place they are used, because each place carries its own copy of the rule.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from kubernetes_asyncio.client.exceptions import ApiException

from nova_operator.models import Nova, NovaCompute
from nova_operator.models.common import deprecated_names
from nova_operator.models.crd import render_crds
from nova_operator.models.nova import NOVA_REJECTED_EXTRA_CONFIG_KEYS
from nova_operator.models.novacompute import NOVACOMPUTE_REJECTED_EXTRA_CONFIG_KEYS

if TYPE_CHECKING:
    from conftest import Objects

Obj = dict[str, Any]
Mutation = Callable[[Obj], None]

NOVAS = "novas"
NOVACOMPUTES = "novacomputes"


def minimal_nova(name: str = "nova") -> Obj:
    return {
        "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
        "kind": "Nova",
        "metadata": {"name": name},
        "spec": {
            "openStackRelease": "2025.2",
            "image": {"repository": "ghcr.io/c5c3/nova", "tag": "2025.2"},
            "apiDatabase": {
                "clusterRef": {"name": "mariadb"},
                "database": "nova_api",
                "secretRef": {"name": "nova-api-db-credentials"},
            },
            "database": {
                "clusterRef": {"name": "mariadb"},
                "database": "nova",
                "secretRef": {"name": "nova-cell-db-credentials"},
            },
            "cache": {"clusterRef": {"name": "memcached"}},
            "messaging": {"clusterRef": {"name": "rabbitmq"}},
            "keystoneEndpoint": "http://keystone-api.openstack.svc:5000/v3",
            "serviceUser": {"secretRef": {"name": "nova-service-user"}},
            "metadata": {"sharedSecretRef": {"name": "nova-metadata-proxy"}},
        },
    }


def minimal_novacompute(name: str = "pool") -> Obj:
    return {
        "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
        "kind": "NovaCompute",
        "metadata": {"name": name},
        "spec": {"novaRef": {"name": "nova"}, "nodeSelector": {"example.org/pool": "a"}},
    }


BASES: dict[str, Callable[[], Obj]] = {NOVAS: minimal_nova, NOVACOMPUTES: minimal_novacompute}
MODELS: dict[str, type[Nova] | type[NovaCompute]] = {NOVAS: Nova, NOVACOMPUTES: NovaCompute}


# --- mutations -----------------------------------------------------------------------------


def _walk(obj: Obj, dotted: str) -> tuple[Obj, str]:
    *parents, leaf = dotted.split(".")
    for part in parents:
        obj = obj.setdefault(part, {})
    return obj, leaf


def put(dotted: str, value: Any) -> Mutation:
    """Set ``dotted`` (creating missing objects on the way) to ``value``."""

    def apply(obj: Obj) -> None:
        parent, leaf = _walk(obj, dotted)
        parent[leaf] = copy.deepcopy(value)

    return apply


def drop(dotted: str) -> Mutation:
    def apply(obj: Obj) -> None:
        parent, leaf = _walk(obj, dotted)
        parent.pop(leaf, None)

    return apply


def both(*mutations: Mutation) -> Mutation:
    def apply(obj: Obj) -> None:
        for m in mutations:
            m(obj)

    return apply


@dataclass(frozen=True)
class Case:
    plural: str
    path: str  # schema path of the rule ("" = the object root), [*] for list items / map values
    message: str  # the rule's message: the coverage key, and what the server must answer with
    bad: Mutation
    good: Mutation
    update: bool = False  # a transition rule: applied as an update of a stored object
    expect: str = ""  # what the error must contain, when it is not ``message`` (messageExpression)
    error_path: str | None = None  # the field path the server names; default: ``path`` + the rule's fieldPath

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.plural, self.path, self.message)

    @property
    def id(self) -> str:
        return f"{self.plural}:{self.path or '<root>'}:{self.message[:60]}"


# --- rule messages, read from the generated CRDs (so the table cannot drift) ---------------


@functools.cache
def crd_rules() -> list[tuple[str, str, str, dict[str, Any]]]:
    """(plural, path, message, rule) for every x-kubernetes-validations entry of both CRDs."""
    out: list[tuple[str, str, str, dict[str, Any]]] = []

    def walk(plural: str, schema: dict[str, Any], path: str) -> None:
        for rule in schema.get("x-kubernetes-validations", []):
            out.append((plural, path, rule.get("message", ""), rule))
        for name, sub in sorted(schema.get("properties", {}).items()):
            walk(plural, sub, f"{path}.{name}" if path else name)
        if isinstance(schema.get("items"), dict):
            walk(plural, schema["items"], f"{path}[*]")
        if isinstance(schema.get("additionalProperties"), dict):
            walk(plural, schema["additionalProperties"], f"{path}[*]")

    for text in render_crds().values():
        crd = yaml.safe_load(text)
        plural = crd["spec"]["names"]["plural"]
        walk(plural, crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"], "")
    return out


def message(plural: str, path: str, startswith: str) -> str:
    """The full message of the one rule at ``path`` whose message starts with ``startswith``."""
    found = [m for p, q, m, _ in crd_rules() if p == plural and q == path and m.startswith(startswith)]
    if len(found) != 1:
        raise LookupError(f"{plural} {path!r}: {len(found)} rules start with {startswith!r}")
    return found[0]


# --- the table -----------------------------------------------------------------------------

DEPLOYMENTS = ("spec.api", "spec.metadata", "spec.scheduler", "spec.conductor", "spec.consoleProxy")
URL_FIELDS = (
    "spec.keystoneEndpoint",
    "spec.keystonePublicEndpoint",
    "spec.endpoints.placement.override",
    "spec.endpoints.neutron.override",
    "spec.endpoints.glance.override",
    "spec.endpoints.cinder.override",
    "spec.endpoints.barbican.override",
)
REMOTE = {
    "keystoneEndpoint": "https://keystone.example.org/v3",
    "transportURLSecretRef": {"name": "remote-url"},
}
MESSAGING_TLS = put("spec.messaging.tls", {"caBundleSecretRef": {"name": "rabbitmq-ca"}})


def _shared_block_cases(plural: str, prefix: str) -> Iterator[Case]:
    """resources and tolerations: wherever a pod block carries them."""
    yield Case(
        plural,
        f"{prefix}.resources",
        message(plural, f"{prefix}.resources", "a resource request"),
        put(f"{prefix}.resources", {"requests": {"cpu": "2"}, "limits": {"cpu": "1500m"}}),
        put(f"{prefix}.resources", {"requests": {"cpu": "1500m"}, "limits": {"cpu": 2}}),
    )
    yield Case(
        plural,
        f"{prefix}.tolerations[*]",
        message(plural, f"{prefix}.tolerations[*]", "operator must be Exists"),
        put(f"{prefix}.tolerations", [{"operator": "Equal", "value": "x", "effect": "NoSchedule"}]),
        put(f"{prefix}.tolerations", [{"operator": "Exists", "effect": "NoSchedule"}]),
        error_path=f"{prefix}.tolerations[0]",
    )


def _extra_config_cases(plural: str, rejected: tuple[tuple[str, str, str, str], ...]) -> Iterator[Case]:
    path = "spec.extraConfig"
    ok = {"DEFAULT": {"debug_option_x": "1"}}
    yield Case(
        plural,
        path,
        message(plural, path, "extraConfig section name must not be empty"),
        put(path, {"": {"a": "b"}}),
        put(path, ok),
    )
    yield Case(
        plural,
        path,
        message(plural, path, "extraConfig section name must not contain"),
        put(path, {"DEF\nAULT": {"a": "b"}}),
        put(path, ok),
    )
    yield Case(
        plural,
        path,
        message(plural, path, "extraConfig key must not be empty"),
        put(path, {"DEFAULT": {"": "b"}}),
        put(path, ok),
    )
    # issue 36: a Kelvin sign is 'k' once oslo.config lowercases the section
    for bad in ({"\u212aeystone_authtoken": {"password": "x"}}, {"DEFAULT": {"d\u00e9bug": "1"}}):
        yield Case(
            plural,
            path,
            message(plural, path, "extraConfig section and key names must be printable ASCII"),
            put(path, bad),
            put(path, {"keystone_authtoken": {"memcache_pool_maxsize": "10"}}),
        )
    yield Case(
        plural,
        path,
        message(plural, path, "extraConfig section name must be DEFAULT or lower case"),
        put(path, {"Keystone_Authtoken": {"a": "b"}}),
        put(path, {"keystone_authtoken": {"a": "b"}, "DEFAULT": {"c": "d"}}),
    )
    yield Case(
        plural,
        path,
        message(plural, path, "extraConfig key must not contain"),
        put(path, {"DEFAULT": {"transport_url:x": "b"}}),
        put(path, {"DEFAULT": {"debug_x": "b"}}),
    )
    yield Case(
        plural,
        f"{path}[*]",
        message(plural, f"{path}[*]", "extraConfig key and value"),
        put(path, {"DEFAULT": {"a\rb": "b"}}),
        put(path, ok),
        error_path=f"{path}[DEFAULT]",
    )
    yield Case(
        plural,
        f"{path}[*][*]",
        message(plural, f"{path}[*][*]", "extraConfig key and value"),
        put(path, {"DEFAULT": {"a": "b\nc"}}),
        put(path, {"DEFAULT": {"a": "b c"}}),
        error_path=f"{path}[DEFAULT][a]",
    )
    yield Case(  # issue 26 item 6: options nova marks secret never reach the ConfigMap
        plural,
        path,
        message(plural, path, "extraConfig must not set an option nova marks secret"),
        put(path, {"vault": {"root_token_id": "s.x", "kv_mountpoint": "secret"}}),
        put(path, {"vault": {"kv_mountpoint": "secret"}}),
    )
    # issue 36: a deprecated name of a secret option is the option to oslo.config
    yield Case(
        plural,
        path,
        message(plural, path, "extraConfig must not set an option nova marks secret"),
        put(path, {"keymgr": {"fixed_key": "k3y", "other": "y"}}),  # [key_manager] fixed_key
        put(path, {"keymgr": {"fixed_key_x": "x", "other": "y"}}),
    )
    for section, key, owner, impact in rejected:
        yield Case(
            plural,
            path,
            f"{key} is managed via {owner} and must not be set in extraConfig ({impact})",
            put(path, {section: {key: "x", "other": "y"}}),
            put(path, {section: {f"{key}_not_owned": "x", "other": "y"}}),
        )
        for old_section, old_key in deprecated_names(section, key):  # issue 36: resolved first
            yield Case(
                plural,
                path,
                f"[{old_section}] {old_key} is a deprecated name of [{section}] {key}, which is managed "
                f"via {owner} and must not be set in extraConfig ({impact})",
                put(path, {old_section: {old_key: "x", "other": "y"}}),
                put(path, {old_section: {f"{old_key}_not_owned": "x", "other": "y"}}),
            )


def _nova_cases() -> Iterator[Case]:
    n = NOVAS

    def m(path: str, start: str) -> str:
        return message(n, path, start)

    # --- the object root: names that would collide with children
    yield Case(
        n,
        "",
        m("", "name must be at most 41"),
        put("metadata.name", "n" * 42),
        put("metadata.name", "n" * 41),
    )
    for suffix in ("-api", "-metadata", "-scheduler", "-conductor", "-novncproxy", "-console"):
        yield Case(
            n,
            "",
            m("", 'name must not end in "-api"'),
            put("metadata.name", f"nova{suffix}"),
            put("metadata.name", f"nova{suffix}x"),
            expect=f'name must not end in "{suffix}": a Nova named "nova" in this namespace names one of its '
            f'own children "nova{suffix}"',
        )
    yield Case(
        n,
        "",
        m("", 'name must not end in "-cell0"'),
        put("metadata.name", "nova-cell0"),
        put("metadata.name", "nova-cell"),
    )
    yield Case(  # issue 26: Nova x-remote's x-remote-compute-config is Nova x's remote contract
        n,
        "",
        m("", 'name must not end in "-remote"'),
        put("metadata.name", "x-remote"),
        put("metadata.name", "x-remotes"),
    )

    # --- spec: the two database blocks, the remote compute, autoscaling
    yield Case(
        n,
        "spec",
        m("spec", "apiDatabase and database must name different schemas"),
        put("spec.apiDatabase.database", "nova"),
        put("spec.apiDatabase.database", "nova_api2"),
    )
    yield Case(
        n,
        "spec",
        m("spec", "apiDatabase must not name the cell0"),
        put("spec.apiDatabase.database", "nova_cell0"),
        put("spec.apiDatabase.database", "nova_cell1"),
    )
    yield Case(
        n,
        "spec",
        m("spec", "apiDatabase and database must use the same credentialsMode"),
        put("spec.apiDatabase.credentialsMode", "Dynamic"),
        both(
            put("spec.apiDatabase.credentialsMode", "Dynamic"),
            put("spec.database.credentialsMode", "Dynamic"),
        ),
    )
    yield Case(
        n,
        "spec",
        m("spec", "remoteCompute requires messaging.tls"),
        put("spec.remoteCompute", REMOTE),
        both(put("spec.remoteCompute", REMOTE), MESSAGING_TLS),
    )
    yield Case(
        n,
        "spec",
        m("spec", "autoscaling.maxReplicas must be at least"),
        put("spec.autoscaling", {"maxReplicas": 2, "targetCPUUtilization": 80}),
        put("spec.autoscaling", {"maxReplicas": 3, "targetCPUUtilization": 80}),
    )

    # --- a utilization target needs a request and must be reachable
    def scaled(target: str, value: int, resources: Obj) -> Mutation:
        return both(
            put("spec.autoscaling", {"maxReplicas": 5, target: value}),
            put("spec.api.deployment", {"resources": resources}),
        )

    for resource, target in (("cpu", "targetCPUUtilization"), ("memory", "targetMemoryUtilization")):
        one = "1" if resource == "cpu" else "1Gi"
        yield Case(
            n,
            "spec",
            m("spec", f"{resource} request must be greater than zero"),
            scaled(target, 80, {"requests": {resource: "0"}}),
            scaled(target, 80, {"requests": {resource: one}}),
        )
        unreachable = m("spec", f"{target} can never be reached")
        yield Case(
            n,
            "spec",
            unreachable,
            scaled(target, 150, {"requests": {resource: one}, "limits": {resource: one}}),
            scaled(target, 100, {"requests": {resource: one}, "limits": {resource: one}}),
        )
        yield Case(
            n,
            "spec",
            unreachable,
            scaled(target, 150, {"limits": {resource: one}}),
            scaled(target, 150, {"requests": {resource: one}}),
        )
    yield Case(
        n,
        "spec",
        m("spec", "targetMemoryUtilization can never be reached"),
        put("spec.autoscaling", {"maxReplicas": 5, "targetMemoryUtilization": 120}),
        put("spec.autoscaling", {"maxReplicas": 5, "targetMemoryUtilization": 100}),
    )

    # --- topology spread constraints count exactly their own Deployment's pods
    for block, component in (
        ("api", "api"),
        ("metadata", "metadata"),
        ("scheduler", "scheduler"),
        ("conductor", "conductor"),
        ("consoleProxy", "novncproxy"),
    ):
        labels = {
            "app.kubernetes.io/name": "nova",
            "app.kubernetes.io/instance": "nova",
            "app.kubernetes.io/component": component,
        }
        spread = {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
        }
        path = f"spec.{block}.deployment.topologySpreadConstraints"
        yield Case(
            n,
            "",
            m("", f"topologySpreadConstraints labelSelector must equal the pod selector of the {component} "),
            put(
                path,
                [{**spread, "labelSelector": {"matchLabels": {**labels, "app.kubernetes.io/instance": "x"}}}],
            ),
            put(path, [{**spread, "labelSelector": {"matchLabels": labels}}]),
            error_path=path,
        )

    # --- every clusterRef: the schema default "" is refused by a rule (issue 13)
    for block in ("spec.apiDatabase", "spec.database", "spec.cache", "spec.messaging"):
        ref = f"{block}.clusterRef"
        yield Case(
            n,
            ref,
            m(ref, "clusterRef.name must be set"),
            put(ref, {}),
            put(ref, {"name": "backend-1"}),
            error_path=f"{ref}.name",
        )

    # --- database blocks
    for block, label in (("spec.apiDatabase", "apiDatabase"), ("spec.database", "database")):
        brownfield = {"host": "db.example.org", "database": "x", "secretRef": {"name": "creds"}}
        yield Case(
            n,
            block,
            m(block, "exactly one of clusterRef or host"),
            put(f"{block}.host", "db.example.org"),
            both(drop(f"{block}.clusterRef"), put(f"{block}.host", "db.example.org")),
        )
        yield Case(
            n,
            block,
            m(block, "credentialsMode Dynamic requires clusterRef"),
            both(
                put(block, {**brownfield, "database": "nova" if label == "database" else "nova_api"}),
                put("spec.apiDatabase.credentialsMode", "Dynamic"),
                put("spec.database.credentialsMode", "Dynamic"),
            ),
            both(
                put(block, {**brownfield, "database": "nova" if label == "database" else "nova_api"}),
                put("spec.apiDatabase.credentialsMode", "Static"),
                put("spec.database.credentialsMode", "Static"),
            ),
        )
        yield Case(
            n,
            block,
            m(block, f"{label}.database is immutable"),
            put(f"{block}.database", "renamed"),
            put(f"{block}.secretRef.name", "rotated-credentials"),
            update=True,
        )
        yield Case(
            n,
            block,
            m(block, f"{label} mode (managed clusterRef vs brownfield host) is immutable"),
            both(drop(f"{block}.clusterRef"), put(f"{block}.host", "db.example.org")),
            put(f"{block}.clusterRef.name", "mariadb-2"),
            update=True,
        )
    yield Case(
        n,
        "spec.database",
        m("spec.database", "database.database must be at most 58"),
        put("spec.database.database", "d" * 59),
        put("spec.database.database", "d" * 58),
    )

    # --- deployment blocks and uWSGI
    for block in DEPLOYMENTS:
        dep = f"{block}.deployment"
        yield Case(
            n,
            dep,
            m(dep, "preStopSleepSeconds must be strictly less"),
            put(dep, {"terminationGracePeriodSeconds": 20, "preStopSleepSeconds": 20}),
            put(dep, {"terminationGracePeriodSeconds": 20, "preStopSleepSeconds": 19}),
        )
        yield Case(
            n,
            f"{dep}.strategy",
            m(f"{dep}.strategy", "rollingUpdate may not be set"),
            put(f"{dep}.strategy", {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}),
            put(f"{dep}.strategy", {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}),
        )
        yield from _shared_block_cases(n, dep)
    yield from _shared_block_cases(n, "spec.jobs")
    for block in ("spec.api", "spec.metadata"):
        yield Case(
            n,
            block,
            m(block, "harakiri must be strictly less"),
            put(f"{block}.uwsgi", {"harakiri": 25}),
            put(f"{block}.uwsgi", {"harakiri": 24}),
        )
        yield Case(
            n,
            f"{block}.uwsgi",
            m(f"{block}.uwsgi", "httpKeepAliveTimeout may only be set"),
            put(f"{block}.uwsgi", {"httpKeepAlive": False, "httpKeepAliveTimeout": 5}),
            put(f"{block}.uwsgi", {"httpKeepAlive": True, "httpKeepAliveTimeout": 5}),
        )

    # --- console proxy
    yield Case(
        n,
        "spec.consoleProxy",
        m("spec.consoleProxy", "consoleProxy.deployment must not be set"),
        put("spec.consoleProxy", {"enabled": False, "deployment": {"replicas": 1}}),
        put("spec.consoleProxy", {"enabled": False}),
    )
    gateway = {"hostname": "novnc.example.org", "parentRef": {"name": "gw"}}
    yield Case(
        n,
        "spec.consoleProxy",
        m("spec.consoleProxy", "consoleProxy.gateway.path must be empty or /"),
        put("spec.consoleProxy.gateway", {**gateway, "path": "/vnc"}),
        put("spec.consoleProxy.gateway", {**gateway, "path": "/"}),
    )

    # --- autoscaling, network policy, logging
    yield Case(
        n,
        "spec.autoscaling",
        m("spec.autoscaling", "at least one of targetCPUUtilization"),
        put("spec.autoscaling", {"maxReplicas": 5}),
        put("spec.autoscaling", {"maxReplicas": 5, "targetMemoryUtilization": 75}),
    )
    yield Case(
        n,
        "spec.autoscaling",
        m("spec.autoscaling", "minReplicas must not exceed maxReplicas"),
        put("spec.autoscaling", {"minReplicas": 6, "maxReplicas": 5, "targetCPUUtilization": 80}),
        put("spec.autoscaling", {"minReplicas": 5, "maxReplicas": 5, "targetCPUUtilization": 80}),
    )
    yield Case(
        n,
        "spec.networkPolicy",
        m("spec.networkPolicy", "at least one ingress source"),
        put("spec.networkPolicy", {"ingress": []}),
        put("spec.networkPolicy", {"ingress": [{"namespaceSelector": {}}]}),
    )
    levels = "spec.logging.perLoggerLevels"
    yield Case(
        n,
        levels,
        m(levels, "logger name must not be empty"),
        put(levels, {"": "INFO"}),
        put(levels, {"a": "INFO"}),
    )
    yield Case(
        n,
        levels,
        m(levels, "per-logger level must be one of"),
        put(levels, {"a": "LOUD"}),
        put(levels, {"a": "DEBUG"}),
    )
    yield Case(
        n,
        levels,
        m(levels, "logger name must not contain"),
        put(levels, {"oslo\nmessaging": "INFO"}),
        put(levels, {"oslo.messaging": "INFO"}),
    )

    # --- image, cache, messaging
    yield Case(
        n,
        "spec.image",
        m("spec.image", "exactly one of image.tag or image.digest"),
        put("spec.image.digest", "sha256:" + "a" * 64),
        both(drop("spec.image.tag"), put("spec.image.digest", "sha256:" + "a" * 64)),
    )
    yield Case(
        n,
        "spec.cache",
        m("spec.cache", "exactly one of clusterRef or servers"),
        put("spec.cache.servers", ["memcached:11211"]),
        put("spec.cache", {"servers": ["memcached:11211"]}),
    )
    yield Case(
        n,
        "spec.cache",
        m("spec.cache", "clusterRef.name must not contain a newline"),
        put("spec.cache.clusterRef.name", "mem\ncached"),
        put("spec.cache.clusterRef.name", "memcached-2"),
    )
    cache_tls = put("spec.cache.tls", {"caBundleSecretRef": {"name": "memcached-ca"}})
    yield Case(
        n,
        "spec.cache",
        m("spec.cache", "tls needs a cache backend with TLS"),
        both(cache_tls, put("spec.cache.backend", "dogpile.cache.memory")),
        both(cache_tls, put("spec.cache.backend", "oslo_cache.memcache_pool")),
    )
    yield Case(
        n,
        "spec.messaging",
        m("spec.messaging", "exactly one of clusterRef or secretRef"),
        put("spec.messaging.secretRef", {"name": "url"}),
        put("spec.messaging", {"secretRef": {"name": "url"}}),
    )

    # --- strings rendered verbatim, URLs
    for path in (
        "spec.region",
        "spec.serviceUser.username",
        "spec.serviceUser.projectName",
        "spec.serviceUser.userDomainName",
        "spec.serviceUser.projectDomainName",
    ):
        yield Case(
            n,
            path,
            m(path, "value must not contain a newline"),
            put(path, "Region\nOne"),
            put(path, "RegionOne"),
        )
    for path in URL_FIELDS:
        yield Case(
            n,
            path,
            m(path, "must be a valid URL"),
            put(path, "http://exa mple.org"),
            put(path, "http://a.example"),
        )
        yield Case(
            n, path, m(path, "URL must include a host"), put(path, "http://"), put(path, "http://a.example")
        )
    remote = "spec.remoteCompute.keystoneEndpoint"
    yield Case(
        n,
        remote,
        m(remote, "remoteCompute.keystoneEndpoint must use https"),
        both(
            MESSAGING_TLS,
            put("spec.remoteCompute", {**REMOTE, "keystoneEndpoint": "http://k.example.org/v3"}),
        ),
        both(MESSAGING_TLS, put("spec.remoteCompute", REMOTE)),
    )
    # issue 36: the password is POSTed to <keystoneEndpoint>/v3/auth/tokens; '?' or '#' would
    # move that path into a query or a fragment
    for bad in ("http://k.example/v3?x=/", "http://k.example/v3#", "http://k.example/?"):
        yield Case(
            n,
            "spec.keystoneEndpoint",
            m("spec.keystoneEndpoint", "a Keystone URL must not contain '?' or '#'"),
            put("spec.keystoneEndpoint", bad),
            put("spec.keystoneEndpoint", "http://k.example:5000/identity/v3"),
        )
    for start, bad in (
        ("must be a valid URL", "https://exa mple.org"),
        ("URL must include a host", "https://"),
        ("a Keystone URL must not contain '?' or '#'", "https://k.example.org/v3?a=b"),
        ("a Keystone URL must not contain '?' or '#'", "https://k.example.org/v3#x"),
    ):
        yield Case(
            n,
            remote,
            m(remote, start),
            both(MESSAGING_TLS, put("spec.remoteCompute", {**REMOTE, "keystoneEndpoint": bad})),
            both(MESSAGING_TLS, put("spec.remoteCompute", REMOTE)),
        )

    yield from _extra_config_cases(n, NOVA_REJECTED_EXTRA_CONFIG_KEYS)
    yield from _policy_cases()
    # --- issue 13: the archive schedule as kube's cron parser reads it
    yield Case(
        n,
        "spec.dbArchive.schedule",
        m("spec.dbArchive.schedule", "schedule must be a cron expression"),
        put("spec.dbArchive", {"schedule": "61 * * * *"}),
        put("spec.dbArchive", {"schedule": "59 23 31 DEC SUN"}),
    )


def _policy_cases() -> Iterator[Case]:
    """Issue 38 item 3: the shape of spec.policy (the rule names themselves are checked by the reconciler)."""
    n, path = NOVAS, "spec.policy"
    create = "os_compute_api:servers:create"
    yield Case(
        n,
        path,
        message(n, path, "exactly one of policy.rules or policy.configMapRef"),
        put(path, {"rules": {create: "role:admin"}, "configMapRef": {"name": "nova-policy"}}),
        put(path, {"configMapRef": {"name": "nova-policy"}}),
    )
    yield Case(
        n,
        path,
        message(n, path, "exactly one of policy.rules or policy.configMapRef"),
        put(path, {}),
        put(path, {"rules": {create: "role:admin"}}),
    )
    rules = f"{path}.rules"
    for bad in ("", "r" * 256):
        yield Case(
            n,
            rules,
            message(n, rules, "policy rule name must be 1 to 255"),
            put(rules, {bad: "role:admin"}),
            put(rules, {"r" * 255: "role:admin"}),
        )
    for bad in ("os_compute_api:servers:create ", "os_compute_api:servers:\u212areate", "a\nb"):
        yield Case(
            n,
            rules,
            message(n, rules, "policy rule name must be printable ASCII"),
            put(rules, {bad: "role:admin"}),
            put(rules, {create: "role:admin"}),
        )
    yield Case(
        n,
        "spec",
        message(n, "spec", "extraConfig [oslo_policy] policy_file must not be set together with policy"),
        both(
            put(path, {"rules": {create: "role:admin"}}),
            put("spec.extraConfig", {"oslo_policy": {"policy_file": "/etc/nova/other.yaml"}}),
        ),
        both(
            put(path, {"rules": {create: "role:admin"}}),
            put("spec.extraConfig", {"oslo_policy": {"enforce_scope": "true"}}),
        ),
    )


def _novacompute_cases() -> Iterator[Case]:
    c = NOVACOMPUTES

    def m(path: str, start: str) -> str:
        return message(c, path, start)

    yield Case(
        c,
        "",
        m("", "name must be at most 63"),
        put("metadata.name", "p" * 64),
        put("metadata.name", "p" * 63),
    )
    yield Case(
        c,
        "spec",
        m("spec", "novaRef is immutable"),
        put("spec.novaRef.name", "other-nova"),
        put("spec.nodeSelector", {"example.org/pool": "b"}),
        update=True,
    )
    offboarding = {"key": "kvm.cloud.sap/offboarding", "operator": "Exists", "effect": "NoExecute"}
    yield Case(
        c,
        "spec",
        m("spec", "a toleration tolerates kvm.cloud.sap/offboarding"),
        put("spec.tolerations", [offboarding]),
        put("spec.tolerations", [{**offboarding, "tolerationSeconds": 300}]),
    )
    yield Case(
        c,
        "spec",
        m("spec", "a toleration tolerates kvm.cloud.sap/offboarding"),
        put("spec.tolerations", [{"operator": "Exists"}]),
        put("spec.tolerations", [{"operator": "Exists", "effect": "NoSchedule"}]),
    )
    yield Case(
        c,
        "spec.image",
        m("spec.image", "exactly one of image.tag or image.digest"),
        put("spec.image", {"repository": "ghcr.io/c5c3/nova-compute"}),
        put("spec.image", {"repository": "ghcr.io/c5c3/nova-compute", "tag": "2025.2"}),
    )
    # issue 38 item 2: pull settings on the default image, without naming one
    pull = {"pullPolicy": "IfNotPresent", "pullSecrets": [{"name": "regcred"}]}
    for orphan in ({"tag": "2026.1"}, {"digest": "sha256:" + "c" * 64}):
        yield Case(
            c,
            "spec.image",
            m("spec.image", "image.tag and image.digest need image.repository"),
            put("spec.image", {**pull, **orphan}),
            put("spec.image", pull),
        )
    yield Case(
        c,
        "spec.libvirt",
        m("spec.libvirt", "cpuModels is required when cpuMode is custom"),
        put("spec.libvirt", {"cpuMode": "custom"}),
        put("spec.libvirt", {"cpuMode": "custom", "cpuModels": ["Cascadelake-Server-noTSX"]}),
    )
    yield Case(
        c,
        "spec.libvirt",
        m("spec.libvirt", "cpuModels is required when cpuMode is custom"),
        put("spec.libvirt", {"cpuMode": "host-model", "cpuModels": ["Cascadelake-Server-noTSX"]}),
        put("spec.libvirt", {"cpuMode": "host-model"}),
    )
    strategy = "spec.updateStrategy"
    yield Case(
        c,
        strategy,
        m(strategy, "maxUnavailable applies to RollingUpdate only"),
        put(strategy, {"type": "OnDelete", "maxUnavailable": 1}),
        put(strategy, {"type": "OnDelete"}),
    )
    yield Case(
        c,
        strategy,
        m(strategy, "maxUnavailable must be an integer or a percentage"),
        put(strategy, {"maxUnavailable": "ten"}),
        put(strategy, {"maxUnavailable": "10%"}),
    )
    for bad, good in ((0, 1), ("0%", "1%")):
        yield Case(
            c,
            strategy,
            m(strategy, "maxUnavailable must resolve to at least 1"),
            put(strategy, {"maxUnavailable": bad}),
            put(strategy, {"maxUnavailable": good}),
        )
    # issue 38 item 4: a grace period the user names must outlast the bound the user gives nova
    for bound in ("180", " 180 "):
        own = put("spec.extraConfig", {"DEFAULT": {"graceful_shutdown_timeout": bound}})
        yield Case(
            c,
            "spec",
            m("spec", "terminationGracePeriodSeconds must exceed extraConfig"),
            both(own, put("spec.terminationGracePeriodSeconds", 180)),
            both(own, put("spec.terminationGracePeriodSeconds", 181)),
        )
    yield Case(  # 0 is "no bound" to nova: no grace period can outlast it, none is refused
        c,
        "spec",
        m("spec", "terminationGracePeriodSeconds must exceed extraConfig"),
        both(
            put("spec.extraConfig", {"DEFAULT": {"graceful_shutdown_timeout": "60"}}),
            put("spec.terminationGracePeriodSeconds", 30),
        ),
        both(
            put("spec.extraConfig", {"DEFAULT": {"graceful_shutdown_timeout": "0"}}),
            put("spec.terminationGracePeriodSeconds", 30),
        ),
    )
    yield from _shared_block_cases(c, "spec")
    yield from _extra_config_cases(c, NOVACOMPUTE_REJECTED_EXTRA_CONFIG_KEYS)


BAD_KEYS = ("bad key!", "-lead", "UPPER.example.org/x", "a/b/c", "x" * 64, "example.org/")


def _qualified_key_cases() -> Iterator[Case]:
    """Issue 13: every label map and annotation map refuses a key the child's API would refuse."""
    components = {"api": "api", "metadata": "metadata", "scheduler": "scheduler", "conductor": "conductor"}
    components["consoleProxy"] = "novncproxy"
    for plural, path, msg, _ in crd_rules():
        if not msg.startswith(("label key must", "annotation key must")):
            continue
        good_key = "example.org/pool-1"

        def mutation(keys: dict[str, str], path: str = path) -> Mutation:
            if path.endswith("].labelSelector.matchLabels"):  # a spread constraint of one Deployment
                block = path.split(".")[1]
                own = {
                    "app.kubernetes.io/name": "nova",
                    "app.kubernetes.io/instance": "nova",
                    "app.kubernetes.io/component": components[block],
                }
                spread = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
                parent = path.split("[*]")[0]
                return put(parent, [{**spread, "labelSelector": {"matchLabels": {**own, **keys}}}])
            if path.startswith("spec.networkPolicy.ingress[*]."):
                which = path.split(".")[3]
                source = {"namespaceSelector": {}, which: {"matchLabels": keys}}
                return put("spec.networkPolicy", {"ingress": [source]})
            if path.endswith("gateway.annotations"):
                gateway = {"hostname": "nova.example.org", "parentRef": {"name": "gw"}, "annotations": keys}
                return put(path.rsplit(".", 1)[0], gateway)
            return put(path, keys)

        bad, good = {k: "v" for k in BAD_KEYS}, {good_key: "v"}
        if path.endswith("].labelSelector.matchLabels"):
            # the spread rule wants exactly the pod selector: the good one adds no key
            bad, good = {BAD_KEYS[0]: "v"}, {}
        yield Case(plural, path, msg, mutation(bad), mutation(good), error_path=path.replace("[*]", "[0]"))


def all_cases() -> list[Case]:
    return [*_nova_cases(), *_novacompute_cases(), *_qualified_key_cases()]


# --- tests ---------------------------------------------------------------------------------

pytestmark = pytest.mark.integration

CASES = all_cases()


def test_every_rule_of_the_generated_crds_is_covered_by_the_table() -> None:
    rules = crd_rules()
    keys = {(plural, path, msg) for plural, path, msg, _ in rules}
    assert len(keys) == len(rules), (
        "two rules at one path share a message: the table could not tell them apart"
    )
    covered = {case.key for case in CASES}
    assert covered == keys, {"uncovered": sorted(keys - covered), "unknown": sorted(covered - keys)}
    assert len(covered) == len(rules)


def _error_path(case: Case) -> str:
    """Where the server reports the violation: the rule's schema path, plus its fieldPath if any."""
    (rule,) = [r for p, q, m, r in crd_rules() if (p, q, m) == case.key]
    field_path = re.sub(r"\['([^']*)'\]", r"[\1]", rule.get("fieldPath", ""))
    # The server joins a bracketed fieldPath with a dot: spec.extraConfig.[DEFAULT][transport_url]
    joiner = "." if field_path.startswith("[") else ""
    return f"{case.path}{joiner}{field_path}".lstrip(".")


def _assert_refused(err: ApiException, case: Case) -> None:
    assert err.status == 422, err.body
    text = json.loads(err.body or "{}")["message"]
    assert (case.expect or case.message) in text, text
    path = case.error_path if case.error_path is not None else _error_path(case)
    if path:
        assert f"{path}: " in text, text


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_rule_refuses_the_bad_object_and_admits_the_nearest_good_one(
    objects: Objects, case: Case
) -> None:
    if case.update:
        stored = await objects.create(case.plural, BASES[case.plural]())
        bad, good = copy.deepcopy(stored), copy.deepcopy(stored)
        case.bad(bad)
        case.good(good)
        with pytest.raises(ApiException) as err:
            await objects.replace(case.plural, bad)
        _assert_refused(err.value, case)
        _parses_without_loss(case.plural, await objects.replace(case.plural, good))
        return
    bad, good = BASES[case.plural](), BASES[case.plural]()
    case.bad(bad)
    case.good(good)
    with pytest.raises(ApiException) as err:
        await objects.create(case.plural, bad)
    _assert_refused(err.value, case)
    _parses_without_loss(case.plural, await objects.create(case.plural, good))


def _parses_without_loss(plural: str, stored: Obj) -> None:
    """What the server admits, the models (and so the reconciler) read back unchanged."""
    model = MODELS[plural].model_validate(stored)
    assert model.model_dump(by_alias=True, exclude_none=True) == stored


@pytest.mark.parametrize(
    ("plural", "why"),
    [
        (NOVAS, "one shared host collapses the replicas of each role into one service row"),
        (NOVACOMPUTES, "the service host must equal the node name"),
    ],
)
async def test_the_api_server_refuses_a_shared_host_in_extra_config(
    objects: Objects, plural: str, why: str
) -> None:
    """Issue 23: nova names each scheduler/conductor/API row by its pod's hostname; a [DEFAULT] host
    in extraConfig would merge every replica into one row. The server says so, on the key."""
    bad = BASES[plural]()
    bad["spec"]["extraConfig"] = {"DEFAULT": {"host": "nova", "debug": "true"}}
    with pytest.raises(ApiException) as err:
        await objects.create(plural, bad)
    assert err.value.status == 422, err.value.body
    text = json.loads(err.value.body or "{}")["message"]
    assert "spec.extraConfig.[DEFAULT][host]: Forbidden: host is managed via " in text, text
    assert why in text, text
    good = BASES[plural]()
    good["spec"]["extraConfig"] = {"DEFAULT": {"debug": "true"}}
    await objects.create(plural, good)


async def test_the_api_server_refuses_a_look_alike_section_in_a_pools_extra_config(objects: Objects) -> None:
    """Issue 36: ``[\u212aeystone_authtoken] password`` is ``[keystone_authtoken] password`` to oslo.config
    (Python lowercases the Kelvin sign to 'k'), so it would put the service password into the
    ConfigMap ``view`` reads. The API server refuses the name, whatever the rejected-key rules say."""
    assert "\u212aeystone_authtoken".lower() == "keystone_authtoken"  # what oslo.config would read
    bad = minimal_novacompute()
    bad["spec"]["extraConfig"] = {"\u212aeystone_authtoken": {"password": "s3cret"}}
    with pytest.raises(ApiException) as err:
        await objects.create(NOVACOMPUTES, bad)
    assert err.value.status == 422, err.value.body
    text = json.loads(err.value.body or "{}")["message"]
    assert "spec.extraConfig: Invalid value" in text, text
    assert "extraConfig section and key names must be printable ASCII" in text, text
    assert "s3cret" not in text


@pytest.mark.parametrize(
    ("field", "url"),
    [
        ("keystoneEndpoint", "http://keystone.example/v3?"),
        ("keystoneEndpoint", "http://keystone.example/admin/reset#"),
        ("remoteCompute", "https://keystone.example.org/x?y=/v3"),
    ],
)
async def test_the_api_server_refuses_a_query_or_fragment_in_a_keystone_endpoint(
    objects: Objects, field: str, url: str
) -> None:
    """Issue 36: the password goes to <keystoneEndpoint>/v3/auth/tokens; with '?' or '#' in the URL
    that path would become a query or a fragment and the POST would reach the path before it."""
    bad = minimal_nova()
    if field == "remoteCompute":
        MESSAGING_TLS(bad)
        bad["spec"]["remoteCompute"] = {**REMOTE, "keystoneEndpoint": url}
    else:
        bad["spec"][field] = url
    with pytest.raises(ApiException) as err:
        await objects.create(NOVAS, bad)
    assert err.value.status == 422, err.value.body
    text = json.loads(err.value.body or "{}")["message"]
    assert "a Keystone URL must not contain '?' or '#'" in text, text


@pytest.mark.parametrize(
    ("plural", "section", "key", "what"),
    [
        (NOVAS, "DEFAULT", "novncproxy_host", "is a deprecated name of [vnc] novncproxy_host"),
        (NOVAS, "keymgr", "fixed_key", "must not set an option nova marks secret"),
        (NOVACOMPUTES, "keymgr", "fixed_key", "must not set an option nova marks secret"),
    ],
)
async def test_the_api_server_refuses_a_deprecated_name_as_it_refuses_the_option(
    objects: Objects, plural: str, section: str, key: str, what: str
) -> None:
    """Issue 36: oslo.config reads a deprecated name as the option it names, so extraConfig's rules
    resolve it first: [keymgr] fixed_key is [key_manager] fixed_key (secret), [DEFAULT]
    novncproxy_host is [vnc] novncproxy_host (the operator's)."""
    bad = BASES[plural]()
    bad["spec"]["extraConfig"] = {section: {key: "x"}}
    with pytest.raises(ApiException) as err:
        await objects.create(plural, bad)
    assert err.value.status == 422, err.value.body
    text = json.loads(err.value.body or "{}")["message"]
    assert what in text, text


@pytest.mark.parametrize("plural", [NOVAS, NOVACOMPUTES])
async def test_the_api_server_refuses_a_pull_secret_named_twice(objects: Objects, plural: str) -> None:
    """Issue 38 item 2: pullSecrets is a list keyed by name, so the same Secret cannot appear twice."""
    bad = BASES[plural]()
    image = bad["spec"].setdefault("image", {})
    image["pullSecrets"] = [{"name": "regcred"}, {"name": "mirror"}, {"name": "regcred"}]
    with pytest.raises(ApiException) as err:
        await objects.create(plural, bad)
    assert err.value.status == 422, err.value.body
    text = json.loads(err.value.body or "{}")["message"]
    assert 'spec.image.pullSecrets[2]: Duplicate value: {"name":"regcred"}' in text, text
    good = BASES[plural]()
    good["spec"].setdefault("image", {})["pullSecrets"] = [{"name": "regcred"}, {"name": "mirror"}]
    _parses_without_loss(plural, await objects.create(plural, good))
