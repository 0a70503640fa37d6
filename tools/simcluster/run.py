"""``python -m simcluster run`` (what ``make run`` calls): the operator, set up and running.

With ``$KUBECONFIG`` set, the operator runs against that cluster (its own flags follow ``--``).
Without it, a local cluster is started (``simcluster.realtier.all_real``): the simulated control
plane, every node a real kubelet on containerd (``control-0`` and ``control-1``, and the pool's
``compute-0`` and ``compute-1`` labelled as the pool sample selects and tainted as it tolerates)
with kube-proxy and CoreDNS, and MariaDB, RabbitMQ, memcached, Keystone, Placement and Glance on the
host's loopback. Every supported release's nova image is in every node from its start (an upgrade of
the sample finds its image). The CRDs and the samples (with their Secrets and stand-in dependencies)
are applied, the operator is installed by its Helm chart (``simcluster.realtier.operator_chart``:
the image ``tools/opimage`` builds from the Dockerfile, imported into each node, with
``--default-image-pull-policy IfNotPresent``: a tag-named image would be pulled, and the nodes have
no registry) with the chart's placement, and every condition change of the sample Nova and
NovaCompute is printed, with what becomes of the operator's pods, until both are Ready; then how to
look, with a ``clouds.yaml`` for the ``openstack`` CLI (the compute API at a port of the host's
loopback published to the ``nova`` Service). The pods' logs are followed through the API server into
``<workdir>/operator.log`` (``realtier.pod_logs``). Ctrl-C stops everything that was started and
removes the work directory's data but its logs (``platform.workdir``).

``--local-operator`` (``make run LOCAL_OPERATOR=1``, for fast iteration): the operator runs as a
local process of this tree instead, in the nodes' network namespace with the cluster's DNS
(``RealTier.in_cluster``: it resolves and reaches the Services as its pod would), its metrics
published on the host's loopback. ``--standins`` (``make run STANDINS=1``): kwok nodes and the
stand-ins instead, nothing of Nova runs (faster).

A local operator runs without leader election (``--leader-elect=false`` before the flags given
after ``--``), as the kubebuilder scaffold's ``make run`` does: one process, no replica to hand over
to, so a slow API server or a busy machine cannot make it give up a Lease and exit (and take the
cluster down with it). ``make run ARGS=--leader-elect`` turns it back on. The chart's pods keep its
defaults (two replicas, leader election): a replica that exits is restarted and the other takes the
Lease over.
"""

from __future__ import annotations

import functools
import os
import pathlib
import signal
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any, Protocol

import yaml
from realnode import nova_image

from simcluster.platform.controlplane import REPO, free_port
from simcluster.platform.launch import SimHandle, launch
from simcluster.platform.operator import PROGRAM, operator_argv
from simcluster.platform.process import ManagedProcess
from simcluster.platform.workdir import keep_logs_only
from simcluster.realtier.all_real import CONTROL_NODES, launch_all_real, register_compute
from simcluster.realtier.operator_chart import (
    CONTAINER,
    METRICS_SERVICE,
    SELECTOR,
    chart_values,
    import_image,
    install,
)
from simcluster.realtier.operator_chart import NAMESPACE as OPERATOR_NAMESPACE
from simcluster.realtier.pod_logs import PodLogs
from simcluster.realtier.tier import FAKE_COMPUTE_DRIVER, clouds_yaml

SAMPLES = REPO / "config" / "samples"
POOL = "rack7"
POOL_LABEL = "example.org/compute-pool"
NAMESPACE = "openstack"
WATCHED = (("novas", "nova"), ("novacomputes", POOL))


RUN_DEFAULTS = ("--leader-elect=false",)
"""The operator flags ``make run`` gives before the caller's (a later flag wins)."""
REAL_NODES_DEFAULTS = ("--default-image-pull-policy", "IfNotPresent")
"""And on real nodes: the images in the nodes are used, no registry is asked."""


OperatorImage = tuple[str, pathlib.Path]
"""The operator's image for the chart: its reference and its OCI archive (``tools/opimage``)."""


class Operator(Protocol):
    """What ``make run`` watches of the operator: a local process, or the chart's pods (``PodLogs``)."""

    @property
    def log(self) -> pathlib.Path: ...

    @property
    def alive(self) -> bool: ...

    def output(self, tail_bytes: int = 20_000) -> str: ...


def run_args(operator_args: Sequence[str], *, real_nodes: bool = False) -> list[str]:
    """The operator's flags under ``make run``: ``RUN_DEFAULTS`` (and ``REAL_NODES_DEFAULTS``), then
    ``operator_args``."""
    return [*RUN_DEFAULTS, *(REAL_NODES_DEFAULTS if real_nodes else ()), *operator_args]


def run_against_kubeconfig(operator_args: Sequence[str]) -> int:
    """Replace this process with the operator (signals go straight to it)."""
    argv = [sys.executable, *PROGRAM, *run_args(operator_args)]
    os.execv(sys.executable, argv)
    return 1  # not reached


POOL_NODE_LABELS = {POOL_LABEL: POOL, "topology.kubernetes.io/zone": "az1"}
REAL_POOL_NODES = ("compute-0", "compute-1")
NODE_NAMES = (*CONTROL_NODES, *REAL_POOL_NODES)


def _samples(workdir: pathlib.Path, keystone_url: str) -> list[pathlib.Path]:
    """The samples as the simulated cluster needs them: Keystone is the fake one."""
    nova = yaml.safe_load((SAMPLES / "nova_minimal.yaml").read_text())
    nova["spec"]["keystoneEndpoint"] = keystone_url
    patched = workdir / "nova_minimal.yaml"
    patched.write_text(yaml.safe_dump(nova, sort_keys=False))
    here = pathlib.Path(__file__).parent
    return [
        SAMPLES / "secrets.yaml",
        here / "samples" / "dependencies.yaml",
        patched,
        SAMPLES / "novacompute.yaml",
    ]


def _conditions(handle: SimHandle, plural: str, name: str) -> dict[str, tuple[str, str, str]]:
    try:
        obj: dict[str, Any] = handle.cluster.kube.get(
            f"/apis/nova.openstack.c5c3.io/v1alpha1/namespaces/{NAMESPACE}/{plural}/{name}"
        )
    except Exception:  # not there yet, or the API server is busy: the next poll tells
        return {}
    return {
        c["type"]: (c.get("status", ""), c.get("reason", ""), c.get("message", ""))
        for c in (obj.get("status") or {}).get("conditions") or []
    }


def build_operator_image() -> OperatorImage:
    """The operator's image from ``tools/opimage`` (cached by content: seconds when unchanged)."""
    from opimage import build  # the chart mode only: buildah and mmdebstrap are needed for it alone

    image, _ = build()
    return image.ref, image.archive


def run_simulated(
    workdir: pathlib.Path | None,
    operator_args: Sequence[str],
    *,
    real: bool = True,
    local_operator: bool = False,
    operator_image: OperatorImage | None = None,
) -> int:
    """The samples on a local cluster: served by the real Nova on real nodes (``real``), the operator
    installed by its chart (``operator_image``: the image to install, else built here) unless
    ``local_operator``; or by kwok and the stand-ins (faster, nothing of Nova runs)."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    t0 = time.monotonic()
    chart = real and not local_operator
    if chart:
        t = time.monotonic()
        operator_image = operator_image or build_operator_image()
        print(f"the operator's image {operator_image[0]}: {time.monotonic() - t:.1f} s to find or build it")
    if real:
        handle = _launch_all_real(workdir, operator_image[0] if chart and operator_image else None)
    else:
        print(
            "starting the simulated cluster (etcd, kube-apiserver, controller-manager, scheduler, kwok) ..."
        )
        handle = launch(workdir, nodes=3, pools={POOL: 3})
    try:
        operator: Operator
        if chart:
            assert operator_image is not None
            operator = _start_chart(handle, operator_image, operator_args)
            metrics = (
                f".venv/bin/kubectl get --raw /api/v1/namespaces/{OPERATOR_NAMESPACE}/services/"
                f"{METRICS_SERVICE}:8080/proxy/metrics | grep ^nova_operator_"
            )
            where = (
                f"the operator's pods log to {operator.log} (or: .venv/bin/kubectl -n {OPERATOR_NAMESPACE}"
                " logs -f deployment/nova-operator)"
            )
        else:
            port = free_port()
            operator = _start(handle, real, port, run_args(operator_args, real_nodes=real))
            metrics = f"curl -s http://127.0.0.1:{port}/metrics | grep ^nova_operator_"
            where = (
                f"operator running as system:serviceaccount:nova-system:nova-operator (log: {operator.log})"
            )
        if handle.real is not None:
            times = ", ".join(f"{k} {v:.1f} s" for k, v in handle.real.real_compute.seconds.items())
            nodes = [n.name for n in handle.real.real_compute.nodes.nodes]
            print(f"real nodes {', '.join(nodes)} Ready ({times})")
        print(f"cluster up in {time.monotonic() - t0:.1f} s; {where}")
        return _follow(handle, operator, stop, t0, metrics)
    finally:
        stop_keeping_logs(handle)


def stop_keeping_logs(handle: SimHandle) -> None:
    """Stop the cluster and remove its work directory but the logs, saying so as it goes (what
    ``make run`` and ``simcluster up`` do at exit)."""
    print("stopping ...", flush=True)
    handle.stop()
    print(keep_logs_only(handle.workdir, functools.partial(print, flush=True)).summary(), flush=True)


def _launch_all_real(workdir: pathlib.Path | None, operator_image: str | None) -> SimHandle:
    releases = nova_image.releases()  # every supported release
    print(
        "starting a cluster of real nodes with the real Nova (etcd, kube-apiserver, controller-manager, "
        f"scheduler; {', '.join(NODE_NAMES)} real kubelets on containerd with kube-proxy and CoreDNS; "
        "MariaDB, RabbitMQ, memcached, Keystone, Placement, Glance on the host's loopback)"
    )
    print(f"  the nova images of {', '.join(releases)} in every node")
    if operator_image is not None:
        print(f"  and the operator installed by its Helm chart (its own placement), from {operator_image}")
    else:
        print("  and the operator as a local process in the nodes' network (LOCAL_OPERATOR=1)")
    return launch_all_real(
        workdir,
        control_nodes=CONTROL_NODES,
        compute_nodes=REAL_POOL_NODES,
        node_labels=dict.fromkeys(REAL_POOL_NODES, POOL_NODE_LABELS),
        releases=releases,
        namespaces=(NAMESPACE,),
    )


def _service_password() -> str:
    for doc in yaml.safe_load_all((SAMPLES / "secrets.yaml").read_text()):
        if doc["metadata"]["name"] == "nova-service-user":
            return str(doc["stringData"]["password"])
    raise KeyError("nova-service-user")


def _start_chart(handle: SimHandle, image: OperatorImage, operator_args: Sequence[str]) -> PodLogs:
    """The CRDs and the samples, then the operator by its chart (``realtier.operator_chart``): the
    image imported into the nodes, ``helm install``."""
    assert handle.real is not None
    handle.apply(REPO / "config" / "crd")  # the chart holds the RBAC and the rest, not the CRDs
    _apply_real_samples(handle)
    t = time.monotonic()
    ref, archive = image
    import_image(handle.real.real_compute.nodes, ref, archive)
    imported = time.monotonic() - t
    values = chart_values(ref, operator_args)
    installed = install(handle.cluster.kubeconfig, handle.workdir, values)
    nodes = ", ".join(n.name for n in handle.real.real_compute.nodes.nodes)
    print(
        f"operator image imported into {nodes} in {imported:.1f} s; helm install "
        f"{installed:.1f} s (values: {handle.workdir / 'helm' / 'values.yaml'})"
    )
    return PodLogs(
        handle.cluster.kube, OPERATOR_NAMESPACE, SELECTOR, CONTAINER, handle.workdir / "operator.log"
    )


def _apply_real_samples(handle: SimHandle) -> None:
    assert handle.real is not None
    handle.create_gateway(NAMESPACE, "public-gateway")
    handle.real.openstack.add_service_user("nova", _service_password())
    pool = yaml.safe_load((SAMPLES / "novacompute.yaml").read_text())
    # no libvirt here: the pool's nova-compute runs the fake driver
    pool["spec"].setdefault("extraConfig", {}).setdefault("DEFAULT", {})["compute_driver"] = (
        FAKE_COMPUTE_DRIVER
    )
    pool_file = handle.workdir / "novacompute.yaml"
    pool_file.write_text(yaml.safe_dump(pool, sort_keys=False))
    here = pathlib.Path(__file__).parent
    handle.apply(
        SAMPLES / "secrets.yaml",
        here / "samples" / "dependencies.yaml",
        SAMPLES / "nova_minimal.yaml",
        pool_file,
        namespace=NAMESPACE,
    )


def _start(handle: SimHandle, real: bool, metrics: int, operator_args: Sequence[str]) -> ManagedProcess:
    c = handle.cluster
    handle.install()
    if real:
        assert handle.real is not None
        _apply_real_samples(handle)
        argv = handle.real.in_cluster(operator_argv(handle, metrics, *operator_args))
        operator = handle.spawn("operator", argv)
        # its metrics listen on the nodes' network's loopback: the same port of the host's leads there
        handle.real.real_compute.nodes.publish(metrics, "127.0.0.1", metrics)
        return operator
    handle.create_gateway(NAMESPACE, "public-gateway")
    for node in handle.nodes[POOL]:
        c.label_node(node, POOL_NODE_LABELS)
    assert handle.openstack is not None
    handle.openstack.add_user("nova", _service_password())
    handle.apply(*_samples(handle.workdir, handle.openstack.keystone_url), namespace=NAMESPACE)
    # The Nova API is the fake one: no in-cluster Service DNS out here.
    return handle.spawn(
        "operator",
        operator_argv(handle, metrics, "--nova-api-url", handle.openstack.nova_url, *operator_args),
    )


def _follow(
    handle: SimHandle,
    operator: Operator,
    stop: threading.Event,
    t0: float,
    metrics: str,
) -> int:
    """Print every condition change of the samples until Ctrl-C; once both are Ready, how to look."""
    c = handle.cluster
    seen: dict[tuple[str, str], tuple[str, str, str]] = {}
    ready_at: float | None = None
    while not stop.wait(1.0):
        if not operator.alive:
            print(f"the operator exited; the tail of its log:\n{operator.output(4000)}", file=sys.stderr)
            return 1
        if isinstance(operator, PodLogs):
            for line in operator.poll():
                print(f"  {time.monotonic() - t0:6.1f}s  {line}", flush=True)
        all_ready = True
        for plural, name in WATCHED:
            conds = _conditions(handle, plural, name)
            for ctype, value in sorted(conds.items()):
                if seen.get((name, ctype)) != value:
                    seen[(name, ctype)] = value
                    status, reason, message = value
                    print(
                        f"  {time.monotonic() - t0:6.1f}s  {plural[:-1]}/{name}  {ctype}={status}  "
                        f"{reason}: {message}"
                    )
            all_ready = all_ready and conds.get("Ready", ("",))[0] == "True"
        if all_ready and ready_at is None:
            ready_at = time.monotonic() - t0
            print(f"\nthe sample Nova and NovaCompute are Ready after {ready_at:.1f} s. Look around:")
            print(f"  export KUBECONFIG={c.kubeconfig}")
            print(f"  .venv/bin/kubectl -n {NAMESPACE} get novas,novacomputes,deployments,jobs,pods")
            print(f"  {metrics}")
            if handle.real is not None:
                _print_openstack(handle)
            print("Ctrl-C stops the operator and the cluster.", flush=True)
    return 0


def _print_openstack(handle: SimHandle) -> None:
    """Register the compute API in Keystone (``register_compute``: its public URL a port of the
    host's loopback published to its Service) and write the clouds.yaml the openstack CLI reads."""
    assert handle.real is not None
    compute = register_compute(handle, NAMESPACE)
    clouds = clouds_yaml(handle, handle.workdir / "clouds.yaml", _service_password())
    cli = handle.real.openstack.venvs / "keystone" / "bin" / "openstack"
    print(f"clouds.yaml: {clouds}")
    print(f"compute API: {compute}")
    print(f"  export OS_CLIENT_CONFIG_FILE={clouds} OS_CLOUD=simcluster")
    print(f"  {cli} compute service list")
    # The cloud starts with no flavor and no image: the three commands that boot a server on it.
    print(f"  {cli} flavor create --ram 512 --disk 1 --vcpus 1 m1.tiny")
    print(f"  head -c 1048576 /dev/zero > /tmp/demo.raw && {cli} image create --disk-format raw \\")
    print("      --container-format bare --file /tmp/demo.raw demo-image")
    print(f"  {cli} server create --flavor m1.tiny --image demo-image --nic none --wait demo   (fake driver)")
