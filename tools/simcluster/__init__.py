"""Local Kubernetes clusters for tests, `make run` and benchmarks.

* ``ControlPlane``: etcd + kube-apiserver (the integration tier).
* ``SimCluster``: that plus kube-controller-manager, kube-scheduler and kwok with fake nodes.
* ``launch()``: a ``SimCluster`` with nodes, the dependency CRDs, the stand-in controllers
  (mariadb-operator, RabbitMQ, Gateway API) and the fake Keystone + Nova API; returns a
  ``SimHandle``. ``python -m simcluster up`` runs it until Ctrl-C.

Never imported by the operator package, and never imports it. The binaries come from
tools/envtest/build.sh.
"""

from simcluster.client.kube import Kube, KubeError
from simcluster.platform.cluster import (
    CELL0_UUID,
    COMPLETE_AFTER_ANNOTATION,
    EXIT_CODE_ANNOTATION,
    FAIL_LABEL,
    POOL_LABEL,
    REAL_BACKOFF_ANNOTATION,
    TERMINATION_MESSAGE_ANNOTATION,
    UNREADY_LABEL,
    SimCluster,
)
from simcluster.platform.controlplane import ControlPlane, ControlPlaneError, find_binaries
from simcluster.platform.launch import SERVICE_PASSWORD, SERVICE_USER, SimHandle, launch
from simcluster.platform.process import ManagedProcess
from simcluster.standins.openstack import FakeOpenStack

__all__ = [
    "CELL0_UUID",
    "COMPLETE_AFTER_ANNOTATION",
    "EXIT_CODE_ANNOTATION",
    "FAIL_LABEL",
    "POOL_LABEL",
    "REAL_BACKOFF_ANNOTATION",
    "SERVICE_PASSWORD",
    "SERVICE_USER",
    "TERMINATION_MESSAGE_ANNOTATION",
    "UNREADY_LABEL",
    "ControlPlane",
    "ControlPlaneError",
    "FakeOpenStack",
    "Kube",
    "KubeError",
    "ManagedProcess",
    "SimCluster",
    "SimHandle",
    "find_binaries",
    "launch",
]
