"""One real node's names, addresses, directories and processes (``realnode.nodes`` starts them)."""

from __future__ import annotations

import pathlib
from dataclasses import dataclass

from simcluster.platform.process import ManagedProcess


@dataclass
class Node:
    """One node's names, addresses, directories and processes."""

    index: int  # 1-based
    tag: str  # the cluster's, in every name visible outside the namespaces
    state: pathlib.Path
    init: ManagedProcess | None = None
    containerd: ManagedProcess | None = None
    kubelet: ManagedProcess | None = None
    mnt_inode: int | None = None
    prefix: str = "realnode"
    given_name: str = ""  # instead of <prefix>-<index>

    @property
    def name(self) -> str:
        return self.given_name or f"{self.prefix}-{self.index}"

    @property
    def ip(self) -> str:
        return f"10.87.0.{self.index + 1}"

    @property
    def pod_subnet(self) -> str:
        return f"10.88.{self.index - 1}.0/24"

    @property
    def bridge(self) -> str:
        return f"rb{self.tag}{self.index}"

    @property
    def cgroup_root(self) -> str:
        return f"realnode-{self.tag}-{self.index}"

    @property
    def socket(self) -> pathlib.Path:
        """containerd's socket, in the node's own ``/run``: a path under the workdir can pass the
        108-byte limit of a unix socket's address (it did under pytest's tmp_path)."""
        return pathlib.Path("/run/containerd/containerd.sock")

    def ctr(self, *args: str) -> list[str]:
        """``ctr`` on this node's containerd, run in the node's mount namespace (where its socket is,
        and where ``ctr`` may write its fifos)."""
        assert self.init is not None
        mnt = f"--mount=/proc/{self.init.pid}/ns/mnt"
        return ["nsenter", mnt, "--", "ctr", "--address", str(self.socket), "-n", "k8s.io", *args]
