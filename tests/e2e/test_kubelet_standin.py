"""The kubelet stand-in inside the simulated cluster: beside kwok's nodes, scheduled by the real
kube-scheduler, its Deployments made Available and its Jobs Complete by the real controllers, its
Services' EndpointSlices written by the real EndpointSlice controller."""

from __future__ import annotations

import asyncio
import pathlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from simcluster import SimHandle
from simcluster.client.asynckube import AsyncKube
from simcluster.realtier.kubelet import STANDIN_LABEL, Image, Kubelet
from simcluster.realtier.kubelet.network import PodNetwork

pytestmark = pytest.mark.e2e
JSON = dict[str, Any]
IMAGE = "sim.local/minimal:1"
TOLERATION = {"key": STANDIN_LABEL, "operator": "Exists", "effect": "NoSchedule"}
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
h.HTTPServer(("", 8774), Hello).serve_forever()
"""
CLIENT = """
import time, urllib.request
# Until every replica answered (bounded): the Service's endpoints follow the pods' readiness
# through the EndpointSlice controller and the node's rules, which lag on a busy machine.
seen, deadline = set(), time.monotonic() + 30
while len(seen) < 3 and time.monotonic() < deadline:
    seen.add(urllib.request.urlopen("http://api:8774/", timeout=5).read().decode())
open("/dev/termination-log", "w").write(" ".join(sorted(seen)))
"""


def build_image(root: pathlib.Path) -> Image:
    root.mkdir(mode=0o755)
    for d in ("usr", "etc", "tmp"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "tmp").chmod(0o1777)
    for link in ("bin", "lib", "lib64", "sbin"):
        (root / link).symlink_to(f"usr/{link}")
    (root / "etc" / "nsswitch.conf").write_text("passwd: files\ngroup: files\nhosts: files dns\n")
    return Image(root, binds={"/usr": "/usr"})


@pytest.fixture
async def standin(simcluster: SimHandle, tmp_path: pathlib.Path) -> AsyncIterator[tuple[AsyncKube, Kubelet]]:
    cluster = simcluster.cluster
    tag = uuid.uuid4().hex[:6]
    async with AsyncKube(cluster.server, cluster.admin_token, cluster.control_plane.ca_file) as kube:
        network = PodNetwork(kube, bridge=f"sime{tag}", table=f"simkubelet_{tag}", cidr="10.245.0.0/16")
        kubelet = Kubelet(
            kube,
            [f"real-{tag}-0", f"real-{tag}-1"],
            {IMAGE: build_image(tmp_path / "image")},
            tmp_path / "kubelet",
            network=network,
            taints=[{"key": STANDIN_LABEL, "value": "standin", "effect": "NoSchedule"}],
        )
        await kubelet.start()
        try:
            yield kube, kubelet
        finally:
            await kubelet.stop()
            for node in list(kubelet.nodes):
                await kubelet.remove_node(node)


async def eventually(kube: AsyncKube, path: str, check: Any, seconds: float = 60.0) -> JSON:
    obj: JSON | None = None
    for _ in range(int(seconds * 5)):
        obj = await kube.get(path)
        if obj is not None and check(obj):
            return obj
        await asyncio.sleep(0.2)
    raise AssertionError(f"{path} never matched: {(obj or {}).get('status')}")


def pod_template(labels: JSON, container: JSON, **spec: Any) -> JSON:
    return {
        "metadata": {"labels": labels},
        "spec": {
            "nodeSelector": {STANDIN_LABEL: "standin"},
            "tolerations": [TOLERATION],
            "terminationGracePeriodSeconds": 2,
            "containers": [container],
            **spec,
        },
    }


async def test_three_replicas_bind_one_port_and_serve_a_service_and_a_job_completes(
    standin: tuple[AsyncKube, Kubelet], ns: str
) -> None:
    kube, kubelet = standin
    node = await kube.get(f"/api/v1/nodes/{kubelet.nodes[0]}")
    assert node is not None
    assert "kwok.x-k8s.io/node" not in node["metadata"].get("annotations", {})
    api = {
        "name": "api",
        "image": IMAGE,
        "command": ["python3", "-c", SERVER],
        "ports": [{"name": "api", "containerPort": 8774}],
        "readinessProbe": {"httpGet": {"path": "/", "port": "api"}, "periodSeconds": 1},
    }
    await kube.create(
        f"/apis/apps/v1/namespaces/{ns}/deployments",
        {
            "metadata": {"name": "api"},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "api"}},
                "template": pod_template({"app": "api"}, api),
            },
        },
    )
    await kube.create(
        f"/api/v1/namespaces/{ns}/services",
        {
            "metadata": {"name": "api"},
            "spec": {"selector": {"app": "api"}, "ports": [{"port": 8774, "targetPort": "api"}]},
        },
    )
    await eventually(
        kube,
        f"/apis/apps/v1/namespaces/{ns}/deployments/api",
        lambda d: d.get("status", {}).get("availableReplicas") == 3,
    )
    pods = (await kube.request("GET", f"/api/v1/namespaces/{ns}/pods?labelSelector=app%3Dapi"))["items"]
    assert {p["spec"]["nodeName"] for p in pods} <= set(kubelet.nodes)
    assert len({p["status"]["podIP"] for p in pods}) == 3
    assert all(p["status"]["podIP"].startswith("10.245.") for p in pods)  # ours, not kwok's 10.0.0.0/16
    client = {"name": "client", "image": IMAGE, "command": ["python3", "-c", CLIENT]}
    await kube.create(
        f"/apis/batch/v1/namespaces/{ns}/jobs",
        {
            "metadata": {"name": "client"},
            "spec": {
                "backoffLimit": 0,
                "template": pod_template({"app": "client"}, client, restartPolicy="Never"),
            },
        },
    )
    job = await eventually(
        kube,
        f"/apis/batch/v1/namespaces/{ns}/jobs/client",
        lambda j: any(
            c["type"] in ("Complete", "Failed") and c["status"] == "True"
            for c in j.get("status", {}).get("conditions") or []
        ),
    )
    assert job["status"].get("succeeded") == 1, job["status"]
    (pod,) = (await kube.request("GET", f"/api/v1/namespaces/{ns}/pods?labelSelector=app%3Dclient"))["items"]
    seen = pod["status"]["containerStatuses"][0]["state"]["terminated"]["message"].split()
    assert sorted(seen) == sorted(p["metadata"]["name"] for p in pods)  # every replica answered
