"""The mixed real tier (issue 37): the sample pool's compute node is a real node (a kubelet on
containerd running the nova image built from the image contract), the control nodes stay the kubelet
stand-in's, on one control plane.

The minimal Nova (on the stand-in) and the NovaCompute sample (on the real node) turn Ready; the pool's
pod runs on the real kubelet and its nova-compute, reaching RabbitMQ, Keystone and Placement by their
Services' names through CoreDNS and kube-proxy, registers a service that is up; its memory is read
from the node's own cgroup. The teardown leaves nothing of the real nodes.

Long (``make test-realnova``): the real nodes and the image's unpack add minutes to the tier's bring-up.
"""

from __future__ import annotations

import base64
import configparser
import ipaddress
import pathlib
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
from realnode import dns
from realnode.dns import CLUSTER_DOMAIN, REAL_NODE_LABEL
from simcluster import SimHandle
from simcluster.platform.controlplane import REPO, free_port
from simcluster.platform.operator import operator_argv
from simcluster.realtier.launch import COMPUTE_IMAGE, launch_real
from simcluster.realtier.real_compute import RealCompute

from tests.realnova.realcluster import (
    NAMESPACE,
    NOVA,
    POOL,
    POOL_LABELS,
    RELEASE_UNDER_TEST,
    SAMPLES,
    OpenStackClient,
    compute_url,
    is_ready,
    not_ready_summary,
    pods,
    sample_secret,
    tier_nova,
    tier_pool,
    wait_for,
)

pytestmark = [pytest.mark.realnova, pytest.mark.long]

NODE = "compute-0"
JSON = dict[str, Any]
POOL_SELECTOR = f"app.kubernetes.io/instance={POOL},app.kubernetes.io/component=nova-compute"


def _pod_summary(handle: SimHandle) -> str:
    out = []
    for pod in pods(handle, selector=POOL_SELECTOR):
        statuses = (pod.get("status") or {}).get("initContainerStatuses", []) + (
            (pod.get("status") or {}).get("containerStatuses", [])
        )
        states = {s["name"]: s.get("state") for s in statuses}
        out.append(f"{pod['metadata']['name']} on {pod['spec'].get('nodeName')}: {states}")
    return "; ".join(out)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    workdir = pathlib.Path(tmp_path_factory.mktemp("mixed"))
    control = {"node-role.kubernetes.io/control-plane": ""}
    handle = launch_real(
        workdir,
        releases=(RELEASE_UNDER_TEST,),
        compute_nodes=(NODE,),
        node_labels={
            "control-0": {**control, "topology.kubernetes.io/zone": "az1"},
            "control-1": {**control, "topology.kubernetes.io/zone": "az2"},
            NODE: POOL_LABELS,
        },
        real_compute_nodes=True,
    )
    assert handle.real is not None
    real = handle.real.real_compute
    assert real is not None
    try:
        handle.install()
        handle.create_gateway(NAMESPACE, "public-gateway")
        handle.real.openstack.add_service_user("nova", sample_secret("nova-service-user", "password"))
        # no registry here: the pool's tag-named image is the one imported into the node
        argv = operator_argv(handle, free_port(), "--default-image-pull-policy", "IfNotPresent")
        handle.spawn("operator", handle.real.in_cluster_dns(argv))
        handle.apply(
            SAMPLES / "secrets.yaml",
            REPO / "tools" / "simcluster" / "samples" / "dependencies.yaml",
            tier_nova(workdir),
            tier_pool(workdir),
            namespace=NAMESPACE,
        )
        t0 = time.monotonic()
        wait_for(
            lambda: is_ready(handle, "novas", NOVA) or None,
            within=400,
            what="the minimal Nova Ready",
            handle=handle,
            detail=lambda: not_ready_summary(handle, "novas", NOVA),
        )
        handle.real.startup["samples: Nova Ready"] = round(time.monotonic() - t0, 1)
        wait_for(
            lambda: is_ready(handle, "novacomputes", POOL) or None,
            within=400,
            what="the sample pool Ready on the real node",
            handle=handle,
            detail=lambda: (
                f"{not_ready_summary(handle, 'novacomputes', POOL)}; {_pod_summary(handle)}\n"
                + real.nodes.logs(3000)
            ),
        )
        handle.real.startup["samples: pool Ready"] = round(time.monotonic() - t0, 1)
        yield handle
    finally:
        handle.stop()
    assert real.nodes.leftovers() == []


def _real(handle: SimHandle) -> RealCompute:
    assert handle.real is not None
    assert handle.real.real_compute is not None
    return handle.real.real_compute


def test_the_pool_pod_runs_on_the_real_node_with_the_contract_image(mixed: SimHandle) -> None:
    node = mixed.cluster.kube.get(f"/api/v1/nodes/{NODE}")
    assert node["metadata"]["labels"][REAL_NODE_LABEL] == "true"
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
    (pod,) = pods(mixed, selector=POOL_SELECTOR)
    assert pod["spec"]["nodeName"] == NODE
    (status,) = pod["status"]["containerStatuses"]
    assert status["ready"] is True
    assert status["image"] == f"{COMPUTE_IMAGE}:{RELEASE_UNDER_TEST}"
    assert status["containerID"].startswith("containerd://")
    # the control plane stayed on the stand-in's nodes
    for other in pods(mixed):
        if other["metadata"]["labels"].get("app.kubernetes.io/component") != "nova-compute":
            name = other["metadata"]["name"]
            assert other["spec"].get("nodeName") in ("control-0", "control-1", None), name


def _cluster_name(host: str) -> str:
    """``host`` as a pod's resolver completes it (search ``<ns>.svc.cluster.local svc.cluster.local``)."""
    dots = host.count(".")
    if host.endswith(".svc"):
        return f"{host}.{CLUSTER_DOMAIN}"
    if dots == 0:
        return f"{host}.{NAMESPACE}.svc.{CLUSTER_DOMAIN}"
    if dots == 1:
        return f"{host}.svc.{CLUSTER_DOMAIN}"
    return host


def test_the_pools_broker_and_keystone_are_service_names_reached_from_the_real_node(mixed: SimHandle) -> None:
    """The contract's RabbitMQ and Keystone hosts are Service names; from the nodes' namespace (where
    the pool's hostNetwork pod runs) they resolve by cluster DNS to the Services' ClusterIPs, and
    kube-proxy and the relay lead a connection to the real servers on the host."""
    real = _real(mixed)
    (pod,) = pods(mixed, selector=POOL_SELECTOR)
    (compute,) = pod["spec"]["containers"]
    env = {e["name"]: e for e in compute["env"]}
    secret_name = env["OS_DEFAULT__TRANSPORT_URL"]["valueFrom"]["secretKeyRef"]["name"]
    data = mixed.cluster.kube.get(f"/api/v1/namespaces/{NAMESPACE}/secrets/{secret_name}")["data"]
    conf = configparser.ConfigParser(interpolation=None)
    conf.read_string(base64.b64decode(data["nova-compute.conf"]).decode())
    targets = {
        "rabbitmq": urllib.parse.urlsplit(base64.b64decode(data["transport_url"]).decode().split(",")[0]),
        "keystone": urllib.parse.urlsplit(conf["keystone_authtoken"]["auth_url"]),
    }
    assert real.nodes.netns_holder is not None
    netns = f"/proc/{real.nodes.netns_holder.pid}/ns/net"
    for what, url in targets.items():
        host, port = url.hostname or "", url.port or {"rabbit": 5672, "http": 80}[url.scheme]
        with pytest.raises(ValueError, match="does not appear to be an IPv4 or IPv6 address"):
            ipaddress.ip_address(host)  # a name, not an address
        rcode, addresses = dns.query(netns, _cluster_name(host))
        assert rcode == 0, (what, host)
        assert len(addresses) == 1, (what, host, addresses)
        service = host.split(".")[0]
        namespace = host.split(".")[1] if "." in host else NAMESPACE
        svc = mixed.cluster.kube.get(f"/api/v1/namespaces/{namespace}/services/{service}")
        assert addresses == [svc["spec"]["clusterIP"]], what
        probe = f"import socket; socket.create_connection(({addresses[0]!r}, {port}), 10).close()"
        done = subprocess.run(
            real.nodes.in_netns([sys.executable, "-c", probe]), capture_output=True, text=True
        )
        assert done.returncode == 0, (what, done.stderr[-500:])


def test_nova_compute_on_the_real_node_registers_a_service_that_is_up(mixed: SimHandle) -> None:
    client = OpenStackClient(mixed, compute_url(mixed, NOVA))

    def up() -> JSON | None:
        rows = [s for s in client.services() if s["binary"] == "nova-compute" and s["host"] == NODE]
        return rows[0] if rows and rows[0]["state"] == "up" else None

    row = wait_for(up, within=120, what=f"nova-compute on {NODE} up", handle=mixed)
    assert row["status"] == "enabled"
    hypervisors = client.call("GET", "/os-hypervisors/detail")["hypervisors"]
    assert NODE in {h["service"]["host"] for h in hypervisors}


def test_the_pool_pods_memory_in_the_nodes_cgroup_stays_under_its_limit(mixed: SimHandle) -> None:
    real = _real(mixed)
    (pod,) = pods(mixed, selector=POOL_SELECTOR)
    (node,) = [n for n in real.nodes.nodes if n.name == NODE]
    memory = pathlib.Path("/sys/fs/cgroup/memory") / node.cgroup_root / "kubepods"
    (cgroup,) = list(memory.glob(f"**/pod{pod['metadata']['uid']}"))
    stat = dict(line.split() for line in (cgroup / "memory.stat").read_text().splitlines())
    rss = int(stat["total_rss"])
    limit = int((cgroup / "memory.limit_in_bytes").read_text())
    print(f"pool pod {pod['metadata']['name']}: RSS {rss / 2**20:.0f} MiB, limit {limit / 2**20:.0f} MiB")
    print(f"startup seconds: {mixed.real.startup if mixed.real else {}}")
    assert 0 < rss < limit
    assert limit == 768 * 2**20  # the pool's default (request = limit), enforced by the real node
