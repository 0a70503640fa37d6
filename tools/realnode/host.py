"""What real nodes need of this machine and must leave unchanged on it: the binaries and Debian
packages they run, the global kernel settings and host paths their daemons would write (trap numbers
refer to ``/work/shared/design/real-kubelet.md``)."""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import subprocess

from simcluster.platform.controlplane import REPO

CNI_BIN = pathlib.Path("/usr/lib/cni")
# The global kernel settings a kubelet or kube-proxy would write (traps 5 and 7): never changed on the host.
GLOBAL_SETTINGS = (
    "/proc/sys/vm/overcommit_memory",
    "/proc/sys/vm/panic_on_oom",
    "/proc/sys/kernel/panic",
    "/proc/sys/kernel/panic_on_oops",
    "/proc/sys/kernel/keys/root_maxkeys",
    "/proc/sys/kernel/keys/root_maxbytes",
    "/proc/sys/net/netfilter/nf_conntrack_max",
    "/sys/module/nf_conntrack/parameters/hashsize",
)
# Host paths the daemons write to despite their flags (trap 6): redirected inside each node.
HOST_PATHS = (
    "/var/lib/kubelet",
    "/var/lib/cni",
    "/var/lib/containerd",
    "/var/log/pods",
    "/var/log/containers",
    "/run/containerd",
    "/run/netns",
    "/usr/libexec/kubernetes",
    # a NovaCompute pool's hostPath volumes (realnode.nodes' ``overlays`` keep them in the node)
    "/run/libvirt",
    "/run/openvswitch",
    "/var/lib/nova",
    "/etc/iscsi",
    "/etc/nvme",
    "/etc/multipath",
    "/etc/multipath.conf",
    "/usr/lib/modules",
)


def find_binaries() -> pathlib.Path:
    """kubelet, kube-proxy and pause: ``$REALNODE_BIN``, or ``tools/realnode/build.sh``'s output."""
    env = os.environ.get("REALNODE_BIN")
    if env:
        return pathlib.Path(env)
    out = subprocess.run(
        ["bash", str(REPO / "tools" / "realnode" / "build.sh")], check=True, stdout=subprocess.PIPE, text=True
    )
    return pathlib.Path(out.stdout.strip().splitlines()[-1])


def missing_packages() -> list[str]:
    """The Debian packages (``tools/realnova/install.sh``) a node needs and this machine lacks."""
    needs = {
        "containerd": shutil.which("containerd") and shutil.which("ctr"),
        "runc": os.path.exists("/usr/sbin/runc"),
        "containernetworking-plugins": (CNI_BIN / "bridge").exists() and (CNI_BIN / "host-local").exists(),
        "nftables": shutil.which("nft"),
        "util-linux": shutil.which("nsenter") and shutil.which("unshare"),
    }
    return [package for package, found in needs.items() if not found]


def settings() -> dict[str, str]:
    """The current values of ``GLOBAL_SETTINGS`` (those this machine has)."""
    out = {}
    for path in GLOBAL_SETTINGS:
        with contextlib.suppress(OSError):
            out[path] = pathlib.Path(path).read_text().strip()
    return out
