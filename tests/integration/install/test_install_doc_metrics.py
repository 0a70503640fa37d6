"""Issue 40 item 3: the metrics step of docs/install.md targets what the installs render.

The operator binds /metrics to the pod's IP only, so ``kubectl port-forward`` (which connects to the
pod's loopback) cannot reach it; the documented step reads it through the API server's proxy of the
metrics Service. This test parses that step and checks it against the real helm and kustomize
renders: the namespace, the Service name and its port name, the port's target being the container's
metrics port, and that no documented command port-forwards the metrics port.
"""

from __future__ import annotations

import pathlib
import re
from typing import Any

from simcluster.installtools import by_kind, docs, helm_template, run

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
