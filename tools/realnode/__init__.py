"""Real Kubernetes nodes for tests: kubelet and kube-proxy built from Go modules
(``tools/realnode/build.sh``), Debian's containerd, runc and CNI plugins, in network and mount
namespaces of their own, joined to the project's control plane (``simcluster``).

* ``RealNodes``: start N nodes for a started ``SimCluster``, wait until they are Ready, stop them
  leaving nothing behind (``leftovers()`` checks).
* ``images``: OCI images written here (uncompressed, cached by content) for ``ctr images import``.
* ``store``: a containerd root holding a set of images, unpacked once and cached; nodes start from
  hard-linked copies (``RealNodes.store``) instead of importing them each.
"""

from realnode.host import find_binaries
from realnode.images import BUSYBOX_IMAGE, SANDBOX_IMAGE, ImageSpec, busybox_image
from realnode.nodes import RealNodeError, RealNodes

__all__ = [
    "BUSYBOX_IMAGE",
    "SANDBOX_IMAGE",
    "ImageSpec",
    "RealNodeError",
    "RealNodes",
    "busybox_image",
    "find_binaries",
]
