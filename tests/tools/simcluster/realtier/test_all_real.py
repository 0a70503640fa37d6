"""The real-Nova tier's cluster without a cluster: the address the nodes reach the host's servers at,
the catalog's URLs by interface, the compute API's registration, the names of the nodes' images, and
the bring-up's wiring with every part (nodes, servers, stand-ins) faked."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

from realnode.configs import POD_CIDR
from realnode.nodes import API_IP
from simcluster.platform.controlplane import SERVICE_CIDR
from simcluster.realtier import all_real
from simcluster.realtier.real_compute import RealCompute
from simcluster.realtier.services.openstack import interface_urls
from simcluster.realtier.tier import RealTier


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
    digest = "registry.example.org/nova@sha256:" + "a" * 64
    with_alias = all_real.image_names(["2025.2", "2026.1"], {digest: "2026.1"})
    assert with_alias["2026.1"] == [*names["2026.1"], digest]
    assert with_alias["2025.2"] == names["2025.2"]


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
    handle.real = RealTier(None, None, openstack, None, RealCompute(nodes), None)  # type: ignore[arg-type]
    public = all_real.register_compute(handle, "openstack")
    ((port, target, target_port, address),) = nodes.published
    assert (target, target_port, address) == ("10.96.7.8", 8774, "127.0.0.1")
    assert public == f"http://127.0.0.1:{port}/v2.1"
    assert openstack.endpoints == [("compute", "nova", public, "http://nova.openstack.svc:8774/v2.1")]


# -- the bring-up's wiring, with every part faked ------------------------------------------------


class _FakeNodes:
    made: list[_FakeNodes] = []

    def __init__(self, cluster: object, workdir: object, **kw: Any) -> None:
        self.kw = kw
        self.relays: list[tuple[str, list[int], str | None]] = []
        self.started = False
        _FakeNodes.made.append(self)

    def start(self) -> None:
        self.started = True

    def stop(self) -> None:
        pass

    def relay(self, address: str, ports: list[int], upstream: str | None = None) -> None:
        self.relays.append((address, list(ports), upstream))


class _FakeServer:
    def __init__(self, port: int) -> None:
        self.port = port


class _FakeBackends:
    def __init__(self, workdir: object, *, address: str, reach: str) -> None:
        self.address, self.reach = address, reach
        self.mariadb, self.rabbitmq, self.memcached = _FakeServer(3306), _FakeServer(5672), _FakeServer(11212)

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


class _FakeOpenStack:
    made: list[_FakeOpenStack] = []

    def __init__(self, workdir: object, mariadb: object, memcached: str, **kw: Any) -> None:
        self.memcached, self.kw = memcached, kw
        self.keystone_port, self.placement_port, self.glance_port = 35357, 38778, 39292
        self.network: _FakeServer | None = None
        _FakeOpenStack.made.append(self)

    def start(self, service_users: tuple[str, ...] = ()) -> None:
        self.network = _FakeServer(39696)

    def stop(self) -> None:
        pass


class _FakeOvsdb:
    def __init__(self, workdir: object, sock: object, system_id: str) -> None:
        self.system_id = system_id

    def start(self) -> _FakeOvsdb:
        return self


class _RecordingKube:
    def __init__(self) -> None:
        self.applied: list[tuple[str, dict[str, Any]]] = []
        self.patched: list[tuple[str, dict[str, Any]]] = []

    def apply(self, doc: dict[str, Any], namespace: str = "default") -> None:
        self.applied.append((namespace, doc))

    def patch(self, path: str, body: dict[str, Any]) -> None:
        self.patched.append((path, body))


def test_the_bring_up_wires_nodes_servers_relay_services_and_images(monkeypatch: Any, tmp_path: Any) -> None:
    import pathlib

    kube = _RecordingKube()

    class Cluster:
        def __init__(self) -> None:
            self.kube = kube

    class Handle:
        def __init__(self) -> None:
            self.cluster = Cluster()
            self.workdir = pathlib.Path(tmp_path)
            self.teardown: list[tuple[str, object]] = []
            self.real: Any = None

    imported: list[dict[str, list[str]]] = []
    standins: list[object] = []
    _FakeNodes.made.clear()
    _FakeOpenStack.made.clear()
    monkeypatch.setattr(all_real, "install_dependency_crds", lambda kube: None)
    monkeypatch.setattr(all_real, "RealNodes", _FakeNodes)
    monkeypatch.setattr(all_real, "RealBackends", _FakeBackends)
    monkeypatch.setattr(all_real, "OpenStackServices", _FakeOpenStack)
    monkeypatch.setattr(all_real, "OvsdbServer", _FakeOvsdb)
    store = pathlib.Path(tmp_path) / "store" / "root"

    def nova_store(names: dict[str, list[str]]) -> pathlib.Path:
        imported.append(names)
        return store

    monkeypatch.setattr(all_real, "nova_store", nova_store)
    monkeypatch.setattr(all_real, "start_standins", lambda handle, backend: standins.append(backend))
    monkeypatch.setattr(RealCompute, "socket", lambda self, name: pathlib.Path(f"/proc/1/root/{name}"))
    handle = Handle()
    labels = {"example.org/compute-pool": "rack7"}
    all_real._add_nodes_and_servers(
        handle,
        None,
        ["control-0", "control-1"],
        ["compute-0", "compute-1"],
        {"compute-0": labels, "compute-1": labels},
        all_real.image_names(["2025.2", "2026.1"]),
        ["openstack"],
    )
    (nodes,) = _FakeNodes.made
    assert nodes.started
    assert nodes.kw["names"] == ["control-0", "control-1", "compute-0", "compute-1"]
    assert set(nodes.kw["node_taints"]) == {"compute-0", "compute-1"}  # the control nodes untainted
    assert kube.patched == [(f"/api/v1/nodes/compute-{i}", {"metadata": {"labels": labels}}) for i in (0, 1)]
    # every release's image, under its names, in the store every node starts from
    assert imported == [all_real.image_names(["2025.2", "2026.1"])]
    assert nodes.kw["store"] == store
    # every server's port relayed from the namespace's address to the host's loopback
    ((address, ports, upstream),) = nodes.relays
    assert (address, upstream) == (all_real.SERVERS_IP, all_real.LOOPBACK)
    assert sorted(ports) == sorted([3306, 5672, 11212, 35357, 38778, 39292, 39696])
    (openstack,) = _FakeOpenStack.made
    assert openstack.kw["address"] == all_real.LOOPBACK
    assert openstack.kw["internal_urls"] == all_real.internal_urls("openstack")
    assert openstack.memcached == "127.0.0.1:11212"
    (backend,) = standins
    assert (backend.address, backend.reach) == (all_real.LOOPBACK, all_real.SERVERS_IP)
    # the samples' Services lead to the namespace's address at each server's port
    slices = {
        doc["metadata"]["labels"]["kubernetes.io/service-name"]: doc
        for ns, doc in kube.applied
        if doc["kind"] == "EndpointSlice" and ns == "openstack"
    }
    targets = {"keystone-api": 35357, "placement-api": 38778, "glance-api": 39292, "neutron-server": 39696}
    assert set(slices) == {*targets, "memcached"}
    for name, target in {**targets, "memcached": 11212}.items():
        assert slices[name]["endpoints"][0]["addresses"] == [all_real.SERVERS_IP], name
        assert slices[name]["ports"][0]["port"] == target, name
    assert set(handle.real.ovsdb) == {"compute-0", "compute-1"}
    # the pods go before the servers they use
    assert [part for part, _ in handle.teardown] == [
        "real nodes",
        "keystone, placement, glance",
        "backing servers",
        "ovsdb-server",
    ]
    assert {"image store", "nodes"} <= set(handle.real.startup)
