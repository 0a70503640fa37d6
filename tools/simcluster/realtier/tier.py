"""What the real-Nova tier adds to the simulated cluster (``simcluster.realtier.all_real`` starts it):
``RealTier``, the handle's ``real``, and the names the tier's images and samples share.

Images: ``ghcr.io/c5c3/nova:<release>`` and ``ghcr.io/c5c3/nova-compute:<release>`` name each
release's nova image (``realnode.nova_image``, from the image contract), unpacked in every node.
"""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from simcluster.client.kube import Kube
from simcluster.platform.launch import SimHandle
from simcluster.realtier.container_logs import api_log, follow
from simcluster.realtier.node_access import NodeAccess
from simcluster.realtier.real_compute import RealCompute
from simcluster.realtier.services.backends import RealBackends
from simcluster.realtier.services.openstack import OpenStackServices
from simcluster.realtier.services.ovsdb import OvsdbServer

NOVA_IMAGE = "ghcr.io/c5c3/nova"
COMPUTE_IMAGE = "ghcr.io/c5c3/nova-compute"
# The pools' nova-compute driver here (no libvirt): the fake driver that keeps a stable node identity
# (``compute_id`` in ``state_path``, the node's /var/lib/nova), as libvirt does. ``fake.FakeDriver``
# names its node with a UUID new in every process and writes no ``compute_id``, so nova-compute can
# never start again once its service row exists ("No local node identity found, but this is not our
# first startup on this host"): every rollout of a pool (a rotated contract Secret) crash-loops it.
FAKE_COMPUTE_DRIVER = "fake.FakeDriverWithoutFakeNodes"
DEFAULT_RELEASES = ("2025.2", "2026.1", "2026.2")
SERVICE_USER = "nova"
MANAGED_BY = "simcluster.realtier"
JSON = dict[str, Any]


def service_with_endpoints(namespace: str, name: str, port: int, address: str, target: int) -> list[JSON]:
    """A Service without a selector and the EndpointSlice that sends its port to ``address:target``."""
    labels = {"app.kubernetes.io/managed-by": MANAGED_BY}
    port_name = "main"
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"ports": [{"name": port_name, "port": port, "targetPort": target, "protocol": "TCP"}]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{name}-real",
                "namespace": namespace,
                "labels": {
                    **labels,
                    "kubernetes.io/service-name": name,
                    "endpointslice.kubernetes.io/managed-by": MANAGED_BY,
                },
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
            "ports": [{"name": port_name, "port": target, "protocol": "TCP"}],
        },
    ]


@dataclass
class RealTier:
    """What ``launch_all_real`` added to the simulated cluster; stopped by the handle."""

    workdir: pathlib.Path
    backends: RealBackends
    openstack: OpenStackServices
    kube: Kube
    real_compute: RealCompute  # every node (its name is from when only the compute nodes were real)
    # the ways between the host and the nodes: relayed ports, published Services, DNS aliases
    nodes_access: NodeAccess
    ovsdb: dict[str, OvsdbServer] = field(default_factory=dict)
    control_nodes: list[str] = field(default_factory=list)
    compute_nodes: list[str] = field(default_factory=list)
    startup: dict[str, float] = field(default_factory=dict)  # seconds, by part

    @property
    def gateway(self) -> str:
        """Where pods reach the real servers: an address of the nodes' namespace that is relayed to
        the host's loopback."""
        return self.backends.reach or self.backends.address

    @property
    def host_address(self) -> str:
        """Where a server of the host (a test's own) listens for the pods to reach it at ``gateway``
        (``expose``): the host's loopback."""
        return self.nodes_access.loopback

    @property
    def server_ips(self) -> tuple[str, ...]:
        """The addresses a test's own server is reached at, for its certificate: the pods'
        (``gateway``) and the host's (``host_address``, where the test itself checks it)."""
        return tuple(dict.fromkeys((self.gateway, self.host_address)))

    def cluster_ip(self, namespace: str, service: str) -> str:
        svc = self.kube.get(f"/api/v1/namespaces/{namespace}/services/{service}")
        return str(svc["spec"]["clusterIP"])

    def reach(self, namespace: str, service: str, port: int) -> tuple[str, int]:
        """The address and port at which the host (a test's own calls) reaches ``port`` of Service
        ``namespace/service``: a port of the host's loopback published to it."""
        return self.reach_ip(self.cluster_ip(namespace, service), port)

    def reach_ip(self, ip: str, port: int) -> tuple[str, int]:
        """As ``reach``, for an address of the cluster's networks (a ClusterIP, a pod's IP)."""
        return self.nodes_access.reach(ip, port)

    def container_log(self, pod: JSON, container: str) -> str:
        """Every run's log of ``container`` in ``pod``, through the API server
        (``realtier.container_logs``)."""
        return api_log(self.kube, pod, container)

    def open_log(self, pod: JSON, container: str) -> IO[str]:
        """The current run's log of ``container`` in ``pod``, open for reading as it grows and to its
        end after the pod is gone: a file the kubelet's stream is followed into
        (``container_logs.follow``)."""
        into = self.workdir / "followed-logs" / f"{pod['metadata']['uid']}-{container}.log"
        follow(self.kube, pod, container, into)
        return open(into, errors="replace")

    def in_cluster(self, argv: Sequence[str], namespace: str = "default") -> list[str]:
        """``argv`` run from the host as a pod in ``namespace`` would resolve and reach the cluster
        (``RealNodes.in_cluster``): the operator as a local process."""
        return self.real_compute.nodes.in_cluster(argv, namespace)

    def expose(self, namespace: str, name: str, port: int, target: int, address: str | None = None) -> None:
        """A Service ``namespace/name`` whose ``port`` leads to ``target`` of a server of the host:
        by default one on the host's loopback (``host_address``), ``target`` relayed there from
        ``gateway``; with ``address``, one the nodes reach at ``address:target`` themselves."""
        if address is None:
            self.nodes_access.relay(target)
        for doc in service_with_endpoints(namespace, name, port, address or self.gateway, target):
            self.kube.apply(doc, namespace)

    def alias(self, name: str, namespace: str, service: str) -> None:
        """Pods resolve ``name`` (outside the cluster domain) to Service ``namespace/service``: by
        the cluster's CoreDNS, to the Service's ClusterIP."""
        self.nodes_access.alias(name, self.cluster_ip(namespace, service))

    def stop_pods(self) -> None:
        self.real_compute.nodes.stop()

    def stop_servers(self) -> None:
        self.openstack.stop()
        self.backends.stop()
        for server in self.ovsdb.values():
            server.stop()


def clouds_yaml(handle: SimHandle, path: pathlib.Path, service_password: str | None = None) -> pathlib.Path:
    """A ``clouds.yaml`` for the ``openstack`` CLI: cloud ``simcluster`` (admin) and, with the service
    user's password, ``simcluster-nova`` (the service user)."""
    assert handle.real is not None
    osv = handle.real.openstack
    clouds: JSON = {
        "simcluster": {
            "auth": {
                "auth_url": osv.keystone_url,
                "username": "admin",
                "password": osv.admin_password,
                "project_name": "admin",
                "user_domain_name": "Default",
                "project_domain_name": "Default",
            },
            "region_name": "RegionOne",
            "identity_api_version": 3,
        }
    }
    if service_password is not None:
        clouds["simcluster-nova"] = {
            **clouds["simcluster"],
            "auth": {
                **clouds["simcluster"]["auth"],
                "username": SERVICE_USER,
                "password": service_password,
                "project_name": "service",
            },
        }
    path.write_text(json.dumps({"clouds": clouds}, indent=2) + "\n")
    os.chmod(path, 0o600)
    return path
