"""The mixed real tier (issue 37): the pools' compute nodes as real nodes (``realnode.RealNodes``: a
kubelet on containerd, kube-proxy, CoreDNS) beside the kubelet stand-in's control nodes, on the same
control plane.

* The nodes carry the names and labels the pool samples select and the taint the samples' pool
  tolerates (``DEDICATED``), so the control plane's pods (which tolerate nothing of it) stay on the
  stand-in's nodes; CoreDNS tolerates it.
* The real servers listen on the stand-in's pod bridge gateway on the host; ``RealNodes.relay``
  gives the nodes' namespace that same address and forwards its ports, so the Services'
  EndpointSlices (and Keystone's catalog) naming that address work on both kinds of node.
* Each node's ``ovsdb-server`` (the pool's wait-for-chassis) is bound at ``/run/openvswitch/db.sock``
  of that node's own mount namespace, where the pool's hostPath finds it.
* The nova image of each release (``realnode.nova_image``, from the image contract) is in every
  node from its start, under the names the samples use (``nova_store``: one store, copied per node).
"""

from __future__ import annotations

import pathlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from realnode import nova_image, store
from realnode.access import KubeletAccess
from realnode.node import Node
from realnode.nodes import Cluster, RealNodes
from realnode.store import StoredImage

# The taint the pool sample tolerates (config/samples/novacompute.yaml): only the pools run there.
DEDICATED = "example.org/dedicated=compute:NoSchedule"
# What a compute pod's hostPath volumes would otherwise create on the host: each node overlays them.
OVERLAYS = ("/etc", "/usr/lib")
OVSDB_SOCKET = "/run/openvswitch/db.sock"


@dataclass
class RealCompute:
    """The real compute nodes of a mixed tier and what their start measured (seconds)."""

    nodes: RealNodes
    seconds: dict[str, float] = field(default_factory=dict)

    def socket(self, name: str) -> pathlib.Path:
        """Node ``name``'s ``/run/openvswitch/db.sock`` as the host reaches it."""
        node = next(n for n in self.nodes.nodes if n.name == name)
        return self.nodes.mount_path(node, OVSDB_SOCKET)


def start_real_compute(
    cluster: Cluster,
    workdir: pathlib.Path,
    names: Sequence[str],
    labels: Mapping[str, Mapping[str, str]],
    gateway: str,
    ports: Sequence[int],
    images: Mapping[str, Sequence[str]],
    access: KubeletAccess | None = None,
) -> RealCompute:
    """``names`` as real nodes (``labels`` by node), the host's ``gateway:ports`` reachable from them,
    and ``images`` (release -> image names) in each from its start (``nova_store``); ``access``: the
    control plane's way to their kubelets (``realnode.access``), when it was started with its flags."""
    t0 = time.monotonic()
    held = nova_store(images)
    stored = round(time.monotonic() - t0, 1)
    nodes = RealNodes(
        cluster, workdir, names=names, taints=(DEDICATED,), overlays=OVERLAYS, access=access, store=held
    )
    nodes.start()
    out = RealCompute(nodes, {"image store": stored, "nodes": round(nodes.startup_seconds, 1)})
    try:
        for name, own in labels.items():
            if name in names:
                cluster.kube.patch(f"/api/v1/nodes/{name}", {"metadata": {"labels": dict(own)}})
        t = time.monotonic()
        nodes.relay(gateway, ports)
        out.seconds["relay"] = round(time.monotonic() - t, 1)
    except BaseException:
        nodes.stop()
        raise
    out.seconds["total"] = round(time.monotonic() - t0, 1)
    return out


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
