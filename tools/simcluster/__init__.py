"""Local Kubernetes control planes for tests, `make run` and benchmarks.

Never imported by the operator package. The binaries come from tools/envtest/build.sh.
"""

from simcluster.controlplane import ControlPlane, ControlPlaneError, find_binaries

__all__ = ["ControlPlane", "ControlPlaneError", "find_binaries"]
