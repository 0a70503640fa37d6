"""The three HTTPRoutes: API, metadata and console, one per gateway block that is set."""

from __future__ import annotations

from typing import Any

from nova_operator import naming
from nova_operator.models.common import GatewaySpec
from nova_operator.models.nova import Nova
from nova_operator.naming import Component
from nova_operator.renderers.workload import plain

__all__ = ["API_VERSION", "http_route", "http_routes"]

API_VERSION = "gateway.networking.k8s.io/v1"

_ROUTES = {
    # route suffix, backend Service role, port
    Component.API: ("", Component.API, 8774),
    Component.METADATA: ("-metadata", Component.METADATA, 8775),
    Component.NOVNCPROXY: ("-console", Component.NOVNCPROXY, 6080),
}


def _gateway(nova: Nova, component: Component) -> GatewaySpec | None:
    if component is Component.API:
        return nova.spec.gateway
    if component is Component.METADATA:
        return nova.spec.metadata.gateway
    if not nova.spec.console_proxy.enabled:
        return None  # the console route goes with the proxy
    return nova.spec.console_proxy.gateway


def http_route(nova: Nova, component: Component) -> dict[str, Any] | None:
    """The route of one serving role, or None when its gateway block is unset (or the proxy is off)."""
    gateway = _gateway(nova, component)
    if gateway is None:
        return None
    name = nova.metadata.name or ""
    namespace = nova.metadata.namespace or "default"
    suffix, backend, port = _ROUTES[component]
    parent: dict[str, Any] = {
        "group": "gateway.networking.k8s.io",
        "kind": "Gateway",
        "name": gateway.parent_ref.name,
        "namespace": gateway.parent_ref.namespace or namespace,
    }
    if gateway.parent_ref.section_name:
        parent["sectionName"] = gateway.parent_ref.section_name
    metadata: dict[str, Any] = {
        "name": f"{name}{suffix}",
        "namespace": namespace,
        "labels": naming.labels(name, component),
    }
    if gateway.annotations:
        metadata["annotations"] = dict(sorted(gateway.annotations.items()))
    return plain(
        {
            "apiVersion": API_VERSION,
            "kind": "HTTPRoute",
            "metadata": metadata,
            "spec": {
                "parentRefs": [parent],
                "hostnames": [gateway.hostname],
                "rules": [
                    {
                        "matches": [{"path": {"type": "PathPrefix", "value": gateway.path or "/"}}],
                        "backendRefs": [{"name": naming.deployment_name(name, backend), "port": port}],
                    }
                ],
            },
        }
    )


def http_routes(nova: Nova) -> dict[Component, dict[str, Any]]:
    """The routes the Nova asks for, keyed by role."""
    routes = {c: http_route(nova, c) for c in _ROUTES}
    return {c: r for c, r in routes.items() if r is not None}
