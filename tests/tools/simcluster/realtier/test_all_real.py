"""The all-real tier's plan without a cluster: the address the nodes reach the host's servers at, the
catalog's URLs by interface, the compute API's registration and the names of the imported images."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

from realnode.configs import POD_CIDR
from realnode.nodes import API_IP
from simcluster.platform.controlplane import SERVICE_CIDR
from simcluster.realtier import all_real
from simcluster.realtier.launch import RealTier
from simcluster.realtier.real_compute import RealCompute
from simcluster.realtier.services.openstack import interface_urls


def test_the_servers_address_is_none_of_the_nodes_namespaces_ranges_nor_the_hosts() -> None:
    ip = ipaddress.ip_address(all_real.SERVERS_IP)
    # an EndpointSlice refuses loopback and link-local addresses
    for taken in (f"{API_IP}/24", POD_CIDR, SERVICE_CIDR, "127.0.0.0/8", "169.254.0.0/16"):
        assert ip not in ipaddress.ip_network(taken, strict=False), taken
    assert ipaddress.ip_address(all_real.LOOPBACK).is_loopback


def test_internal_urls_are_the_services_names_in_the_namespace_at_their_ports() -> None:
    assert all_real.internal_urls("openstack") == {
        "identity": "http://keystone-api.openstack.svc:5000/v3",
        "placement": "http://placement-api.openstack.svc:8778",
        "image": "http://glance-api.openstack.svc:9292",
        "network": "http://neutron-server.openstack.svc:9696",
    }
    assert all_real.internal_urls("other")["placement"] == "http://placement-api.other.svc:8778"


def test_the_samples_keystone_endpoint_is_the_internal_identity_url() -> None:
    import yaml
    from simcluster.run import SAMPLES

    nova = yaml.safe_load((SAMPLES / "nova_minimal.yaml").read_text())
    assert nova["spec"]["keystoneEndpoint"] == all_real.internal_urls("openstack")["identity"]


def test_a_catalog_entry_is_public_at_its_url_and_internal_and_admin_at_the_other_when_given() -> None:
    same = "http://127.0.0.1:5000"
    assert interface_urls(same) == {"public": same, "internal": same, "admin": same}
    inside = "http://placement-api.openstack.svc:8778"
    assert interface_urls(same, inside) == {"public": same, "internal": inside, "admin": inside}


def test_compute_urls_are_the_published_loopback_port_and_the_services_name() -> None:
    assert all_real.compute_urls("openstack", 40123) == (
        "http://127.0.0.1:40123/v2.1",
        "http://nova.openstack.svc:8774/v2.1",
    )


def test_every_release_is_imported_under_the_nova_and_the_compute_image_names() -> None:
    names = all_real.image_names(["2025.2", "2026.1"])
    assert names == {
        "2025.2": ["ghcr.io/c5c3/nova-compute:2025.2", "ghcr.io/c5c3/nova:2025.2"],
        "2026.1": ["ghcr.io/c5c3/nova-compute:2026.1", "ghcr.io/c5c3/nova:2026.1"],
    }


@dataclass
class _Nodes:
    published: list[tuple[int, str, int, str]] = field(default_factory=list)

    def publish(self, port: int, target: str, target_port: int, address: str = "127.0.0.1") -> None:
        self.published.append((port, target, target_port, address))


@dataclass
class _OpenStack:
    endpoints: list[tuple[str, str, str, str | None]] = field(default_factory=list)

    def add_endpoint(self, kind: str, name: str, url: str, *, internal: str | None = None) -> None:
        self.endpoints.append((kind, name, url, internal))


class _Kube:
    def get(self, path: str) -> dict[str, Any]:
        assert path == "/api/v1/namespaces/openstack/services/nova"
        return {"spec": {"clusterIP": "10.96.7.8"}}


class _Cluster:
    kube = _Kube()


class _Handle:
    cluster = _Cluster()
    real: Any = None


def test_the_compute_api_is_published_to_its_cluster_ip_and_registered_public_and_internal() -> None:
    nodes, openstack = _Nodes(), _OpenStack()
    handle = _Handle()
    handle.real = RealTier(
        None,  # type: ignore[arg-type]
        None,
        None,  # type: ignore[arg-type]
        openstack,  # type: ignore[arg-type]
        real_compute=RealCompute(nodes),  # type: ignore[arg-type]
    )
    public = all_real.register_compute(handle, "openstack")  # type: ignore[arg-type]
    ((port, target, target_port, address),) = nodes.published
    assert (target, target_port, address) == ("10.96.7.8", 8774, "127.0.0.1")
    assert public == f"http://127.0.0.1:{port}/v2.1"
    assert openstack.endpoints == [("compute", "nova", public, "http://nova.openstack.svc:8774/v2.1")]
