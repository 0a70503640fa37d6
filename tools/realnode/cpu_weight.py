"""How much CPU a real node's pods may take from the host's other processes when the CPUs are busy.

The kernel's autogroup (``/proc/sys/kernel/sched_autogroup_enabled``, on here) gives every session of
the root cgroup the weight of one process at nice 0 (1024). The kubelet stand-in ran each container
as a session of its own, so each pod weighed 1024 against the control plane, the servers and the
other sessions of the machine. A real node's pods all live under the node's cgroup root (the
kubelet's ``cgroupRoot``), and a new cgroup weighs 1024 too: all the pods of a node together weighed
what one stand-in pod did. Under load (10 and more on 2 cores) the nova pods of a control node ran a
fraction of their runnable time and a rollout's pods took twice as long to be Ready.

``NODE_CPU_SHARES`` gives the root the weight of the pods a node of the real tier runs (a control
node runs five to seven): the pods are as heavy, together, as under the stand-in. Between the pods
of a node the kubelet's own shares (by their CPU requests) apply, as on any node.
"""

from __future__ import annotations

import pathlib

CGROUPS = pathlib.Path("/sys/fs/cgroup")
SESSION_SHARES = 1024  # cpu.shares of a new cgroup: one process at nice 0, one autogroup
NODE_CPU_SHARES = 6 * SESSION_SHARES


def weigh(cgroup_root: str, shares: int = NODE_CPU_SHARES, cgroups: pathlib.Path = CGROUPS) -> pathlib.Path:
    """Set the ``cpu.shares`` of ``cgroup_root`` in the cgroup v1 ``cpu`` hierarchy (which must hold
    it: ``node-init.sh`` makes the root in every hierarchy); the file written."""
    if not 2 <= shares <= 262144:  # the kernel's range for cpu.shares
        raise ValueError(f"cpu.shares must be within 2..262144, not {shares}")
    path = cgroups / "cpu" / cgroup_root / "cpu.shares"
    if not path.parent.is_dir():
        raise FileNotFoundError(f"no cgroup {cgroup_root} in {cgroups / 'cpu'}")
    path.write_text(f"{shares}\n")
    return path


def shares(cgroup_root: str, cgroups: pathlib.Path = CGROUPS) -> int:
    """The ``cpu.shares`` of ``cgroup_root``."""
    return int((cgroups / "cpu" / cgroup_root / "cpu.shares").read_text())
