"""The real-Nova tier: the simulated cluster with nodes whose pods really run, on real servers.

``launch_real(workdir)`` starts, in this order:

1. the simulated control plane (``launch``) without kwok (no fake nodes), so every pod lands on a node of
   the kubelet stand-in (``simcluster.realtier.kubelet``): ``control-0``/``control-1`` for the control
   plane, and the pool nodes (``compute-0``/``compute-1`` by default; ``/dev``, ``/sys/fs/cgroup``
   and ``/lib/modules`` are the host's, as a node's own would be) each with a real
   ``ovsdb-server`` whose ``Open_vSwitch`` row names the node (``external_ids:system-id``) at the
   hostPath the pool mounts (``/run/openvswitch/db.sock``), for its wait-for-chassis;
2. MariaDB, RabbitMQ and memcached (``services.backends.RealBackends``) on the pod bridge's gateway;
3. Keystone, Placement and Glance (``services.openstack.OpenStackServices``) and the network stand-in;
4. the stand-in operators acting on the real servers (``standins.StandIns(backend=...)``): a
   MariaDB or RabbitmqCluster object also gets the Service its operator would create, here without
   a selector and with an EndpointSlice naming the real server;
5. for each namespace in ``namespaces``: the Services the samples name, pointing at the real
   servers: ``keystone-api`` (5000), ``placement-api`` (8778), ``glance-api`` (9292),
   ``neutron-server`` (9696, the network stand-in) and ``memcached`` (11211). ``real.expose`` adds
   more (a brownfield database), ``real.alias`` names them outside the cluster domain.

Images: ``ghcr.io/c5c3/nova:<release>`` and ``ghcr.io/c5c3/nova-compute:<release>`` are the root
trees ``tools/realnova/images.py`` builds from the image contract (plus any ``image_aliases``).

Processes on the host that must resolve in-cluster names (the operator, as a pod would) get
``handle.run_in_cluster_dns(argv)``: their own mount namespace with ``/etc/hosts`` bound to a file
the stand-in keeps current with every Service's names; ClusterIPs are reachable from the host
(the stand-in DNATs the host's own connections too).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from realnode.access import KubeletAccess

from simcluster.client.kube import Kube
from simcluster.platform.launch import SimHandle, install_dependency_crds, launch, start_standins
from simcluster.realtier.container_logs import api_log, follow, standin_log
from simcluster.realtier.kubelet.runtime import Image
from simcluster.realtier.kubelet.thread import KubeletThread
from simcluster.realtier.node_access import NodeAccess
from simcluster.realtier.real_compute import RealCompute, start_real_compute
from simcluster.realtier.services.backends import RealBackends
from simcluster.realtier.services.openstack import OpenStackServices
from simcluster.realtier.services.ovsdb import OvsdbServer

REPO = pathlib.Path(__file__).resolve().parents[3]
IMAGE_BUILDER = REPO / "tools" / "realnova" / "images.py"
NOVA_IMAGE = "ghcr.io/c5c3/nova"
COMPUTE_IMAGE = "ghcr.io/c5c3/nova-compute"
IMAGE_PYTHON = "/usr/bin/python3.11"
# The pools' nova-compute driver here (no libvirt): the fake driver that keeps a stable node identity
# (``compute_id`` in ``state_path``, the node's /var/lib/nova), as libvirt does. ``fake.FakeDriver``
# names its node with a UUID new in every process and writes no ``compute_id``, so nova-compute can
# never start again once its service row exists ("No local node identity found, but this is not our
# first startup on this host"): every rollout of a pool (a rotated contract Secret) crash-loops it.
FAKE_COMPUTE_DRIVER = "fake.FakeDriverWithoutFakeNodes"
DEFAULT_RELEASES = ("2025.2", "2026.1", "2026.2")
SERVICE_USER = "nova"
MANAGED_BY = "simcluster.realtier"
JSON = dict[str, Any]


def nova_images(releases: Sequence[str], aliases: Mapping[str, str] | None = None) -> dict[str, Image]:
    """Image name -> root tree, built (or reused) by ``tools/realnova/images.py``.

    ``aliases`` maps further image names (e.g. a sample's registry and digest) to a release."""
    out = subprocess.run(
        [IMAGE_PYTHON, str(IMAGE_BUILDER), *releases], check=True, capture_output=True, text=True
    )
    dirs = [pathlib.Path(line) for line in out.stdout.split()]
    by_release: dict[str, Image] = {}
    for release, d in zip(releases, dirs, strict=True):
        env = json.loads((d / "env.json").read_text())
        by_release[release] = Image(d / "root", binds={"/usr": "/usr"}, env=env)
    images = {}
    for release, image in by_release.items():
        images[f"{NOVA_IMAGE}:{release}"] = image
        images[f"{COMPUTE_IMAGE}:{release}"] = image
    for name, release in (aliases or {}).items():
        images[name] = by_release[release]
    return images


def service_with_endpoints(namespace: str, name: str, port: int, address: str, target: int) -> list[JSON]:
    """A Service without a selector and the EndpointSlice that sends its port to ``address:target``."""
    labels = {"app.kubernetes.io/managed-by": MANAGED_BY}
    port_name = "main"
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"ports": [{"name": port_name, "port": port, "targetPort": target, "protocol": "TCP"}]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{name}-real",
                "namespace": namespace,
                "labels": {
                    **labels,
                    "kubernetes.io/service-name": name,
                    "endpointslice.kubernetes.io/managed-by": MANAGED_BY,
                },
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
            "ports": [{"name": port_name, "port": target, "protocol": "TCP"}],
        },
    ]


@dataclass
class RealTier:
    """What ``launch_real`` added to the simulated cluster; stopped by the handle."""

    workdir: pathlib.Path
    kubelet: KubeletThread | None  # None in the all-real tier (``simcluster.realtier.all_real``)
    backends: RealBackends
    openstack: OpenStackServices
    ovsdb: dict[str, OvsdbServer] = field(default_factory=dict)
    hosts_file: pathlib.Path | None = None
    control_nodes: list[str] = field(default_factory=list)
    compute_nodes: list[str] = field(default_factory=list)
    startup: dict[str, float] = field(default_factory=dict)  # seconds, by part
    kube: Kube | None = None
    # the compute nodes as real nodes (``real_compute_nodes``); in the all-real tier every node
    real_compute: RealCompute | None = None
    # the all-real tier's ways between the host and the nodes (relayed ports, published Services,
    # DNS aliases); None on the kubelet stand-in, whose pods and the host share a bridge
    nodes_access: NodeAccess | None = None

    @property
    def gateway(self) -> str:
        """Where pods reach the real servers (the pod bridge's gateway; the all-real tier's address
        in the nodes' namespace)."""
        return self.backends.reach or self.backends.address

    @property
    def host_address(self) -> str:
        """Where a server of the host (a test's own) listens for the pods to reach it at ``gateway``
        (``expose``): the gateway itself on the stand-in's bridge; the host's loopback in the
        all-real tier, whose relay leads ``gateway`` there."""
        return self.nodes_access.loopback if self.nodes_access is not None else self.gateway

    @property
    def server_ips(self) -> tuple[str, ...]:
        """The addresses a test's own server is reached at, for its certificate: the pods' (the
        gateway) and, in the all-real tier, the host's (``host_address``, where the test itself
        checks it)."""
        return tuple(dict.fromkeys((self.gateway, self.host_address)))

    def cluster_ip(self, namespace: str, service: str) -> str:
        assert self.kube is not None
        svc = self.kube.get(f"/api/v1/namespaces/{namespace}/services/{service}")
        return str(svc["spec"]["clusterIP"])

    def reach(self, namespace: str, service: str, port: int) -> tuple[str, int]:
        """The address and port at which the host (a test's own calls) reaches ``port`` of Service
        ``namespace/service``: its ClusterIP on the stand-in (whose rules DNAT the host's
        connections too); in the all-real tier a port of the host's loopback published to it."""
        return self.reach_ip(self.cluster_ip(namespace, service), port)

    def reach_ip(self, ip: str, port: int) -> tuple[str, int]:
        """As ``reach``, for an address of the cluster's networks (a ClusterIP, a pod's IP)."""
        if self.nodes_access is None:
            return ip, port
        return self.nodes_access.reach(ip, port)

    def container_log(self, pod: JSON, container: str) -> str:
        """Every run's log of ``container`` in ``pod`` (``realtier.container_logs``): the stand-in's
        files, or the real kubelet's through the API server."""
        if self.kubelet is not None:
            return standin_log(self.workdir / "kubelet", pod, container)
        assert self.kube is not None
        return api_log(self.kube, pod, container)

    def open_log(self, pod: JSON, container: str) -> IO[str]:
        """The current run's log of ``container`` in ``pod``, open for reading as it grows and to its
        end after the pod is gone: the stand-in's file, or a file the real kubelet's stream is
        followed into (``container_logs.follow``)."""
        if self.kubelet is not None:
            root = self.workdir / "kubelet" / "pods" / pod["metadata"]["uid"] / "containers" / container
            runs = sorted(root.glob("*.log"), key=lambda p: int(p.stem))
            if not runs:
                raise FileNotFoundError(f"no log of {container} under {root}")
            return open(runs[-1], errors="replace")
        assert self.kube is not None
        into = self.workdir / "followed-logs" / f"{pod['metadata']['uid']}-{container}.log"
        follow(self.kube, pod, container, into)
        return open(into, errors="replace")

    def in_cluster_dns(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run in a mount namespace of its own whose ``/etc/hosts`` names every Service."""
        assert self.hosts_file is not None
        script = 'mount --bind "$0" /etc/hosts && exec "$@"'
        return [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            str(self.hosts_file),
            *argv,
        ]

    def expose(self, namespace: str, name: str, port: int, target: int, address: str | None = None) -> None:
        """A Service ``namespace/name`` whose ``port`` leads to ``address:target`` on the host (default
        the bridge's gateway, where the real servers listen; in the all-real tier the nodes' address
        of the host's loopback, ``target`` relayed there: the server listens at ``host_address``)."""
        assert self.kube is not None
        if self.nodes_access is not None and address is None:
            self.nodes_access.relay(target)
        for doc in service_with_endpoints(namespace, name, port, address or self.gateway, target):
            self.kube.apply(doc, namespace)

    def alias(self, name: str, namespace: str, service: str) -> None:
        """Pods resolve ``name`` (outside the cluster domain) to Service ``namespace/service``: by
        the stand-in's hosts files, or the all-real tier's CoreDNS (to the Service's ClusterIP)."""
        if self.kubelet is not None:
            self.kubelet.alias(name, namespace, service)
        elif self.nodes_access is not None:
            self.nodes_access.alias(name, self.cluster_ip(namespace, service))
        else:
            raise RuntimeError("no way to alias a name: neither the stand-in nor the all-real tier's nodes")

    def stop_pods(self) -> None:
        if self.kubelet is not None:
            self.kubelet.stop()
        if self.real_compute is not None:
            self.real_compute.nodes.stop()

    def stop_servers(self) -> None:
        self.openstack.stop()
        self.backends.stop()
        for server in self.ovsdb.values():
            server.stop()


def launch_real(
    workdir: pathlib.Path | None = None,
    *,
    bindir: pathlib.Path | None = None,
    control_nodes: int = 2,
    compute_nodes: Sequence[str] = ("compute-0", "compute-1"),
    node_labels: Mapping[str, Mapping[str, str]] | None = None,
    releases: Sequence[str] = DEFAULT_RELEASES,
    image_aliases: Mapping[str, str] | None = None,
    namespaces: Sequence[str] = ("openstack",),
    audit: bool = False,
    real_compute_nodes: bool = False,
    real_node_releases: Sequence[str] | None = None,
    pod_access: bool = False,
    relay_ports: Sequence[int] = (),
) -> SimHandle:
    """Start the real-Nova tier (see the module's text); ``handle.real`` is its ``RealTier``.

    ``real_compute_nodes``: the mixed tier (``simcluster.realtier.real_compute``), the compute nodes
    real nodes with the nova image of ``real_node_releases`` (default: ``releases``) imported.
    ``pod_access`` (with ``real_compute_nodes``): what a pod that talks to the API server needs
    there, such as the operator installed by its chart: the control plane reaches the real kubelets
    (``realnode.access``: logs, exec, port-forward) and gives pods their ServiceAccount tokens.
    ``relay_ports``: more ports of the pod bridge's gateway the real nodes reach (beside the
    servers')."""
    if pod_access and not real_compute_nodes:
        raise ValueError("pod_access is for real compute nodes")
    t0 = time.monotonic()
    images = nova_images(releases, image_aliases)
    images_seconds = time.monotonic() - t0
    if workdir is None:
        workdir = pathlib.Path(tempfile.mkdtemp(prefix="simcluster-"))
    access = KubeletAccess(workdir / "access") if pod_access else None
    handle = launch(
        workdir,
        bindir=bindir,
        nodes=0,
        standins=False,
        openstack=False,
        audit=audit,
        kwok=False,
        extra_apiserver_args=access.prepare() if access is not None else (),
        service_account_admission=pod_access,
    )
    try:
        _add_real_tier(
            handle,
            images,
            control_nodes,
            list(compute_nodes),
            dict(node_labels or {}),
            list(namespaces),
            list(real_node_releases or releases) if real_compute_nodes else None,
            access,
            list(relay_ports),
        )
    except BaseException:
        handle.stop()
        raise
    assert handle.real is not None
    handle.real.startup["images"] = images_seconds
    handle.startup_seconds = time.monotonic() - t0
    return handle


def claim_pod_network() -> dict[str, str]:
    """The bridge, nftables table and pod range of this cluster: the first free of ``simkube0``
    (10.244.0.0/16, ``simkubelet``) and ``simkube1..15`` (10.225-239.0.0/16, ``simkubelet_N``), so two
    real tiers on one machine (``make run`` beside a test session) never share addresses or rules.
    The bridge is created here, which claims it (``ip link add`` fails for a name in use)."""
    for n in range(16):
        bridge = f"simkube{n}"
        made = subprocess.run(
            ["ip", "link", "add", bridge, "type", "bridge"], capture_output=True, check=False
        )
        if made.returncode == 0:
            if n == 0:
                return {"bridge": bridge, "table": "simkubelet", "cidr": "10.244.0.0/16"}
            return {"bridge": bridge, "table": f"simkubelet_{n}", "cidr": f"10.{224 + n}.0.0/16"}
    raise RuntimeError("no free pod bridge (simkube0..15 all exist): stop the other simulated clusters")


def release_pod_network(bridge: str) -> None:
    subprocess.run(["ip", "link", "del", bridge], capture_output=True, check=False)


def _add_real_tier(
    handle: SimHandle,
    images: dict[str, Image],
    control_nodes: int,
    compute_nodes: list[str],
    node_labels: dict[str, Mapping[str, str]],
    namespaces: list[str],
    real_node_releases: list[str] | None = None,
    access: KubeletAccess | None = None,
    relay_ports: list[int] | None = None,
) -> None:
    cp = handle.cluster.control_plane
    install_dependency_crds(handle.cluster.kube)
    root = handle.workdir / "real"
    root.mkdir(exist_ok=True)
    controls = [f"control-{i}" for i in range(control_nodes)]
    t = time.monotonic()
    network = claim_pod_network()
    (root / "network.json").write_text(json.dumps(network) + "\n")  # what this cluster owns on the host
    standin_nodes = controls if real_node_releases is not None else [*controls, *compute_nodes]
    kubelet = KubeletThread(
        cp.server,
        cp.admin_token,
        cp.ca_file,
        standin_nodes,
        images,
        root / "kubelet",
        network=network,
    )
    handle.teardown.append(("kubelet stand-in", kubelet.stop))
    handle.teardown.append(("pod bridge", lambda: release_pod_network(network["bridge"])))
    kubelet.start()
    assert kubelet.kubelet is not None
    assert kubelet.kubelet.network is not None
    gateway = kubelet.kubelet.network.gateway
    startup = {"kubelet": time.monotonic() - t}

    t = time.monotonic()
    backends = RealBackends(root / "backends", address=gateway)
    handle.teardown.append(("backing servers", backends.stop))
    backends.start()
    startup["backing servers"] = time.monotonic() - t
    t = time.monotonic()
    openstack = OpenStackServices(
        root / "openstack", backends.mariadb, f"{gateway}:{backends.memcached.port}", address=gateway
    )
    handle.teardown.insert(-1, ("keystone, placement, glance", openstack.stop))
    openstack.start(service_users=())
    startup["keystone, placement, glance"] = time.monotonic() - t

    real = RealTier(
        root,
        kubelet,
        backends,
        openstack,
        control_nodes=controls,
        compute_nodes=compute_nodes,
        kube=handle.cluster.kube,
    )
    real.startup.update(startup)
    handle.real = real
    if real_node_releases is not None:
        assert openstack.network is not None
        ports = [
            backends.mariadb.port,
            backends.rabbitmq.port,
            backends.memcached.port,
            openstack.keystone_port,
            openstack.placement_port,
            openstack.glance_port,
            openstack.network.port,
            *(relay_ports or ()),
        ]
        names = {r: [f"{COMPUTE_IMAGE}:{r}", f"{NOVA_IMAGE}:{r}"] for r in real_node_releases}
        real.real_compute = start_real_compute(
            handle.cluster, root / "realnodes", compute_nodes, node_labels, gateway, ports, names, access
        )
        handle.teardown.insert(0, ("real compute nodes", real.real_compute.nodes.stop))
        real.startup.update({f"real nodes: {k}": v for k, v in real.real_compute.seconds.items()})
    t = time.monotonic()
    for node in compute_nodes:
        if real.real_compute is not None:
            sock = real.real_compute.socket(node)
        else:
            node_root = root / "kubelet" / "hostpath" / node
            _provision_compute_node(node_root)
            sock = node_root / "run" / "openvswitch" / "db.sock"
        real.ovsdb[node] = OvsdbServer(root / "ovsdb" / node, sock, system_id=node).start()

    def stop_ovsdb() -> None:
        for server in real.ovsdb.values():
            server.stop()

    handle.teardown.append(("ovsdb-server", stop_ovsdb))
    startup["ovsdb-server"] = time.monotonic() - t

    kube = handle.cluster.kube
    for node, labels in node_labels.items():
        kube.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": dict(labels)}})
    assert openstack.network is not None
    for ns in namespaces:
        for name, port, target in (
            ("keystone-api", 5000, openstack.keystone_port),
            ("placement-api", 8778, openstack.placement_port),
            ("glance-api", 9292, openstack.glance_port),
            ("neutron-server", 9696, openstack.network.port),
            ("memcached", 11211, backends.memcached.port),
        ):
            real.expose(ns, name, port, target)

    real.hosts_file = root / "hosts"
    real.hosts_file.write_text("127.0.0.1\tlocalhost\n")
    kubelet.attach_hosts("host", "default", real.hosts_file)
    start_standins(handle, backend=backends)


# What a compute node has and the pool mounts by hostPath without a type (no check, no creation):
# the node's own, which on this machine is the host's.
NODE_PATHS = ("dev", "sys/fs/cgroup", "lib/modules")


def _provision_compute_node(node_root: pathlib.Path) -> None:
    for rel in NODE_PATHS:
        link = node_root / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            continue
        if pathlib.Path(f"/{rel}").is_dir():
            link.symlink_to(f"/{rel}")
        else:  # this machine has none (no kernel modules in a container): an empty one, as a node's
            link.mkdir(parents=True)


def clouds_yaml(handle: SimHandle, path: pathlib.Path, service_password: str | None = None) -> pathlib.Path:
    """A ``clouds.yaml`` for the ``openstack`` CLI: cloud ``simcluster`` (admin) and, with the service
    user's password, ``simcluster-nova`` (the service user)."""
    assert handle.real is not None
    osv = handle.real.openstack
    clouds: JSON = {
        "simcluster": {
            "auth": {
                "auth_url": osv.keystone_url,
                "username": "admin",
                "password": osv.admin_password,
                "project_name": "admin",
                "user_domain_name": "Default",
                "project_domain_name": "Default",
            },
            "region_name": "RegionOne",
            "identity_api_version": 3,
        }
    }
    if service_password is not None:
        clouds["simcluster-nova"] = {
            **clouds["simcluster"],
            "auth": {
                **clouds["simcluster"]["auth"],
                "username": SERVICE_USER,
                "password": service_password,
                "project_name": "service",
            },
        }
    path.write_text(json.dumps({"clouds": clouds}, indent=2) + "\n")
    os.chmod(path, 0o600)
    return path
