"""The real-Nova tier's nodes (``realnode.RealNodes``: kubelets on containerd, kube-proxy, CoreDNS)
and what its compute nodes need.

* The compute nodes carry the names and labels the pool samples select and the taint the samples'
  pool tolerates (``DEDICATED``), so the control plane's pods (which tolerate nothing of it) land
  on the control nodes; CoreDNS tolerates it.
* Each compute node's ``ovsdb-server`` (the pool's wait-for-chassis) is bound at
  ``/run/openvswitch/db.sock`` of that node's own mount namespace, where the pool's hostPath finds it.
* The nova image of each release (``realnode.nova_image``, from the image contract) is in every
  node from its start, under the names the samples use (``nova_store``: one store, copied per node).
"""

from __future__ import annotations

import pathlib
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from realnode import nova_image, store
from realnode.node import Node
from realnode.nodes import RealNodes
from realnode.store import StoredImage

# The taint the pool sample tolerates (config/samples/novacompute.yaml): only the pools run there.
DEDICATED = "example.org/dedicated=compute:NoSchedule"
# What a compute pod's hostPath volumes would otherwise create on the host: each node overlays them.
OVERLAYS = ("/etc", "/usr/lib")
OVSDB_SOCKET = "/run/openvswitch/db.sock"


@dataclass
class RealCompute:
    """The tier's real nodes and what their start measured (seconds)."""

    nodes: RealNodes
    seconds: dict[str, float] = field(default_factory=dict)

    def socket(self, name: str) -> pathlib.Path:
        """Node ``name``'s ``/run/openvswitch/db.sock`` as the host reaches it."""
        node = next(n for n in self.nodes.nodes if n.name == name)
        return self.nodes.mount_path(node, OVSDB_SOCKET)


def on_every_node(nodes: RealNodes, one: Callable[[Node], list[str]]) -> None:
    """``one(node)`` on every node at once (an image's unpack is each node's own work); the errors
    it returns or raises, of all nodes, in one ``RuntimeError``."""
    errors: list[str] = []

    def run(node: Node) -> None:
        try:
            errors.extend(one(node))
        except Exception as exc:  # a thread's exception would be printed and lost
            errors.append(f"{node.name}: {exc!r}")

    threads = [threading.Thread(target=run, args=(node,)) for node in nodes.nodes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError("; ".join(errors))


def nova_store(images: Mapping[str, Sequence[str]]) -> pathlib.Path:
    """A store (``realnode.store``) holding each release's nova image, tagged with each of its names:
    the nodes start with them unpacked (``RealNodes.store``)."""
    held = [
        StoredImage(image.tar, nova_image.NOVA_REPO, tuple(names))
        for image, names in ((nova_image.build(release), names) for release, names in images.items())
    ]
    return store.ensure(held)
