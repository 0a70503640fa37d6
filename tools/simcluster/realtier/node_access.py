"""Between the host and the real-Nova tier's nodes (``simcluster.realtier.all_real``), beyond the
servers' relay: what ``RealTier`` offers the tests.

* ``relay(port)``: a server of the host on the loopback at ``port`` is reached by the nodes and their
  pods at ``servers_ip:port`` (``RealNodes.relay``; once per port). ``RealTier.expose`` relays the
  port its Service leads to: a test's own server (a console, a gate in front of Placement, a
  brownfield database) listens on the loopback (``RealTier.host_address``).
* ``reach(ip, port)``: the host's address for a ClusterIP (or a pod's IP) and port, which the host
  does not reach: a port of its loopback published to it (``RealNodes.publish``; once per ClusterIP and port),
  for a test's own HTTP calls to a Service.
* ``alias(name, ip)``: pods resolve ``name`` (outside the cluster's domain) to ``ip``, by the
  cluster's CoreDNS (``realnode.dns_aliases``).
"""

from __future__ import annotations

import threading
from typing import Any

from realnode.dns_aliases import set_aliases
from realnode.nodes import RealNodes

from simcluster.platform.controlplane import free_port


class NodeAccess:
    def __init__(
        self, nodes: RealNodes, kube: Any, servers_ip: str, loopback: str, relayed: set[int]
    ) -> None:
        self.nodes = nodes
        self.kube = kube
        self.servers_ip = servers_ip
        self.loopback = loopback
        self.relayed = set(relayed)  # ports the servers' relay forwards already
        self.published: dict[tuple[str, int], int] = {}  # (ClusterIP, port) -> port of the loopback
        self.aliases: dict[str, str] = {}
        self._lock = threading.Lock()

    @property
    def netns(self) -> str:
        assert self.nodes.netns_holder is not None
        return f"/proc/{self.nodes.netns_holder.pid}/ns/net"

    def relay(self, port: int) -> None:
        with self._lock:
            if port in self.relayed:
                return
            self.nodes.relay(self.servers_ip, [port], upstream=self.loopback)
            self.relayed.add(port)

    def reach(self, ip: str, port: int) -> tuple[str, int]:
        with self._lock:
            published = self.published.get((ip, port))
            if published is None:
                published = free_port()
                self.nodes.publish(published, ip, port, self.loopback)
                self.published[(ip, port)] = published
        return self.loopback, published

    def alias(self, name: str, ip: str) -> None:
        with self._lock:
            self.aliases[name] = ip
            set_aliases(self.kube, self.netns, dict(self.aliases))
