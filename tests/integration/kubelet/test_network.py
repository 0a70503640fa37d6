"""The kubelet stand-in's pod network: an IP per pod, a Service by ClusterIP and by name, cleanup."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import pathlib
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from simcluster.client.asynckube import AsyncKube
from simcluster.realtier.kubelet import Image, Kubelet
from simcluster.realtier.kubelet.network import PodNetwork
from simcluster.realtier.launch import claim_pod_network, release_pod_network

from .conftest import IMAGE, condition, container, create_pod, wait_pod

pytestmark = pytest.mark.integration
JSON = dict[str, Any]
SERVER = """
import http.server as h, socket, socketserver as s
class Hello(h.BaseHTTPRequestHandler):
    def do_GET(self):
        body = socket.gethostname().encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
h.HTTPServer.server_bind = s.TCPServer.server_bind
h.HTTPServer(("", 8080), Hello).serve_forever()
"""
CLIENT = """
import collections, sys, urllib.request
def get(url):
    return urllib.request.urlopen(url, timeout=5).read().decode()
seen = collections.Counter(get("http://web:80/") for _ in range(30))
full = get("http://web.%s.svc.cluster.local/" % sys.argv[1])
with open("/dev/termination-log", "w") as fh:
    fh.write(" ".join(sorted(seen)) + "|" + full)
"""


def links() -> list[str]:
    """The names of the host's links (``ip -o link`` prints ``N: name@peer: ...``)."""
    return [ln.split(": ")[1].split("@")[0] for ln in os.popen("ip -o link show").read().splitlines()]


def bridge_ports(bridge: str) -> int:
    return sum(f" master {bridge} " in ln for ln in os.popen("ip -o link show").read().splitlines())


def nft_tables() -> list[str]:
    """The names of the host's nftables tables (``table <family> <name>``)."""
    return [ln.split()[-1] for ln in os.popen("nft list tables").read().splitlines() if ln.strip()]


@contextlib.contextmanager
def own_pod_network() -> Iterator[dict[str, str]]:
    """A pod network of this run's own, as a real tier claims one: the first free of simkube0..15 with
    its range (another real tier on the machine may hold simkube0 and 10.244.0.0/16)."""
    network = claim_pod_network()
    try:
        yield network
    finally:
        release_pod_network(network["bridge"])


def net_namespaces() -> set[str]:
    out = set()
    for p in os.listdir("/proc"):
        if p.isdigit():
            with contextlib.suppress(OSError):
                out.add(os.readlink(f"/proc/{p}/ns/net"))
    return out


def host_mounts() -> str:
    return pathlib.Path("/proc/self/mountinfo").read_text()


@pytest.fixture
async def netkubelet(kube: AsyncKube, image: Image, tmp_path: pathlib.Path) -> AsyncIterator[Kubelet]:
    tag = uuid.uuid4().hex[:6]
    with own_pod_network() as claimed:
        network = PodNetwork(kube, **claimed)
        k = Kubelet(kube, [f"standin-net-{tag}"], {IMAGE: image}, tmp_path / "kubelet", network=network)
        await k.start()
        try:
            yield k
        finally:
            await k.stop()
            await k.remove_node(k.nodes[0])


async def test_replicas_share_a_port_behind_a_service_reached_by_name(
    kube: AsyncKube, netkubelet: Kubelet, namespace: str
) -> None:
    network: PodNetwork = netkubelet.network
    node = netkubelet.nodes[0]
    readiness = {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1}
    for name in ("web-a", "web-b"):
        spec = {
            "containers": [
                {
                    "name": "web",
                    "image": IMAGE,
                    "command": ["python3", "-c", SERVER],
                    "ports": [{"containerPort": 8080}],
                    "readinessProbe": readiness,
                }
            ]
        }
        await create_pod(kube, namespace, node, name, spec, labels={"app": "web"})
    pods = [
        await wait_pod(kube, namespace, n, lambda p: condition(p, "Ready") == "True")
        for n in ("web-a", "web-b")
    ]
    ips = [p["status"]["podIP"] for p in pods]
    assert len(set(ips)) == 2
    assert all(ipaddress.ip_address(ip) in network.net for ip in ips), (ips, network.net)
    assert all(p["status"]["hostIP"] == network.gateway for p in pods)
    base = f"/api/v1/namespaces/{namespace}"
    svc = await kube.create(
        f"{base}/services",
        {
            "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
        },
    )
    # the integration tier has no controller-manager: the test writes the EndpointSlice
    await kube.create(
        f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices",
        {
            "metadata": {"name": "web-1", "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}} for ip in ips],
        },
    )
    for _ in range(50):
        if svc["spec"]["clusterIP"] in network._applied:
            break
        await asyncio.sleep(0.1)
    spec = {
        "restartPolicy": "Never",
        "containers": [{"name": "client", "image": IMAGE, "command": ["python3", "-c", CLIENT, namespace]}],
    }
    await create_pod(kube, namespace, node, "client", spec)
    pod = await wait_pod(
        kube, namespace, "client", lambda p: p["status"].get("phase") in ("Succeeded", "Failed")
    )
    term = container(pod, "client")["state"]["terminated"]
    assert pod["status"]["phase"] == "Succeeded", term
    seen, full = term["message"].split("|")
    assert seen.split() == ["web-a", "web-b"]  # both replicas answered on the one ClusterIP
    assert full in ("web-a", "web-b")


async def test_stopping_the_stand_in_removes_namespaces_veths_bridge_and_rules(
    kube: AsyncKube, image: Image, tmp_path: pathlib.Path, namespace: str
) -> None:
    tag = uuid.uuid4().hex[:6]
    with own_pod_network() as claimed:
        bridge, table = claimed["bridge"], claimed["table"]
        network = PodNetwork(kube, **claimed)
        k = Kubelet(kube, [f"standin-leak-{tag}"], {IMAGE: image}, tmp_path / "kubelet", network=network)
        before_netns = net_namespaces()
        await k.start()
        try:
            spec = {"containers": [{"name": "c", "image": IMAGE, "command": ["sleep", "300"]}]}
            await create_pod(kube, namespace, k.nodes[0], "a", spec)
            await create_pod(kube, namespace, k.nodes[0], "b", spec)
            for name in ("a", "b"):
                await wait_pod(kube, namespace, name, lambda p: condition(p, "Ready") == "True")
            assert bridge in links()
            assert bridge_ports(bridge) == 2
            assert table in nft_tables()
        finally:
            await k.stop()
            await k.remove_node(k.nodes[0])
        assert bridge not in links()
        assert table not in nft_tables()
    after_netns = net_namespaces()
    assert after_netns <= before_netns
    assert str(tmp_path / "kubelet") not in host_mounts()


async def test_a_service_created_later_reaches_the_hosts_file_of_running_pods(
    kube: AsyncKube, netkubelet: Kubelet, namespace: str
) -> None:
    node = netkubelet.nodes[0]
    uids = {}
    for name, host_network in (("pod-net", False), ("host-net", True)):
        spec = {
            "hostNetwork": host_network,
            "containers": [{"name": "c", "image": IMAGE, "command": ["sleep", "3600"]}],
        }
        uids[name] = (await create_pod(kube, namespace, node, name, spec))["metadata"]["uid"]
        await wait_pod(kube, namespace, name, lambda p: condition(p, "Ready") == "True")
    svc = await kube.create(
        f"/api/v1/namespaces/{namespace}/services",
        {
            "metadata": {"name": "late"},
            "spec": {"ports": [{"port": 80}]},
        },
    )
    names = f"late.{namespace}.svc.cluster.local late.{namespace}.svc late.{namespace} late"
    want = f"{svc['spec']['clusterIP']}\t{names}"
    for name, uid in uids.items():
        proc = netkubelet.workers[uid].procs["c"]
        hosts = ""
        for _ in range(50):
            _, hosts = await proc.exec(["cat", "/etc/hosts"], 5)
            if want in hosts.splitlines():
                break
            await asyncio.sleep(0.1)
        assert want in hosts.splitlines(), (name, hosts)
