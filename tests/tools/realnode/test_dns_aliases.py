"""``realnode.dns_aliases`` without a cluster: the Corefile it writes, served by the real CoreDNS
binary (its catch-all block, the one the aliases go in; the cluster's block needs an API server),
and the rollout it waits for."""

from __future__ import annotations

import pathlib
import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from realnode import dns
from realnode.dns_aliases import CATCH_ALL, corefile, rolled_out

NETNS = "/proc/self/ns/net"
ALIASES = {"db.example.org": "10.96.12.34", "memcached-0.memcached.openstack.svc": "10.96.0.99"}


def test_without_aliases_the_corefile_is_the_clusters_own() -> None:
    assert corefile({}) == dns.COREFILE


def test_the_aliases_come_before_the_catch_all_and_leave_the_cluster_block_alone() -> None:
    text = corefile(ALIASES)
    cluster_block, _, rest = text.partition(f".:{dns.PORT}")
    assert cluster_block == dns.COREFILE.partition(f".:{dns.PORT}")[0]
    assert rest.index(r"match ^db\.example\.org\.$") < rest.index(CATCH_ALL)
    assert "IN A 10.96.12.34" in rest
    assert "IN A 10.96.0.99" in rest


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def coredns(tmp_path: pathlib.Path) -> Iterator[int]:
    """CoreDNS on a loopback port serving the catch-all block of ``corefile(ALIASES)``."""
    port = _free_udp_port()
    block = corefile(ALIASES).partition(f".:{dns.PORT}")[2]
    (tmp_path / "Corefile").write_text(f".:{port} {block}")
    proc = subprocess.Popen(
        [str(dns.find_binary()), "-conf", str(tmp_path / "Corefile")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                dns.query(NETNS, "ready.probe", server="127.0.0.1", port=port, timeout=0.5)
                break
            except OSError:
                assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
                assert time.monotonic() < deadline, "CoreDNS did not answer"
        yield port
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout:
            proc.stdout.close()


def test_coredns_answers_each_alias_with_its_address_and_nothing_else(coredns: int) -> None:
    for name, address in ALIASES.items():
        assert dns.query(NETNS, name, server="127.0.0.1", port=coredns) == (0, [address]), name
    # a name beside an alias's: still unknown
    assert dns.query(NETNS, "xdb.example.org", server="127.0.0.1", port=coredns) == (3, [])
    assert dns.query(NETNS, "example.org", server="127.0.0.1", port=coredns) == (3, [])


def _deployment(generation: int, observed: int, **status: int) -> dict[str, Any]:
    return {
        "metadata": {"generation": generation},
        "spec": {"replicas": 1},
        "status": {"observedGeneration": observed, **status},
    }


def test_the_rollout_is_done_once_only_the_new_templates_pod_is_left_and_ready() -> None:
    assert rolled_out(_deployment(3, 3, replicas=1, updatedReplicas=1, readyReplicas=1))
    assert not rolled_out(_deployment(3, 2, replicas=1, updatedReplicas=1, readyReplicas=1))  # not seen yet
    assert not rolled_out(_deployment(3, 3, replicas=2, updatedReplicas=1, readyReplicas=2))  # old pod left
    assert not rolled_out(_deployment(3, 3, replicas=1, updatedReplicas=1, readyReplicas=0))  # not ready
