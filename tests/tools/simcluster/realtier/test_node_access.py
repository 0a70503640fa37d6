"""What ``RealTier`` gives the real-Nova tier's tests on its nodes (``NodeAccess``), with the nodes
faked: a test's server on the host's loopback behind a Service (its port relayed once), a Service
reached from the host (a published port per ClusterIP and port), a DNS alias of a Service (its
ClusterIP, the whole set each time), a process of the host run as a pod resolves and reaches."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from simcluster.realtier import node_access
from simcluster.realtier.node_access import NodeAccess
from simcluster.realtier.real_compute import RealCompute
from simcluster.realtier.tier import RealTier

SERVERS_IP, LOOPBACK = "10.86.0.1", "127.0.0.1"


@dataclass
class _Nodes:
    relays: list[tuple[str, list[int], str | None]] = field(default_factory=list)
    published: list[tuple[int, str, int, str]] = field(default_factory=list)
    netns_holder: Any = None

    def relay(self, address: str, ports: list[int], upstream: str | None = None) -> None:
        self.relays.append((address, list(ports), upstream))

    def publish(self, port: int, target: str, target_port: int, address: str = "127.0.0.1") -> None:
        self.published.append((port, target, target_port, address))


class _Kube:
    def __init__(self) -> None:
        self.applied: list[dict[str, Any]] = []
        self.ips = {"vnc": "10.96.3.4", "nova": "10.96.7.8"}

    def get(self, path: str) -> dict[str, Any]:
        return {"spec": {"clusterIP": self.ips[path.rsplit("/", 1)[1]]}}

    def apply(self, doc: dict[str, Any], namespace: str = "default") -> None:
        self.applied.append(doc)


class _Backends:
    address, reach = LOOPBACK, SERVERS_IP


def _tier(kube: _Kube, nodes: _Nodes) -> RealTier:
    access = NodeAccess(nodes, kube, SERVERS_IP, LOOPBACK, {3306})  # type: ignore[arg-type]
    return RealTier(None, _Backends(), None, kube, RealCompute(nodes), access)  # type: ignore[arg-type]


def test_a_tests_server_is_exposed_at_the_servers_address_and_its_port_relayed_once() -> None:
    kube, nodes = _Kube(), _Nodes()
    real = _tier(kube, nodes)
    assert real.host_address == LOOPBACK  # where the test's server listens
    assert real.server_ips == (SERVERS_IP, LOOPBACK)  # its certificate: the pods' address, the host's
    real.expose("openstack", "vnc", 6969, 40001)
    real.expose("openstack", "vnc-again", 6969, 40001)
    real.expose("openstack", "db", 3306, 3306)  # the servers' relay has it already
    assert nodes.relays == [(SERVERS_IP, [40001], LOOPBACK)]
    slices = [d for d in kube.applied if d["kind"] == "EndpointSlice"]
    assert {s["endpoints"][0]["addresses"][0] for s in slices} == {SERVERS_IP}


def test_the_host_reaches_a_service_at_a_port_published_once_per_cluster_ip_and_port() -> None:
    kube, nodes = _Kube(), _Nodes()
    real = _tier(kube, nodes)
    first = real.reach("openstack", "nova", 8774)
    assert real.reach("openstack", "nova", 8774) == first
    other = real.reach("openstack", "vnc", 6080)
    assert first[0] == other[0] == LOOPBACK
    assert [(target, port, address) for _, target, port, address in nodes.published] == [
        ("10.96.7.8", 8774, LOOPBACK),
        ("10.96.3.4", 6080, LOOPBACK),
    ]
    assert [p for p, *_ in nodes.published] == [first[1], other[1]]
    kube.ips["nova"] = "10.96.9.9"  # the Service made again: a new ClusterIP, a new port
    assert real.reach("openstack", "nova", 8774) != first


def test_an_alias_names_the_services_cluster_ip_and_cluster_dns_gets_every_alias(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kube, nodes = _Kube(), _Nodes()
    written: list[dict[str, str]] = []
    monkeypatch.setattr(node_access, "set_aliases", lambda kube, netns, aliases: written.append(aliases))
    monkeypatch.setattr(NodeAccess, "netns", "/proc/1/ns/net")
    real = _tier(kube, nodes)
    real.alias("fakevncconsole.com", "openstack", "vnc")
    real.alias("db.example.org", "openstack", "nova")
    assert written == [
        {"fakevncconsole.com": "10.96.3.4"},
        {"fakevncconsole.com": "10.96.3.4", "db.example.org": "10.96.7.8"},
    ]


def test_a_host_process_runs_in_the_nodes_network_with_the_clusters_dns(tmp_path: Any) -> None:
    from realnode import dns
    from realnode.nodes import RealNodes

    nodes = RealNodes(None, tmp_path)  # type: ignore[arg-type]
    nodes.netns_holder = type("Holder", (), {"pid": 4242})()  # type: ignore[assignment]
    real = RealTier(None, _Backends(), None, _Kube(), RealCompute(nodes), None)  # type: ignore[arg-type]
    argv = real.in_cluster(["python", "-m", "nova_operator", "--kubeconfig", "k"], "openstack")
    assert argv[:3] == ["nsenter", "--net=/proc/4242/ns/net", "--"]
    # its own mount namespace, where /etc/resolv.conf is the pod's: the host's stays as it is
    assert argv[3:7] == ["unshare", "--mount", "--propagation", "private"]
    resolv = tmp_path / "resolv-openstack.conf"
    assert argv[argv.index(str(resolv)) + 1 :] == ["python", "-m", "nova_operator", "--kubeconfig", "k"]
    assert "mount --bind" in argv[argv.index("-c") + 1]
    assert resolv.read_text() == dns.resolv_conf("openstack")
    assert resolv.read_text().splitlines() == [
        f"nameserver {dns.DNS_IP}",
        "search openstack.svc.cluster.local svc.cluster.local cluster.local",
        "options ndots:5",
    ]
