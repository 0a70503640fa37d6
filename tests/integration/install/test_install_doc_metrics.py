"""Issue 40 item 3: the metrics step of docs/install.md targets what the installs render.

The operator binds /metrics to the pod's IP only, so ``kubectl port-forward`` (which connects to the
pod's loopback) cannot reach it; the documented step reads it through the API server's proxy of the
metrics Service. This test parses that step and checks it against the real helm and kustomize
renders: the namespace, the Service name and its port name, the port's target being the container's
metrics port, and that no documented command port-forwards the metrics port. Then it runs the
documented command itself against a real API server, whose Service fronts a server bound the way the
operator binds /metrics.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import pathlib
import re
import socket
import subprocess
import threading
from typing import Any

import pytest
from simcluster import ControlPlane
from simcluster.client.kube import Kube, KubeError
from simcluster.platform.installtools import bindir, by_kind, docs, helm_template, run

REPO = pathlib.Path(__file__).resolve().parents[3]
INSTALL_MD = REPO / "docs" / "install.md"
PROXY = re.compile(
    r"kubectl get --raw /api/v1/namespaces/(?P<ns>[a-z0-9-]+)/services/"
    r"(?P<svc>[a-z0-9-]+):(?P<port>[a-z0-9-]+)/proxy(?P<path>/\S*)"
)


def _verify_block() -> str:
    text = INSTALL_MD.read_text()
    section = text.split("## Verify the install", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```bash\n(.*?)```", section, re.S)
    return str(block)


def _metrics_target(objects: list[dict[str, Any]], service: str, port_name: str) -> tuple[str, list[str]]:
    """The container port a Service port reaches, and the container's args."""
    (svc,) = [s for s in by_kind(objects, "Service") if s["metadata"]["name"] == service]
    (port,) = [p for p in svc["spec"]["ports"] if p["name"] == port_name]
    (dep,) = by_kind(objects, "Deployment")
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items(), "the Service selects the operator's pods"
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    (target,) = [p for p in container["ports"] if p["name"] == port["targetPort"]]
    return f"{target['name']}:{target['containerPort']}", container["args"]


def test_the_documented_metrics_step_reads_the_charts_metrics_service() -> None:
    block = _verify_block()
    m = PROXY.search(block)
    assert m, "the verify step reads /metrics through the API server's service proxy"
    assert m["path"] == "/metrics"
    objects = helm_template("nova-operator", m["ns"])  # the release name the install commands use
    assert "helm install nova-operator charts/nova-operator --namespace nova-system" in INSTALL_MD.read_text()
    assert m["ns"] == "nova-system"
    target, args = _metrics_target(objects, m["svc"], m["port"])
    assert target == "metrics:8080"
    assert "--metrics-bind-address=$(POD_IP):8080" in args


def test_the_kustomize_service_named_beside_it_exists_too() -> None:
    objects = docs(run("kustomize", "build", str(REPO / "config" / "default")))
    m = PROXY.search(_verify_block())
    assert m
    name = "nova-operator-controller-manager-metrics-service"
    assert f"`{name}` with kustomize" in INSTALL_MD.read_text()
    target, args = _metrics_target(objects, name, m["port"])
    assert target == "metrics:8080"
    assert "--metrics-bind-address=$(POD_IP):8080" in args
    (svc,) = [s for s in by_kind(objects, "Service") if s["metadata"]["name"] == name]
    assert svc["metadata"]["namespace"] == m["ns"]


def test_no_documented_command_port_forwards_the_metrics_port() -> None:
    """A port-forward lands on the pod's loopback, where nothing listens on 8080."""
    for page in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        for block in re.findall(r"```(?:bash|sh|console)?\n(.*?)```", page.read_text(), re.S):
            for line in block.splitlines():
                if "port-forward" in line:
                    ports = re.findall(
                        r"(?<![\w/-])(\d+(?::\d+)?)(?![\w-])", line.split("port-forward", 1)[1]
                    )
                    assert all(p.split(":")[-1] != "8080" for p in ports), (page.name, line)


def _pod_ip() -> str:
    """A non-loopback address of this machine, standing in for the pod's IP (the API server does
    not proxy to loopback)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.254", 9))  # no packet is sent: this only picks the outgoing address
        ip: str = s.getsockname()[0]
    assert not ip.startswith("127."), ip
    return ip


class _Metrics(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'nova_operator_leader_election_master_status{name="nova-operator-leader"} 1\n'
        self.send_response(200 if self.path == "/metrics" else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_the_documented_metrics_command_reaches_a_server_bound_to_the_pod_ip_only(
    control_plane: ControlPlane,
) -> None:
    """The step's command, run as written (real kubectl, real kube-apiserver), against a metrics
    Service whose endpoint listens like the operator: on the "pod IP" only, nothing on loopback."""
    block = _verify_block()
    lines = block.splitlines()
    (i,) = [n for n, line in enumerate(lines) if PROXY.search(line)]
    command = lines[i].rstrip("\\").strip() + " " + lines[i + 1].strip()
    m = PROXY.search(command)
    assert m
    assert "| grep '^nova_operator_leader_election_master_status'" in command

    ip = _pod_ip()
    server = http.server.HTTPServer((ip, 0), _Metrics)
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kube = Kube(control_plane.server, control_plane.admin_token, control_plane.ca_file)
    ns, name = m["ns"], m["svc"]
    # The API server proxies only to an endpoint whose target is a Pod with that IP.
    pod_name = "nova-operator-5d9c7b8f6-x2kqz"
    pod = {"kind": "Pod", "namespace": ns, "name": pod_name}
    pod_doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod_name, "namespace": ns},
        "spec": {"nodeName": "node-a", "containers": [{"name": "manager", "image": "nova-operator:test"}]},
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"ports": [{"name": m["port"], "port": 8080, "targetPort": port, "protocol": "TCP"}]},
    }
    endpoints = {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": name, "namespace": ns},
        "subsets": [
            {"addresses": [{"ip": ip}], "ports": [{"name": m["port"], "port": port, "protocol": "TCP"}]}
        ],
    }
    slice_ = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": f"{name}-1", "namespace": ns, "labels": {"kubernetes.io/service-name": name}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [ip], "conditions": {"ready": True}, "targetRef": pod}],
        "ports": [{"name": m["port"], "port": port, "protocol": "TCP"}],
    }
    try:
        kube.apply(pod_doc, ns)
        pods = f"/api/v1/namespaces/{ns}/pods/{pod_name}/status"
        kube.patch(pods, {"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}})
        for doc in (service, endpoints, slice_):
            kube.apply(doc, ns)
        with pytest.raises(ConnectionRefusedError):  # like the operator: nothing on the pod's loopback
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        env = {
            **os.environ,
            "PATH": f"{bindir()}:{os.environ['PATH']}",
            "KUBECONFIG": str(control_plane.kubeconfig),
        }
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True, env=env, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout == 'nova_operator_leader_election_master_status{name="nova-operator-leader"} 1\n'
    finally:
        for doc in (slice_, endpoints, service, pod_doc):
            with contextlib.suppress(KubeError):
                # at once: no kubelet here confirms a graceful deletion of the pod
                kube.delete(f"{kube.collection(doc, ns)}/{doc['metadata']['name']}?gracePeriodSeconds=0")
        server.shutdown()
        server.server_close()
