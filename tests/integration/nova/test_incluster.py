"""In-cluster mode on the real API server: the operator started as its pod would start it.

The chart's ServiceAccount and RBAC (``helm template``) are created in a fresh namespace (not
nova-system); a bound token from the TokenRequest API is written into a directory laid out
like the kubelet's ServiceAccount volume; the process gets exactly the args and env of the
chart's container spec (downward API resolved, listen ports moved to loopback) plus
``KUBERNETES_SERVICE_HOST/PORT`` and no kubeconfig. It must answer its probes, take the Lease in
its own namespace and reconcile a Nova; when the kubelet rotates the token and the old one is
invalidated, it must keep renewing the Lease with the new one.
"""

from __future__ import annotations

import pathlib
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from simcluster import ControlPlane
from simcluster.client.kube import Kube, KubeError
from simcluster.platform.incluster import pod_process, request_token, rotate_token, write_mount
from simcluster.platform.installtools import by_kind, helm_template
from simcluster.platform.process import DEATH_SIGNAL

REPO = pathlib.Path(__file__).resolve().parents[3]
RELEASE = "incluster"
FINALIZER = "nova.openstack.c5c3.io/finalizer"


def _wait(check: Any, timeout: float, what: str, proc: subprocess.Popen[bytes] | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the operator exited with {proc.returncode} while waiting for {what}")
        result = check()
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


@pytest.fixture
def admin(nova_cluster: ControlPlane) -> Kube:
    return Kube(nova_cluster.server, nova_cluster.admin_token, nova_cluster.ca_file)


@pytest.fixture
def install(admin: Kube) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """The chart's objects in a fresh operator namespace (cluster-scoped ones removed afterwards)."""
    ns = f"op-{uuid.uuid4().hex[:6]}"
    admin.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    objects = helm_template(RELEASE, ns)
    applied = [admin.apply(doc, ns) for doc in objects]
    try:
        yield ns, objects
    finally:
        for doc in applied:
            if doc["kind"] in ("ClusterRole", "ClusterRoleBinding"):
                admin.delete(
                    f"/apis/rbac.authorization.k8s.io/v1/{doc['kind'].lower()}s/{doc['metadata']['name']}"
                )
        admin.delete(f"/api/v1/namespaces/{ns}")


def _secret(admin: Kube, ns: str, name: str) -> None:
    admin.post(
        f"/api/v1/namespaces/{ns}/secrets",
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "type": "Opaque"},
    )


def _sample_nova() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((REPO / "config" / "samples" / "nova_minimal.yaml").read_text())
    return doc


def _unauthorized(server: str, ca: pathlib.Path, token: str) -> bool:
    try:
        Kube(server, token, ca).get("/api")
    except KubeError as exc:
        return exc.status == 401
    return False


def test_operator_in_a_pod_leads_and_reconciles_with_a_bound_rotating_token(
    nova_cluster: ControlPlane, admin: Kube, install: tuple[str, list[dict[str, Any]]], tmp_path: pathlib.Path
) -> None:
    ns, objects = install
    (deployment,) = by_kind(objects, "Deployment")
    pod_spec = deployment["spec"]["template"]["spec"]
    (container,) = pod_spec["containers"]
    sa = pod_spec["serviceAccountName"]
    # Two "pods" of the ServiceAccount: a token bound to each; deleting one invalidates its token.
    for name in ("pod-a", "pod-b"):
        _secret(admin, ns, name)
    token_a = request_token(admin, ns, sa, bound_secret="pod-a")
    mount = write_mount(tmp_path / "serviceaccount", token=token_a, ca=nova_cluster.ca_file, namespace=ns)
    pod = pod_process(
        container, server=nova_cluster.server, mount=mount, namespace=ns, pod_name="op-0", service_account=sa
    )
    assert "KUBECONFIG" not in pod.env
    assert pod.env["POD_NAMESPACE"] == ns
    assert pod.changed_args(container) == {"--metrics-bind-address", "--health-probe-bind-address"}

    nova_ns = f"nova-{uuid.uuid4().hex[:6]}"
    admin.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": nova_ns}})
    samples = REPO / "config" / "samples"
    for doc in [*yaml.safe_load_all((samples / "secrets.yaml").read_text()), _sample_nova()]:
        doc["metadata"]["namespace"] = nova_ns
        admin.apply(doc, nova_ns)

    log = tmp_path / "operator.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([*DEATH_SIGNAL, *pod.argv], env=pod.env, stdout=out, stderr=subprocess.STDOUT)
    try:
        health = pod.ports[8081]
        for probe in (container["readinessProbe"], container["livenessProbe"]):
            path = probe["httpGet"]["path"]
            _wait(lambda p=path: _get(f"http://127.0.0.1:{health}{p}") == 200, 60, f"probe {path}", proc)
        assert _get(f"http://127.0.0.1:{pod.ports[8080]}/metrics") == 200

        lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/nova-operator-leader"

        def lease() -> dict[str, Any] | None:
            try:
                doc: dict[str, Any] = admin.get(lease_path)
            except KubeError:
                return None
            return doc if doc["spec"].get("holderIdentity") else None

        held = _wait(lease, 60, "the Lease in the operator's own namespace", proc)
        assert held["spec"]["holderIdentity"]
        nova_path = f"/apis/nova.openstack.c5c3.io/v1alpha1/namespaces/{nova_ns}/novas/nova"

        def reconciled() -> bool:
            nova = admin.get(nova_path)
            return FINALIZER in (nova["metadata"].get("finalizers") or []) and bool(
                (nova.get("status") or {}).get("conditions")
            )

        _wait(reconciled, 60, "the Nova reconciled (finalizer and conditions)", proc)

        # The kubelet rotates the token; the old one dies with its bound object.
        rotate_token(mount, request_token(admin, ns, sa, bound_secret="pod-b"))
        admin.delete(f"/api/v1/namespaces/{ns}/secrets/pod-a")
        # The API server caches token reviews for 10 s: wait until the old token is refused.
        _wait(
            lambda: _unauthorized(nova_cluster.server, nova_cluster.ca_file, token_a), 30, "token A refused"
        )
        renewed = admin.get(lease_path)["spec"]["renewTime"]
        _wait(
            lambda: admin.get(lease_path)["spec"]["renewTime"] != renewed, 20, "a renewal with token B", proc
        )
        second = admin.get(lease_path)["spec"]["renewTime"]
        _wait(lambda: admin.get(lease_path)["spec"]["renewTime"] != second, 20, "another renewal", proc)
        assert admin.get(lease_path)["spec"]["holderIdentity"] == held["spec"]["holderIdentity"]
        assert proc.poll() is None
        admin.delete(nova_path)  # the finalizer is the operator's to release, with token B

        def gone() -> bool:
            try:
                admin.get(nova_path)
            except KubeError as exc:
                return exc.status == 404
            return False

        _wait(gone, 60, "the Nova deleted (finalizer released)", proc)
    finally:
        proc.terminate()
        try:
            code = proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        output = log.read_text(errors="replace")
        admin.delete(f"/api/v1/namespaces/{nova_ns}")
    assert code == 0, output[-4000:]
    assert "Unauthorized" not in output, output[-4000:]
    assert token_a not in output  # the token never reaches the log
