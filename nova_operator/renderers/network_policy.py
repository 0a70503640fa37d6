"""The two NetworkPolicies: ``{name}`` (every pod of the Nova, Jobs included) and ``{name}-novncproxy``."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from nova_operator import naming
from nova_operator.models.nova import Nova
from nova_operator.naming import Component
from nova_operator.renderers.workload import plain

__all__ = ["network_policies", "network_policy", "novncproxy_network_policy"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _url_port(url: str | None, default: int) -> int:
    if not url:
        return default
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    return port if port is not None else _DEFAULT_PORTS.get(parts.scheme, default)


def _tcp(*ports: int) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": p} for p in dict.fromkeys(ports)]


def _namespace_peer(namespace: str) -> dict[str, Any]:
    return {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}


def _cache_ports(nova: Nova) -> list[int]:
    cache = nova.spec.cache
    if cache.cluster_ref is not None and cache.cluster_ref.name:
        return [11211]
    ports = []
    for server in cache.servers or []:
        host, colon, port = server.rpartition(":")
        ports.append(int(port) if colon and host and port.isdigit() else 11211)
    return ports


def network_policy(nova: Nova, *, operator_namespace: str, broker_port: int | None) -> dict[str, Any] | None:
    """``{name}``: ingress to 8774/8775/6080, egress to exactly what the control plane talks to.

    None when ``spec.networkPolicy`` is unset.  ``broker_port`` is None until a transport URL exists.
    """
    spec = nova.spec
    if spec.network_policy is None:
        return None
    name = nova.metadata.name or ""
    namespace = nova.metadata.namespace or "default"

    sources: list[dict[str, Any]] = []
    for source in spec.network_policy.ingress:
        peer: dict[str, Any] = {
            "namespaceSelector": source.namespace_selector.model_dump(by_alias=True, exclude_none=True)
        }
        if source.pod_selector is not None:
            peer["podSelector"] = source.pod_selector.model_dump(by_alias=True, exclude_none=True)
        sources.append(peer)
    gateways = [spec.gateway, spec.metadata.gateway]
    if spec.console_proxy.enabled:
        gateways.append(spec.console_proxy.gateway)
    gateway_namespaces = [g.parent_ref.namespace or namespace for g in gateways if g is not None]
    for gateway_namespace in dict.fromkeys(gateway_namespaces):
        sources.append(_namespace_peer(gateway_namespace))
    sources.append(_namespace_peer(operator_namespace))

    endpoints = spec.endpoints
    siblings = [
        _url_port(endpoints.placement.override, 8778),
        _url_port(endpoints.neutron.override, 9696),
        _url_port(endpoints.glance.override, 9292),
    ]
    if endpoints.cinder.enabled:
        siblings.append(_url_port(endpoints.cinder.override, 8776))
    if endpoints.barbican.enabled:
        siblings.append(_url_port(endpoints.barbican.override, 9311))
    egress: list[dict[str, Any]] = [
        {"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
        {"ports": _tcp(spec.api_database.port or 3306)},
        {"ports": _tcp(spec.database.port or 3306)},
    ]
    if cache_ports := _cache_ports(nova):
        egress.append({"ports": _tcp(*cache_ports)})
    egress.append({"ports": _tcp(_url_port(spec.keystone_endpoint, 5000))})
    egress.append({"ports": _tcp(*siblings)})
    if broker_port is not None:
        egress.append({"ports": _tcp(broker_port)})
    egress.extend(dict(rule) for rule in spec.network_policy.additional_egress or [])
    return plain(
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": name, "namespace": namespace, "labels": naming.common_labels(name)},
            "spec": {
                "podSelector": {
                    "matchLabels": {naming.NAME_LABEL: "nova", naming.INSTANCE_LABEL: name},
                },
                "policyTypes": ["Ingress", "Egress"],
                "ingress": [{"from": sources, "ports": _tcp(8774, 8775, 6080)}],
                "egress": egress,
            },
        }
    )


def novncproxy_network_policy(nova: Nova) -> dict[str, Any] | None:
    """``{name}-novncproxy``: the proxy's egress to the hypervisors' VNC ports (TCP 5900-65535)."""
    if nova.spec.network_policy is None or not nova.spec.console_proxy.enabled:
        return None
    name = nova.metadata.name or ""
    return plain(
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {
                "name": f"{name}-novncproxy",
                "namespace": nova.metadata.namespace or "default",
                "labels": naming.labels(name, Component.NOVNCPROXY),
            },
            "spec": {
                "podSelector": {"matchLabels": naming.selector_labels(name, Component.NOVNCPROXY)},
                "policyTypes": ["Egress"],
                "egress": [{"ports": [{"protocol": "TCP", "port": 5900, "endPort": 65535}]}],
            },
        }
    )


def network_policies(
    nova: Nova, *, operator_namespace: str, broker_port: int | None
) -> dict[str, dict[str, Any]]:
    """Both policies the Nova asks for, keyed by object name."""
    policies = [
        network_policy(nova, operator_namespace=operator_namespace, broker_port=broker_port),
        novncproxy_network_policy(nova),
    ]
    return {p["metadata"]["name"]: p for p in policies if p is not None}
