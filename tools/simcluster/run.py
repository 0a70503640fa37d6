"""``python -m simcluster run`` (what ``make run`` calls): the operator, set up and running.

With ``$KUBECONFIG`` set, the operator runs against that cluster (its own flags follow
``--``). Without it, the simulated cluster is started, the CRDs, the RBAC and the samples
(with their Secrets and stand-in dependencies) are applied, the operator runs as its own
ServiceAccount, and every condition change of the sample Nova and NovaCompute is printed
until both are Ready; then how to look. Ctrl-C stops everything that was started.

``--real-compute-nodes`` (``make run REAL_NODES=mixed``): the pool's two compute nodes are real kubelets
on containerd (``simcluster.realtier.real_compute``), the control nodes stay the stand-in's. The
sample release's nova image is imported into them (the other releases stay the stand-in's, built in
the background as without the flag: an import costs about 45 s per release and node under load, and
only an upgrade of the sample needs them), and the operator is installed by its Helm chart as pods
on those nodes (``simcluster.realtier.operator_chart``: the image ``tools/opimage`` builds, imported
into each node, and the values that mode must set, among them ``--default-image-pull-policy
IfNotPresent``: a tag-named image would be pulled, and the nodes have no registry). Its pods' logs
are followed through the API server into ``<workdir>/operator.log`` (``realtier.pod_logs``), and
what becomes of the pods (scheduled, Ready, restarted) is printed with the conditions. With
``--local-operator`` (``make run REAL_NODES=mixed LOCAL_OPERATOR=1``) the operator runs as a local
process instead, as without real nodes, with that pull policy. Ctrl-C stops the nodes with the
cluster, and the operator's pods with them.

``--all-real`` (``make run REAL_NODES=1``): every node a real kubelet on containerd, no kubelet
stand-in at all (``simcluster.realtier.all_real``): ``control-0`` and ``control-1``, and the pool's
two compute nodes labelled and tainted as above. Every supported release's nova image is imported
into every node before the samples are applied (an upgrade of the sample finds its image), and the
operator is installed by its chart with the chart's defaults placing it (on the control nodes; it
reaches the compute API by its Service's name). The real servers listen on the host's loopback; the
printed ``clouds.yaml`` names them there, and the compute API at a port of the host's loopback
published to the ``nova`` Service. ``--local-operator`` is refused with it: a process on the host
cannot resolve or reach the cluster's Services there.

The local operator runs without leader election (``--leader-elect=false`` before the flags
given after ``--``), as the kubebuilder scaffold's ``make run`` does: one process, no replica to
hand over to, so a slow API server or a busy machine cannot make it give up a Lease and exit (and
take the simulated cluster down with it). ``make run ARGS=--leader-elect`` turns it back on. The
chart's pods keep its defaults (two replicas, leader election): a replica that exits is restarted
and the other takes the Lease over.
"""

from __future__ import annotations

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

from simcluster.platform.controlplane import REPO, free_port
from simcluster.platform.launch import SimHandle, launch
from simcluster.platform.operator import PROGRAM, operator_argv
from simcluster.platform.process import ManagedProcess
from simcluster.realtier.all_real import CONTROL_NODES, launch_all_real, register_compute
from simcluster.realtier.launch import FAKE_COMPUTE_DRIVER, clouds_yaml, launch_real
from simcluster.realtier.operator_chart import (
    CONTAINER,
    METRICS_SERVICE,
    NOVA_SERVICE,
    SELECTOR,
    chart_values,
    import_image,
    install,
)
from simcluster.realtier.operator_chart import NAMESPACE as OPERATOR_NAMESPACE
from simcluster.realtier.pod_logs import PodLogs
from simcluster.realtier.release_images import ReleaseImages, supported
from simcluster.realtier.service_bridge import ServiceBridge

SAMPLES = REPO / "config" / "samples"
POOL = "rack7"
POOL_LABEL = "example.org/compute-pool"
NAMESPACE = "openstack"
WATCHED = (("novas", "nova"), ("novacomputes", POOL))


LOCAL_WITH_ALL_REAL = (
    "--local-operator does not go with --all-real: a process on the host cannot "
    "resolve or reach the cluster's Services there; make run REAL_NODES=1 LOCAL_OPERATOR=1 "
    "starts the mixed tier for it"
)

RUN_DEFAULTS = ("--leader-elect=false",)
"""The operator flags ``make run`` gives before the caller's (a later flag wins)."""
REAL_NODES_DEFAULTS = ("--default-image-pull-policy", "IfNotPresent")
"""And with real compute nodes: the imported image is used, no registry is asked."""


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
ALL_REAL_NODES = (*CONTROL_NODES, *REAL_POOL_NODES)


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
    real_nodes: bool = False,
    local_operator: bool = False,
    operator_image: OperatorImage | None = None,
    all_real: bool = False,
) -> int:
    """The samples on a local cluster: served by real nova processes (``real``), or by kwok and the
    stand-ins (faster, nothing of Nova runs); ``real_nodes``: the pool's nodes real kubelets, and the
    operator installed by its chart on them unless ``local_operator`` (``operator_image``: the image
    to install, else built here); ``all_real``: every node real, the operator by its chart."""
    if (real_nodes or all_real) and not real:
        raise ValueError("real compute nodes run the real Nova: not with the stand-ins")
    if all_real and local_operator:
        raise ValueError(LOCAL_WITH_ALL_REAL)
    if all_real and real_nodes:
        raise ValueError("--all-real and --real-compute-nodes are two modes: one of them")
    chart = (real_nodes or all_real) and not local_operator
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    t0 = time.monotonic()
    bridge_port: int | None = None
    if all_real:
        operator_image = operator_image or build_operator_image()
        handle = _launch_all_real(workdir, operator_image[0])
    elif real:
        print(
            "starting the simulated cluster with the real Nova (etcd, kube-apiserver, controller-manager, "
            "scheduler, kubelet stand-in nodes, MariaDB, RabbitMQ, memcached, Keystone, Placement, Glance)"
        )
        if real_nodes:
            print(
                f"  with {' and '.join(REAL_POOL_NODES)} real kubelets on containerd (kube-proxy, CoreDNS; "
                f"the nova image {_sample_release()} imported into each)"
            )
        bridge_port = free_port() if chart else None
        if chart:
            t = time.monotonic()
            operator_image = operator_image or build_operator_image()
            print(
                f"  and the operator installed by its Helm chart as pods on them, from {operator_image[0]}"
                f" ({time.monotonic() - t:.1f} s to find or build it)"
            )
        handle = launch_real(
            workdir,
            releases=(_sample_release(),),
            compute_nodes=REAL_POOL_NODES,
            node_labels=dict.fromkeys(REAL_POOL_NODES, POOL_NODE_LABELS),
            real_compute_nodes=real_nodes,
            real_node_releases=(_sample_release(),),
            pod_access=chart,
            relay_ports=(bridge_port,) if bridge_port is not None else (),
        )
    else:
        print(
            "starting the simulated cluster (etcd, kube-apiserver, controller-manager, scheduler, kwok) ..."
        )
        handle = launch(workdir, nodes=3, pools={POOL: 3})
    try:
        operator: Operator
        if chart:
            assert operator_image is not None
            operator = _start_chart(handle, operator_image, bridge_port, operator_args)
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
            operator = _start(handle, real, port, run_args(operator_args, real_nodes=real_nodes))
            metrics = f"curl -s http://127.0.0.1:{port}/metrics | grep ^nova_operator_"
            where = (
                f"operator running as system:serviceaccount:nova-system:nova-operator (log: {operator.log})"
            )
        if handle.real is not None and handle.real.real_compute is not None:
            times = ", ".join(f"{k} {v:.1f} s" for k, v in handle.real.real_compute.seconds.items())
            nodes = [n.name for n in handle.real.real_compute.nodes.nodes]
            print(f"real nodes {', '.join(nodes)} Ready ({times})")
        print(f"cluster up in {time.monotonic() - t0:.1f} s; {where}")
        images = None
        # the other releases' images, for an upgrade of the sample: built now, in the background (the
        # all-real tier imported them all before it started)
        if real and not all_real:
            images = ReleaseImages.start(handle, [r for r in supported() if r != _sample_release()])
            if images.process is not None:
                print(
                    f"building the nova images of {', '.join(images.releases)} in the background "
                    f"(log: {images.process.log}); until they are served a pod of those releases waits in "
                    "ErrImagePull, and the Nova's condition names it"
                )
        return _follow(handle, operator, stop, t0, metrics, images)
    finally:
        print("stopping ...", flush=True)
        handle.stop()


def _launch_all_real(workdir: pathlib.Path | None, operator_image: str) -> SimHandle:
    releases = supported()
    print(
        "starting a cluster of real nodes with the real Nova (etcd, kube-apiserver, controller-manager, "
        f"scheduler; {', '.join(ALL_REAL_NODES)} real kubelets on containerd with kube-proxy and CoreDNS, "
        "no kubelet stand-in; MariaDB, RabbitMQ, memcached, Keystone, Placement, Glance on the host's "
        "loopback)"
    )
    print(f"  the nova images of {', '.join(releases)} imported into every node")
    print(f"  and the operator installed by its Helm chart (the chart's placement), from {operator_image}")
    return launch_all_real(
        workdir,
        control_nodes=CONTROL_NODES,
        compute_nodes=REAL_POOL_NODES,
        node_labels=dict.fromkeys(REAL_POOL_NODES, POOL_NODE_LABELS),
        releases=releases,
        namespaces=(NAMESPACE,),
    )


def _sample_release() -> str:
    return str(yaml.safe_load((SAMPLES / "nova_minimal.yaml").read_text())["spec"]["openStackRelease"])


def _service_password() -> str:
    for doc in yaml.safe_load_all((SAMPLES / "secrets.yaml").read_text()):
        if doc["metadata"]["name"] == "nova-service-user":
            return str(doc["stringData"]["password"])
    raise KeyError("nova-service-user")


def _start_chart(
    handle: SimHandle, image: OperatorImage, bridge_port: int | None, operator_args: Sequence[str]
) -> PodLogs:
    """The CRDs and the samples, then the operator by its chart (``realtier.operator_chart``): the
    image imported into the real nodes, the compute API bridged to them at ``bridge_port`` (the
    mixed tier; None in the all-real tier, where the operator's pods reach it by its name),
    ``helm install``."""
    assert handle.real is not None
    assert handle.real.real_compute is not None
    handle.apply(REPO / "config" / "crd")  # the chart holds the RBAC and the rest, not the CRDs
    _apply_real_samples(handle)
    t = time.monotonic()
    ref, archive = image
    import_image(handle.real.real_compute.nodes, ref, archive)
    imported = time.monotonic() - t
    nova_api_url = None
    if bridge_port is not None:
        namespace, name, port = NOVA_SERVICE
        bridge = ServiceBridge(handle.cluster.kube, namespace, name, port, handle.real.gateway, bridge_port)
        bridge.start()
        handle.teardown.insert(0, ("compute API bridge", bridge.stop))
        nova_api_url = bridge.url
    values = chart_values(ref, nova_api_url, operator_args)
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
        return handle.spawn(
            "operator", handle.real.in_cluster_dns(operator_argv(handle, metrics, *operator_args))
        )
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
    images: ReleaseImages | None = None,
) -> int:
    """Print every condition change of the samples until Ctrl-C; once both are Ready, how to look."""
    c = handle.cluster
    seen: dict[tuple[str, str], tuple[str, str, str]] = {}
    ready_at: float | None = None
    while not stop.wait(1.0):
        if not operator.alive:
            print(f"the operator exited; the tail of its log:\n{operator.output(4000)}", file=sys.stderr)
            return 1
        if images is not None and (line := images.poll()) is not None:
            print(f"  {time.monotonic() - t0:6.1f}s  {line}", flush=True)
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
    """Register the compute API in Keystone (at its Service's ClusterIP, which the host reaches) and
    write the clouds.yaml the openstack CLI reads."""
    assert handle.real is not None
    if handle.real.kubelet is None:  # the all-real tier: the host reaches no ClusterIP
        compute = register_compute(handle, NAMESPACE)
    else:
        svc = handle.cluster.kube.get(f"/api/v1/namespaces/{NAMESPACE}/services/nova")
        compute = f"http://{svc['spec']['clusterIP']}:8774/v2.1"
        handle.real.openstack.add_endpoint("compute", "nova", compute)
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
