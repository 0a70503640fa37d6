"""The three ClusterIP Services: API (8774), metadata (8775), console proxy (6080)."""

from __future__ import annotations

from typing import Any

from nova_operator import naming
from nova_operator.models.nova import Nova
from nova_operator.naming import Component
from nova_operator.renderers.workload import plain

__all__ = ["service", "services"]

_PORTS = {
    Component.API: ("nova-api", 8774),
    Component.METADATA: ("nova-metadata", 8775),
    Component.NOVNCPROXY: ("novncproxy", 6080),
}


def service(nova: Nova, component: Component) -> dict[str, Any]:
    """The Service in front of one serving role, selecting that role's pods only."""
    name = nova.metadata.name or ""
    port_name, port = _PORTS[component]
    return plain(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": naming.deployment_name(name, component),
                "namespace": nova.metadata.namespace or "default",
                "labels": naming.labels(name, component),
            },
            "spec": {
                "type": "ClusterIP",
                "selector": naming.selector_labels(name, component),
                "ports": [{"name": port_name, "port": port, "targetPort": port_name, "protocol": "TCP"}],
            },
        }
    )


def services(nova: Nova) -> dict[Component, dict[str, Any]]:
    """The Services the Nova asks for (the console proxy's only while it is enabled)."""
    roles = [Component.API, Component.METADATA]
    if nova.spec.console_proxy.enabled:
        roles.append(Component.NOVNCPROXY)
    return {role: service(nova, role) for role in roles}
