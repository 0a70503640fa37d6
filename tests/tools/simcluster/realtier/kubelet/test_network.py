"""The stand-in's Service rules and hosts files (pure)."""

from __future__ import annotations

from typing import Any

from simcluster.realtier.kubelet.network import hosts_file, ruleset

JSON = dict[str, Any]


def service(name: str, ns: str, ip: str, port: int = 80, port_name: str = "http") -> JSON:
    return {
        "metadata": {"namespace": ns, "name": name},
        "spec": {"clusterIP": ip, "ports": [{"name": port_name, "port": port, "protocol": "TCP"}]},
    }


def endpoints(
    name: str, ns: str, *addresses: tuple[str, bool], port: int = 8080, port_name: str = "http"
) -> JSON:
    return {
        "metadata": {"namespace": ns, "name": f"{name}-x", "labels": {"kubernetes.io/service-name": name}},
        "ports": [{"name": port_name, "port": port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [a], "conditions": {"ready": ready}} for a, ready in addresses],
    }


def test_ready_endpoints_get_one_dnat_chain_each() -> None:
    text = ruleset(
        "t",
        "br",
        "10.244.0.0/16",
        [service("api", "ns", "10.96.0.7", 8774)],
        [
            endpoints(
                "api", "ns", ("10.244.0.3", True), ("10.244.0.2", True), ("10.244.0.9", False), port=8774
            )
        ],
    )
    assert (
        "ip daddr 10.96.0.7 tcp dport 8774 numgen random mod 2 "
        "vmap { 0 : jump endpoint-0, 1 : jump endpoint-1 }" in text
    )
    assert "meta l4proto tcp dnat to 10.244.0.2:8774" in text
    assert "meta l4proto tcp dnat to 10.244.0.3:8774" in text
    assert "10.244.0.9" not in text  # not ready
    assert "ct status dnat ip saddr 10.244.0.0/16 masquerade" in text
    assert 'iifname "br" oifname != "br" drop' in text  # nothing forwarded off the bridge


def test_a_service_without_endpoints_rejects_and_headless_ones_get_no_rule() -> None:
    text = ruleset(
        "t", "br", "10.244.0.0/16", [service("db", "ns", "10.96.0.8"), service("hl", "ns", "None")], []
    )
    assert "ip daddr 10.96.0.8 tcp dport 80 reject" in text
    assert "None" not in text


def test_hosts_names_services_short_only_in_the_pods_namespace() -> None:
    pod = {"metadata": {"namespace": "a", "name": "web-1"}, "spec": {}}
    text = hosts_file(
        pod,
        "10.244.0.5",
        [service("api", "a", "10.96.0.7"), service("db", "b", "10.96.0.8"), service("hl", "a", "None")],
        [endpoints("hl", "a", ("10.244.0.4", True), ("10.244.0.6", False))],
    )
    lines = text.splitlines()
    assert "10.244.0.5\tweb-1" in lines
    assert "10.96.0.7\tapi.a.svc.cluster.local api.a.svc api.a api" in lines
    assert "10.96.0.8\tdb.b.svc.cluster.local db.b.svc db.b" in lines
    assert "10.244.0.4\thl.a.svc.cluster.local hl.a.svc hl.a hl" in lines
    assert "10.244.0.6" not in text


def test_an_alias_names_an_external_host_at_its_services_cluster_ip() -> None:
    pod = {"metadata": {"namespace": "a", "name": "web-1"}, "spec": {}}
    text = hosts_file(
        pod,
        "10.244.0.5",
        [service("external-db", "b", "10.96.0.9"), service("hl", "a", "None")],
        [],
        {
            "db.example.org": ("b", "external-db"),
            "gone.example.org": ("b", "missing"),
            "x.example": ("a", "hl"),
        },
    )
    lines = text.splitlines()
    assert "10.96.0.9\tdb.example.org" in lines
    assert "gone.example.org" not in text  # no Service yet: no answer rather than a wrong one
    assert "x.example" not in text  # a headless Service has no ClusterIP to alias
