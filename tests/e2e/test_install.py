"""Both install paths on the simulated cluster: ``kubectl apply -k config/default`` and the Helm chart.

Each path: every object is accepted by the real API server (read back after the install); the
operator's Deployment becomes available on kwok nodes (restricted pod security enforced on its
namespace); its pods cannot run a process here, so the operator runs as in the in-cluster test
(``simcluster.platform.incluster``): the container spec read back from the API server, a bound token of the
install's ServiceAccount in a kubelet-like mount, no kubeconfig; the sample Nova reaches Ready.
Helm also goes through ``helm upgrade`` with changed values (one replica, so no PDB; namespaced
RBAC, the new pod reconciles with it) and ``helm uninstall`` (CRDs kept, the Nova and its children
untouched).

Site settings an install needs on this cluster: the fake Nova API's URL (``--nova-api-url``, a
chart value; for kustomize a ``kubectl patch`` of the Deployment, as an overlay would) and the
namespace the operator watches (so it leaves the other scenarios' namespaces alone).
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import pathlib
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
import yaml
from kubernetes_asyncio import client
from simcluster import SERVICE_PASSWORD, KubeError, ManagedProcess, SimHandle
from simcluster.platform.incluster import PodProcess, pod_process, request_token, write_mount
from simcluster.platform.installtools import CHART, docs, run

pytestmark = pytest.mark.e2e
T = TypeVar("T")
JSON = dict[str, Any]

REPO = pathlib.Path(__file__).resolve().parents[2]
SAMPLES = REPO / "config" / "samples"
DEPENDENCIES = REPO / "tools" / "simcluster" / "samples" / "dependencies.yaml"
NOVA = "/apis/nova.openstack.c5c3.io/v1alpha1/namespaces/{ns}/novas/nova"
NOVA_CRDS = ("novas.nova.openstack.c5c3.io", "novacomputes.nova.openstack.c5c3.io")
READY_WITHIN = 90.0
CLUSTER_SCOPED = {
    "Namespace",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "FlowSchema",
    "PriorityLevelConfiguration",
}
PLURALS = {
    "Namespace": "/api/v1/namespaces",
    "CustomResourceDefinition": "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "Service": "/api/v1/namespaces/{ns}/services",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments",
    "PodDisruptionBudget": "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
    "FlowSchema": "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas",
    "PriorityLevelConfiguration": "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations",
}
CHILDREN = [
    "/apis/apps/v1/namespaces/{ns}/deployments",
    "/api/v1/namespaces/{ns}/configmaps",
    "/api/v1/namespaces/{ns}/services",
    "/apis/batch/v1/namespaces/{ns}/jobs",
    "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies",
]


def wait_for(
    check: Callable[[], T | None], within: float, what: str, proc: ManagedProcess | None = None
) -> T:
    deadline = time.monotonic() + within
    last: Any = None
    while True:
        if proc is not None and not proc.alive:
            raise AssertionError(f"the operator exited while waiting for {what}:\n{proc.output(4000)}")
        try:
            last = check()
        except KubeError as exc:
            last = exc
        if last and not isinstance(last, Exception):
            result: T = last
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within:.0f} s waiting for {what}; last: {last!r}")
        time.sleep(0.25)


def path_of(doc: JSON) -> str:
    base = PLURALS[doc["kind"]].format(ns=doc["metadata"].get("namespace"))
    return f"{base}/{doc['metadata']['name']}"


def exists(sim: SimHandle, path: str) -> JSON | None:
    try:
        return sim.cluster.kube.get(path)
    except KubeError as exc:
        if exc.status == 404:
            return None
        raise


def available(sim: SimHandle, dep: JSON) -> JSON | None:
    """The Deployment rolled out: every replica updated and available on kwok nodes."""
    live = sim.cluster.kube.get(path_of(dep))
    st, want = live.get("status") or {}, live["spec"]["replicas"]
    done = (
        st.get("observedGeneration") == live["metadata"]["generation"]
        and st.get("updatedReplicas") == want
        and st.get("availableReplicas") == want
        and st.get("replicas") == want
    )
    return live if done else None


def operator_pods(sim: SimHandle, dep: JSON) -> list[JSON]:
    ns = dep["metadata"]["namespace"]
    selector = ",".join(f"{k}={v}" for k, v in dep["spec"]["selector"]["matchLabels"].items())
    pods: list[JSON] = sim.cluster.kube.get(f"/api/v1/namespaces/{ns}/pods?labelSelector={selector}")["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


class Install:
    """The operator of one install path, run as its pod (see the module docstring)."""

    def __init__(self, sim: SimHandle, workdir: pathlib.Path, tag: str) -> None:
        self.sim, self.workdir, self.tag = sim, workdir, tag
        self.proc: ManagedProcess | None = None
        self.pod: PodProcess | None = None
        self.runs = 0

    def start(self, dep: JSON) -> ManagedProcess:
        """The operator with exactly the args and env of ``dep``'s live container spec."""
        kube = self.sim.cluster.kube
        ns = dep["metadata"]["namespace"]
        spec = dep["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        sa = spec["serviceAccountName"]
        pod_name = f"{dep['metadata']['name']}-{self.runs}"
        kube.post(
            f"/api/v1/namespaces/{ns}/secrets",
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"bound-{self.tag}-{self.runs}"}},
        )
        token = request_token(kube, ns, sa, bound_secret=f"bound-{self.tag}-{self.runs}")
        mount = write_mount(
            self.workdir / f"{self.tag}-{self.runs}" / "serviceaccount",
            token=token,
            ca=self.sim.cluster.control_plane.ca_file,
            namespace=ns,
        )
        self.pod = pod_process(
            container,
            server=self.sim.cluster.server,
            mount=mount,
            namespace=ns,
            pod_name=pod_name,
            service_account=sa,
        )
        assert "KUBECONFIG" not in self.pod.env
        assert self.pod.changed_args(container) == {"--metrics-bind-address", "--health-probe-bind-address"}
        self.proc = self.sim.spawn(
            f"{self.tag}-operator-{self.runs}", self.pod.argv, env=self.pod.env, inherit_env=False
        )
        self.runs += 1
        return self.proc

    def stop(self) -> None:
        if self.proc is not None:
            code = self.proc.stop(30)
            assert code == 0, self.proc.output(4000)
            self.proc = None


def install_nova(sim: SimHandle, ns: str) -> None:
    """The samples as ``make run`` applies them (Keystone = the fake), with a NetworkPolicy asked for."""
    assert sim.openstack is not None
    sim.create_gateway(ns, "public-gateway")
    objects = [
        *yaml.safe_load_all((SAMPLES / "secrets.yaml").read_text()),
        *yaml.safe_load_all(DEPENDENCIES.read_text()),
    ]
    for doc in objects:
        if doc["kind"] == "Secret" and doc["metadata"]["name"] == "nova-service-user":
            doc["stringData"]["password"] = SERVICE_PASSWORD
    nova = yaml.safe_load((SAMPLES / "nova_minimal.yaml").read_text())
    nova["spec"]["keystoneEndpoint"] = sim.openstack.keystone_url
    nova["spec"]["networkPolicy"] = {"ingress": [{"namespaceSelector": {"matchLabels": {"team": "compute"}}}]}
    for doc in [*objects, nova]:
        doc = copy.deepcopy(doc)
        doc["metadata"]["namespace"] = ns
        sim.cluster.kube.apply(doc, ns)


def nova_ready(sim: SimHandle, ns: str) -> JSON | None:
    nova = sim.cluster.kube.get(NOVA.format(ns=ns))
    conds = {c["type"]: c for c in (nova.get("status") or {}).get("conditions") or []}
    ready = conds.get("Ready", {})
    return (
        nova
        if ready.get("status") == "True" and ready.get("observedGeneration") == nova["metadata"]["generation"]
        else None
    )


def operator_allowed(sim: SimHandle, ns: str, operator_ns: str) -> bool:
    """The Nova's NetworkPolicy lets the operator's own namespace in (its health probe)."""
    policy = exists(sim, f"/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies/nova")
    if policy is None:
        return False
    peer = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": operator_ns}}}
    return any(peer in rule.get("from", []) for rule in policy["spec"]["ingress"])


def drop_nova_namespace(sim: SimHandle, ns: str) -> None:
    """Cleanup without an operator: the finalizer released by hand, then the namespace."""
    kube = sim.cluster.kube
    if exists(sim, NOVA.format(ns=ns)):
        kube.patch(NOVA.format(ns=ns), {"metadata": {"finalizers": None}})
    kube.delete(f"/api/v1/namespaces/{ns}")


def new_namespace(sim: SimHandle, prefix: str) -> str:
    ns = f"e2e-{prefix}-{uuid.uuid4().hex[:6]}"
    sim.cluster.kube.post(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )
    return ns


@pytest.fixture
def tools_env(sim_module: SimHandle, tmp_path: pathlib.Path) -> dict[str, str]:
    """kubectl and helm as the cluster's admin; helm's state in this test's directory."""
    return {
        "KUBECONFIG": str(sim_module.kubeconfig),
        "HELM_CACHE_HOME": str(tmp_path / "helm-cache"),
        "HELM_CONFIG_HOME": str(tmp_path / "helm-config"),
        "HELM_DATA_HOME": str(tmp_path / "helm-data"),
    }


@pytest.fixture
def nova_ns(sim_module: SimHandle) -> Iterator[str]:
    ns = new_namespace(sim_module, "install")
    yield ns
    drop_nova_namespace(sim_module, ns)


def children(sim: SimHandle, ns: str, nova_uid: str) -> dict[str, tuple[str, bool]]:
    """Every object the Nova owns: name -> (uid, being deleted)."""
    out = {}
    for template in CHILDREN:
        for obj in sim.cluster.kube.get(template.format(ns=ns))["items"]:
            if any(ref.get("uid") == nova_uid for ref in obj["metadata"].get("ownerReferences") or []):
                out[f"{template.rsplit('/', 1)[1]}/{obj['metadata']['name']}"] = (
                    obj["metadata"]["uid"],
                    bool(obj["metadata"].get("deletionTimestamp")),
                )
    return out


def helm(*args: str, env: dict[str, str]) -> str:
    return run("helm", *args, env=env, timeout=180)


def test_helm_install_upgrade_uninstall(
    sim_module: SimHandle,
    tools_env: dict[str, str],
    nova_ns: str,
    tmp_path: pathlib.Path,
    summary_line: Callable[[str], None],
) -> None:
    sim = sim_module
    assert sim.openstack is not None
    release_ns = f"e2e-helm-{uuid.uuid4().hex[:6]}"
    common = ["--namespace", release_ns, "--wait", "--timeout", "90s"]
    values = [
        "--set", f"novaApiUrl={sim.openstack.nova_url}",
        "--set", f"watchNamespaces={{{nova_ns}}}",
    ]  # fmt: skip
    crds = [f"{PLURALS['CustomResourceDefinition']}/{n}" for n in NOVA_CRDS]
    absent = [c for c in crds if exists(sim, c) is None]  # on a fresh cluster: helm installs them
    t0 = time.monotonic()
    helm("install", "e2e", str(CHART), "--create-namespace", *common, *values, env=tools_env)
    assert all(exists(sim, c) for c in crds), "the chart's crds/ not installed"
    summary_line(f"install (helm install): CRDs {'installed by the chart' if absent else 'were present'}")
    install = Install(sim, tmp_path, "helm")
    try:
        manifest = docs(helm("get", "manifest", "e2e", "--namespace", release_ns, env=tools_env))
        for doc in manifest:
            doc["metadata"].setdefault("namespace", None if doc["kind"] in CLUSTER_SCOPED else release_ns)
            assert exists(sim, path_of(doc)), f"{doc['kind']} {doc['metadata']['name']} not on the server"
        (dep,) = [d for d in manifest if d["kind"] == "Deployment"]
        live = wait_for(lambda: available(sim, dep), 30, "the chart's Deployment available")  # --wait did
        assert len(operator_pods(sim, dep)) == 2
        assert exists(sim, path_of({**dep, "kind": "PodDisruptionBudget"}))
        proc = install.start(live)
        install_nova(sim, nova_ns)
        nova = wait_for(lambda: nova_ready(sim, nova_ns), READY_WITHIN, "the sample Nova Ready", proc)
        summary_line(f"install (helm install): sample Nova Ready {time.monotonic() - t0:.1f} s")
        assert operator_allowed(sim, nova_ns, release_ns)  # the pod's namespace, not nova-system
        lease = sim.cluster.kube.get(
            f"/apis/coordination.k8s.io/v1/namespaces/{release_ns}/leases/nova-operator-leader"
        )
        assert lease["spec"]["holderIdentity"]

        # upgrade: one replica (the PDB goes), namespaced RBAC, debug logs; the new pod takes over
        install.stop()
        helm(
            "upgrade", "e2e", str(CHART), *common, "--reuse-values",
            "--set", "replicaCount=1", "--set", "rbac.scope=namespaced", "--set", "logLevel=debug",
            env=tools_env,
        )  # fmt: skip
        live = wait_for(lambda: available(sim, dep), 60, "the upgraded Deployment rolled out")
        assert live["spec"]["replicas"] == 1
        assert "--log-level=debug" in live["spec"]["template"]["spec"]["containers"][0]["args"]
        assert exists(sim, path_of({**dep, "kind": "PodDisruptionBudget"})) is None
        role = {"kind": "Role", "metadata": {"name": dep["metadata"]["name"], "namespace": nova_ns}}
        assert exists(sim, path_of(role))
        cluster_role = sim.cluster.kube.get(
            path_of({"kind": "ClusterRole", "metadata": {"name": dep["metadata"]["name"]}})
        )
        # namespaced RBAC: the ClusterRole keeps only cluster-scoped kinds (nodes, priority classes,
        # cluster secret stores), every namespaced kind moved to the Role above
        assert {r for rule in cluster_role["rules"] for r in rule["resources"]} <= {
            "nodes",
            "priorityclasses",
            "clustersecretstores",
        }
        wait_for(lambda: len(operator_pods(sim, dep)) == 1, 30, "one operator pod")
        proc = install.start(live)
        sim.cluster.kube.patch(NOVA.format(ns=nova_ns), {"spec": {"logging": {"level": "DEBUG"}}})
        nova = wait_for(lambda: nova_ready(sim, nova_ns), 60, "the changed Nova Ready again", proc)
        assert proc.alive
        assert "forbidden" not in proc.output(200_000).lower()
        before = children(sim, nova_ns, nova["metadata"]["uid"])
        assert any(k.startswith("deployments/") for k in before)
        assert any(k.startswith("networkpolicies/") for k in before)

        # uninstall: the operator's objects go; the CRDs, the Nova and its children stay
        install.stop()
        helm("uninstall", "e2e", "--namespace", release_ns, "--wait", "--timeout", "60s", env=tools_env)
        for doc in manifest:
            assert exists(sim, path_of(doc)) is None, f"{doc['kind']} {doc['metadata']['name']} left behind"
        for crd in crds:
            assert exists(sim, crd), f"{crd} removed by helm uninstall"
        after_nova = sim.cluster.kube.get(NOVA.format(ns=nova_ns))
        assert after_nova["metadata"]["uid"] == nova["metadata"]["uid"]
        assert not after_nova["metadata"].get("deletionTimestamp")
        assert children(sim, nova_ns, nova["metadata"]["uid"]) == before
    finally:
        if install.proc is not None:
            install.proc.stop(30)
        try:
            helm("uninstall", "e2e", "--namespace", release_ns, "--ignore-not-found", env=tools_env)
        finally:
            sim.cluster.kube.delete(f"/api/v1/namespaces/{release_ns}")


def test_kubectl_apply_k_config_default(
    sim_module: SimHandle,
    tools_env: dict[str, str],
    nova_ns: str,
    tmp_path: pathlib.Path,
    summary_line: Callable[[str], None],
) -> None:
    sim = sim_module
    assert sim.openstack is not None
    t0 = time.monotonic()
    rendered = docs(run("kubectl", "kustomize", str(REPO / "config" / "default")))
    run("kubectl", "apply", "-k", str(REPO / "config" / "default"), env=tools_env)
    installed = [d for d in rendered if d["kind"] not in ("Namespace", "CustomResourceDefinition")]
    try:
        for doc in rendered:
            assert exists(sim, path_of(doc)), f"{doc['kind']} {doc['metadata']['name']} not on the server"
        (dep,) = [d for d in rendered if d["kind"] == "Deployment"]
        wait_for(lambda: available(sim, dep), 60, "the operator's Deployment available")
        assert len(operator_pods(sim, dep)) == 2
        fake_nodes = {n for names in sim.nodes.values() for n in names}
        assert {p["spec"]["nodeName"] for p in operator_pods(sim, dep)} <= fake_nodes
        # The site's settings, as an overlay or `kubectl patch` adds them: a rollout on kwok too.
        extra = [f"--nova-api-url={sim.openstack.nova_url}", f"--namespace={nova_ns}"]
        patch = [{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": a} for a in extra]
        run(
            "kubectl", "-n", "nova-system", "patch", "deployment", dep["metadata"]["name"],
            "--type=json", "-p", json.dumps(patch), env=tools_env,
        )  # fmt: skip
        live = wait_for(lambda: available(sim, dep), 60, "the patched Deployment rolled out")
        install = Install(sim, tmp_path, "kustomize")
        proc = install.start(live)
        try:
            install_nova(sim, nova_ns)
            wait_for(lambda: nova_ready(sim, nova_ns), READY_WITHIN, "the sample Nova Ready", proc)
            summary_line(
                f"install (kubectl apply -k config/default): sample Nova Ready {time.monotonic() - t0:.1f} s"
            )
            assert operator_allowed(sim, nova_ns, "nova-system")
            lease = sim.cluster.kube.get(
                "/apis/coordination.k8s.io/v1/namespaces/nova-system/leases/nova-operator-leader"
            )
            assert lease["spec"]["holderIdentity"]
            sim.cluster.kube.delete(NOVA.format(ns=nova_ns))
            wait_for(lambda: exists(sim, NOVA.format(ns=nova_ns)) is None, 60, "the Nova deleted", proc)
        finally:
            install.stop()
    finally:
        for doc in installed:  # the operator's objects; the Namespace and the CRDs stay for the others
            try:
                sim.cluster.kube.delete(path_of(doc))
            except KubeError as exc:
                if exc.status != 404:
                    raise


# -- an existing cluster (make e2e-kind) -------------------------------------------------------


async def test_the_installed_operator_runs_in_its_pods(api: client.ApiClient) -> None:
    """On ``E2E_KUBECONFIG`` (``make e2e-kind`` installs the chart first): the operator's real pods
    are available, none restarted, and one of them holds the Lease in the operator's namespace."""
    if not os.environ.get("E2E_KUBECONFIG"):
        pytest.skip(
            "needs an installed operator on E2E_KUBECONFIG (make e2e-kind); here the pods run no process"
        )
    ns = os.environ.get("E2E_OPERATOR_NAMESPACE", "nova-system")
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    coordination = client.CoordinationV1Api(api)
    selector = "app.kubernetes.io/name=nova-operator"
    deadline = time.monotonic() + 180
    while True:
        (dep,) = (await apps.list_namespaced_deployment(ns, label_selector=selector)).items
        want = dep.spec.replicas
        if (dep.status.available_replicas or 0) == want and (dep.status.updated_replicas or 0) == want:
            break
        assert time.monotonic() < deadline, f"the operator's Deployment not available: {dep.status}"
        await asyncio.sleep(2)
    pods = (await core.list_namespaced_pod(ns, label_selector=selector)).items
    assert len(pods) == want
    assert all(cs.restart_count == 0 for p in pods for cs in p.status.container_statuses or [])
    lease = await coordination.read_namespaced_lease("nova-operator-leader", ns)
    assert lease.spec.holder_identity.split("_")[0] in {p.metadata.name for p in pods}
