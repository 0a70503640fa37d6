"""``realnode.dns`` without a cluster: the objects it applies, the kubelet's settings, and ``query()``
against a responder on loopback (the test's own network namespace)."""

from __future__ import annotations

import ipaddress
import socket
import struct
import threading
import typing
from collections.abc import Iterator

import pytest
from realnode import dns
from realnode.configs import kubelet_config
from realnode.node import Node
from simcluster.platform.controlplane import SERVICE_CIDR


def _by_kind(kind: str) -> dict[str, typing.Any]:
    return next(doc for doc in dns.manifests() if doc["kind"] == kind)


def test_the_service_is_in_the_control_planes_range_and_maps_53_to_corednss_port() -> None:
    service = _by_kind("Service")
    assert service["metadata"] == {**service["metadata"], "name": "kube-dns", "namespace": "kube-system"}
    assert ipaddress.ip_address(service["spec"]["clusterIP"]) in ipaddress.ip_network(SERVICE_CIDR)
    assert {(p["protocol"], p["port"], p["targetPort"]) for p in service["spec"]["ports"]} == {
        ("UDP", 53, dns.PORT),
        ("TCP", 53, dns.PORT),
    }
    assert dns.PORT >= 1024  # no NET_BIND_SERVICE needed


def test_coredns_runs_unprivileged_with_a_token_of_its_own() -> None:
    pod = _by_kind("Deployment")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert pod["automountServiceAccountToken"] is False
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert "/var/run/secrets/kubernetes.io/serviceaccount" in mounts
    role = _by_kind("ClusterRole")
    verbs = {verb for rule in role["rules"] for verb in rule["verbs"]}
    assert verbs == {"get", "list", "watch"}


def test_the_corefile_forwards_nothing_and_answers_other_names_nxdomain() -> None:
    corefile = _by_kind("ConfigMap")["data"]["Corefile"]
    assert "forward" not in corefile
    assert "rcode NXDOMAIN" in corefile
    assert f"kubernetes {dns.CLUSTER_DOMAIN}" in corefile


def test_the_kubelet_names_the_cluster_dns_only_when_asked(tmp_path: typing.Any) -> None:
    node = Node(1, "abc123", tmp_path)
    assert f"clusterDNS: [{dns.DNS_IP}]\n" in kubelet_config(node, None, dns.DNS_IP)
    assert "clusterDNS" not in kubelet_config(node)
    assert "clusterDomain: cluster.local\n" in kubelet_config(node)


@pytest.fixture
def responder() -> Iterator[tuple[str, int]]:
    """A UDP server on loopback answering one question: A 10.96.0.1 for ``known.``, NXDOMAIN else."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(5)

    def serve() -> None:
        for _ in range(2):
            try:
                request, peer = sock.recvfrom(512)
            except OSError:
                return
            question = request[12:]
            known = question.startswith(b"\x05known\x00")
            header = struct.pack("!HHHHHH", struct.unpack("!H", request[:2])[0], 0x8180 | (0 if known else 3),
                                 1, 1 if known else 0, 0, 0)  # fmt: skip
            answer = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 5, 4) + socket.inet_aton("10.96.0.1")
            sock.sendto(header + question + (answer if known else b""), peer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield sock.getsockname()
    sock.close()
    thread.join(5)


def test_query_reads_the_answer_and_the_response_code(responder: tuple[str, int]) -> None:
    host, port = responder
    assert dns.query("/proc/self/ns/net", "known", server=host, port=port) == (0, ["10.96.0.1"])
    assert dns.query("/proc/self/ns/net", "unknown.example", server=host, port=port) == (3, [])
