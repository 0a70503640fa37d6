"""The real-Nova tier's cluster: every node a real kubelet on containerd, on real servers.

``launch_all_real(workdir)`` starts, in this order:

1. the simulated control plane (``launch``) without kwok or stand-in nodes, with what pods that talk
   to the API server need (``realnode.access``: logs, exec and port-forward reach the kubelets; pods
   get their ServiceAccount tokens);
2. the nodes, one ``realnode.RealNodes`` in one network namespace with kube-proxy and CoreDNS:
   ``control-0`` and ``control-1`` untainted (the Nova's control plane, the operator, CoreDNS land
   there) and the pool's compute nodes labelled as the pool selects and tainted ``DEDICATED``, which
   the pool sample tolerates (only the pool runs there), each with its ``ovsdb-server`` at its own
   ``/run/openvswitch/db.sock``;
3. MariaDB, RabbitMQ, memcached, Keystone, Placement, Glance and the network stand-in on the host's
   loopback (``LOOPBACK``, free ports): nothing of the cluster on the host's links, nftables or
   sysctls. ``RealNodes.relay`` gives the nodes' namespace ``SERVERS_IP`` on its ``lo`` and leads
   its connections there to the host's loopback, so the nodes and their pods reach the servers at
   ``SERVERS_IP``;
4. every given release's nova image in every node from its start (``real_compute.nova_store``: one
   containerd store made once per set of images and cached, hard-linked into each node; its seconds
   are ``startup["image store"]``): an upgrade of the sample to another release finds its image;
5. the stand-in operators on the real servers (their MariaDB and RabbitMQ Services name
   ``SERVERS_IP``: ``RealBackends.reach``) and, for each namespace, the Services the samples name
   (``SERVICES``) leading to ``SERVERS_IP``.

Keystone's catalog lists the host's loopback URLs as ``public`` (the user's shell, the printed
``clouds.yaml``) and the in-cluster Service names as ``internal`` and ``admin`` (``internal_urls``:
nova asks for ``valid_interfaces = internal``). ``register_compute`` adds the compute API once the
Nova's ``nova`` Service exists: ``internal`` by its name, ``public`` at a port of the host's loopback
that ``RealNodes.publish`` leads to its ClusterIP inside the nodes' namespace.

The handle's ``real`` is a ``RealTier`` (``realtier.tier``) whose ``real_compute`` holds every
node, and whose ``nodes_access`` (``realtier.node_access``) gives the tests a Service leading to a
server of theirs on the host's loopback (``expose``), a DNS alias of a Service (``alias``), a
Service reached from the host (``reach``). A process of the host that must resolve and reach the
cluster as a pod does (the operator run locally) runs through ``RealTier.in_cluster``: in the
nodes' network namespace with the cluster's DNS.
"""

from __future__ import annotations

import pathlib
import tempfile
import time
from collections.abc import Mapping, Sequence

from realnode.access import KubeletAccess
from realnode.nodes import RealNodes

from simcluster.platform.controlplane import free_port
from simcluster.platform.launch import SimHandle, install_dependency_crds, launch, start_standins
from simcluster.realtier.node_access import NodeAccess
from simcluster.realtier.real_compute import DEDICATED, OVERLAYS, RealCompute, nova_store
from simcluster.realtier.services.backends import RealBackends
from simcluster.realtier.services.openstack import OpenStackServices
from simcluster.realtier.services.ovsdb import OvsdbServer
from simcluster.realtier.tier import COMPUTE_IMAGE, DEFAULT_RELEASES, NOVA_IMAGE, RealTier

LOOPBACK = "127.0.0.1"  # where the real servers listen on the host
# Where the nodes and their pods reach them: on the nodes' namespace's ``lo``, outside its node
# (10.87.0.0/24), pod (10.88.0.0/16) and Service (10.96.0.0/16) ranges.
SERVERS_IP = "10.86.0.1"
CONTROL_NODES = ("control-0", "control-1")
COMPUTE_API = ("nova", 8774, "/v2.1")  # the Nova's Service, its port and the API's path
# The Services the samples name: (catalog service type or None, Service name, Service port).
SERVICES: tuple[tuple[str | None, str, int], ...] = (
    ("identity", "keystone-api", 5000),
    ("placement", "placement-api", 8778),
    ("image", "glance-api", 9292),
    ("network", "neutron-server", 9696),
    (None, "memcached", 11211),
)
PATHS = {"identity": "/v3"}  # what a catalog URL adds to the Service's address


def internal_urls(namespace: str) -> dict[str, str]:
    """The catalog's ``internal`` URL by service type: the Service's in-cluster name in ``namespace``."""
    return {
        kind: f"http://{name}.{namespace}.svc:{port}{PATHS.get(kind, '')}"
        for kind, name, port in SERVICES
        if kind is not None
    }


def compute_urls(namespace: str, published_port: int) -> tuple[str, str]:
    """The compute API's catalog URLs: public (the host's loopback port published to the Service)
    and internal (the Service's name)."""
    name, port, path = COMPUTE_API
    return f"http://{LOOPBACK}:{published_port}{path}", f"http://{name}.{namespace}.svc:{port}{path}"


def image_names(releases: Sequence[str], aliases: Mapping[str, str] | None = None) -> dict[str, list[str]]:
    """Release -> the names the samples give its nova image (the Nova's and the pool's), then the
    ``aliases`` naming that release (image name -> release: a sample's registry and digest)."""
    names = {r: [f"{COMPUTE_IMAGE}:{r}", f"{NOVA_IMAGE}:{r}"] for r in releases}
    for name, release in (aliases or {}).items():
        names[release].append(name)
    return names


def launch_all_real(
    workdir: pathlib.Path | None = None,
    *,
    bindir: pathlib.Path | None = None,
    control_nodes: Sequence[str] = CONTROL_NODES,
    compute_nodes: Sequence[str] = ("compute-0", "compute-1"),
    node_labels: Mapping[str, Mapping[str, str]] | None = None,
    releases: Sequence[str] = DEFAULT_RELEASES,
    image_aliases: Mapping[str, str] | None = None,
    namespaces: Sequence[str] = ("openstack",),
    audit: bool = False,
) -> SimHandle:
    """Start the real-Nova tier's cluster (see the module's text); ``handle.real`` is its ``RealTier``.

    ``node_labels``: labels by node name (the pool's selector on the compute nodes); ``releases``:
    the nova images imported into every node (``image_aliases``: more names, each of a release's
    image); ``namespaces``: where the samples' Services are made
    (the first one's names are the catalog's internal URLs)."""
    t0 = time.monotonic()
    if workdir is None:
        workdir = pathlib.Path(tempfile.mkdtemp(prefix="simcluster-"))
    access = KubeletAccess(workdir / "access")
    handle = launch(
        workdir,
        bindir=bindir,
        nodes=0,
        standins=False,
        openstack=False,
        audit=audit,
        kwok=False,
        extra_apiserver_args=access.prepare(),
        service_account_admission=True,
    )
    try:
        _add_nodes_and_servers(
            handle,
            access,
            list(control_nodes),
            list(compute_nodes),
            dict(node_labels or {}),
            image_names(releases, image_aliases),
            list(namespaces),
        )
    except BaseException:
        handle.stop()
        raise
    handle.startup_seconds = time.monotonic() - t0
    return handle


def _add_nodes_and_servers(
    handle: SimHandle,
    access: KubeletAccess,
    controls: list[str],
    computes: list[str],
    node_labels: dict[str, Mapping[str, str]],
    images: dict[str, list[str]],
    namespaces: list[str],
) -> None:
    kube = handle.cluster.kube
    install_dependency_crds(kube)
    root = handle.workdir / "real"
    root.mkdir(exist_ok=True)
    startup: dict[str, float] = {}

    t = time.monotonic()
    held = nova_store(images)
    startup["image store"] = time.monotonic() - t
    nodes = RealNodes(
        handle.cluster,
        root / "realnodes",
        names=[*controls, *computes],
        node_taints=dict.fromkeys(computes, (DEDICATED,)),
        overlays=OVERLAYS,
        access=access,
        store=held,
    )
    handle.teardown.append(("real nodes", nodes.stop))
    # Not beside the servers' start: a process's parent-death signal follows the thread that spawned
    # it, so nodes started in a worker thread would be killed when that thread ends.
    t = time.monotonic()
    nodes.start()
    startup["nodes"] = time.monotonic() - t
    for node, labels in node_labels.items():
        kube.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": dict(labels)}})

    t = time.monotonic()
    backends = RealBackends(root / "backends", address=LOOPBACK, reach=SERVERS_IP)
    handle.teardown.append(("backing servers", backends.stop))
    backends.start()
    startup["backing servers"] = time.monotonic() - t
    t = time.monotonic()
    openstack = OpenStackServices(
        root / "openstack",
        backends.mariadb,
        f"{LOOPBACK}:{backends.memcached.port}",
        address=LOOPBACK,
        internal_urls=internal_urls(namespaces[0]),
    )
    handle.teardown.insert(-1, ("keystone, placement, glance", openstack.stop))
    openstack.start(service_users=())
    startup["keystone, placement, glance"] = time.monotonic() - t

    assert openstack.network is not None
    t = time.monotonic()
    ports = {  # by the name of the Service that leads there (MariaDB's and RabbitMQ's: the stand-ins')
        "mariadb": backends.mariadb.port,
        "rabbitmq": backends.rabbitmq.port,
        "memcached": backends.memcached.port,
        "keystone-api": openstack.keystone_port,
        "placement-api": openstack.placement_port,
        "glance-api": openstack.glance_port,
        "neutron-server": openstack.network.port,
    }
    nodes.relay(SERVERS_IP, list(ports.values()), upstream=LOOPBACK)
    startup["relay"] = time.monotonic() - t

    every = RealCompute(nodes, {k: round(v, 1) for k, v in startup.items()})
    real = RealTier(
        root,
        backends,
        openstack,
        kube,
        every,
        NodeAccess(nodes, kube, SERVERS_IP, LOOPBACK, set(ports.values())),
        control_nodes=controls,
        compute_nodes=computes,
    )
    handle.real = real
    t = time.monotonic()
    for node in computes:
        sock = every.socket(node)
        real.ovsdb[node] = OvsdbServer(root / "ovsdb" / node, sock, system_id=node).start()

    def stop_ovsdb() -> None:
        for server in real.ovsdb.values():
            server.stop()

    handle.teardown.append(("ovsdb-server", stop_ovsdb))
    startup["ovsdb-server"] = time.monotonic() - t
    for ns in namespaces:
        for _, name, port in SERVICES:
            real.expose(ns, name, port, ports[name])
    start_standins(handle, backend=backends)
    real.startup.update(startup)


def register_compute(handle: SimHandle, namespace: str = "openstack") -> str:
    """The compute API of the Nova in ``namespace`` in Keystone's catalog (see the module's text),
    once its Service exists; its public URL."""
    real: RealTier = handle.real
    name, port, _ = COMPUTE_API
    svc = handle.cluster.kube.get(f"/api/v1/namespaces/{namespace}/services/{name}")
    published = free_port()
    real.real_compute.nodes.publish(published, str(svc["spec"]["clusterIP"]), port, LOOPBACK)
    public, internal = compute_urls(namespace, published)
    real.openstack.add_endpoint("compute", name, public, internal=internal)
    return public
