"""A kubelet stand-in whose pods really run, beside kwok's fake nodes (issue 23, item 1).

``Kubelet(kube, nodes, images, state_dir)`` registers its nodes (Ready, capacity, a Lease heartbeat)
and runs every pod bound to one of them as a kubelet and a container runtime would: volumes from
the API, env, each container a process tree in its own mount, UTS and PID namespaces under the
container's user, init containers, restart back-off, probes, graceful deletion. Images are root
trees (``runtime.Image``); an image name it does not know leaves the container in ``ErrImagePull``.

With ``network=PodNetwork(kube)`` each pod has its own network namespace and IP on a bridge; Services
are reached by ClusterIP through an nftables table of DNAT rules kept from the EndpointSlices (not the
real kube-proxy: another Go build and a proxy that owns the host's rules, for what a few rules per
Service do) and by name through each pod's ``/etc/hosts`` (not CoreDNS: another Go build and pods of its
own, for names the hosts file answers); ``network.py`` gives the full reasons.

Nothing of ``nova_operator`` knows about it, and it imports nothing of ``nova_operator``.
"""

from simcluster.realtier.kubelet.network import PodNetwork
from simcluster.realtier.kubelet.node import STANDIN_LABEL, Kubelet
from simcluster.realtier.kubelet.runtime import Image

__all__ = ["STANDIN_LABEL", "Image", "Kubelet", "PodNetwork"]
