"""Issue 37 items 2 and 3: the operator as its users run it, on a real node.

The image is the project's ``Dockerfile`` built by buildah on a Debian base made with mmdebstrap
(``tools/opimage``, cached by content: a second build of an unchanged tree is a cache hit), exported
as an OCI archive and imported into the node's containerd. The operator is installed by its Helm
chart with its defaults (two replicas, leader election, the chart's ServiceAccount and RBAC, probes,
security context, memory limit); only the image's repository and tag are set. Its pods reach the API
server through the ``kubernetes`` Service's ClusterIP (kube-proxy), with their projected token.

Asserts: both pods Ready by the chart's probes, as the chart's non-root uid on a read-only root
(from inside the container); one of them holds the leader Lease; /metrics is served on the pod IP;
a Nova applied gets status conditions from the operator (its dependencies do not exist: a condition
naming what is missing); the leader's memory stays under the chart's limit (printed).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opimage import OperatorImage, build
from realnode import RealNodes
from realnode.access import accessible_control_plane
from simcluster.client.kube import Kube
from simcluster.platform.installtools import tool
from simcluster.realtier.operator_chart import helm_env, import_image, install

from tests.novas import nova_spec

# long: 2.6-3.9 min warm on this machine at load 30-35 (the node's import of the image alone 35-76 s),
# over the 60 s a test of `make test` may add; make test-realnova runs it
pytestmark = [pytest.mark.realnova, pytest.mark.long]

ROOT = pathlib.Path(__file__).resolve().parents[2]
RELEASE, RELEASE_NS, NOVA_NS = "nova-operator", "nova-system", "openstack"
TIMEOUT = 240.0  # a busy 2-core machine: the pods start Python and import the whole package


@dataclass
class Site:
    nodes: RealNodes
    image: OperatorImage
    values: dict[str, Any]
    env: dict[str, str]

    @property
    def kube(self) -> Kube:
        return self.nodes.cluster.kube

    def kubectl(self, *args: str) -> subprocess.CompletedProcess[str]:
        kubeconfig = f"--kubeconfig={self.nodes.cluster.control_plane.kubeconfig}"
        return subprocess.run(
            [str(tool("kubectl")), kubeconfig, *args], capture_output=True, text=True, timeout=60
        )


def _wait(check: Callable[[], Any], what: str, nodes: RealNodes, timeout: float = TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(1.0)
    pytest.fail(f"{what}: not within {timeout:.0f} s\n{nodes.logs(3000)}")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    t0 = time.monotonic()
    image, timings = build()
    print(
        f"\nimage {image.ref}: {image.layers} layers, archive {image.archive.stat().st_size / 2**20:.0f} MiB;"
        f" base {timings.base:.1f} s, build {timings.build:.1f} s, export {timings.export:.1f} s"
    )
    cluster, access = accessible_control_plane(pathlib.Path(tmp_path_factory.mktemp("site")))
    nodes = RealNodes(cluster, pathlib.Path(tmp_path_factory.mktemp("rn")), access=access)
    workdir = pathlib.Path(tmp_path_factory.mktemp("helm"))
    kubeconfig = cluster.control_plane.kubeconfig
    env = helm_env(kubeconfig, workdir / "helm")  # what ``install`` gives helm, for the test's own calls
    try:
        nodes.start()
        t1 = time.monotonic()
        import_image(nodes, f"{image.repo}:{image.tag}", image.archive)
        print(f"ctr images import on {len(nodes.nodes)} node(s): {time.monotonic() - t1:.1f} s")
        values = {"image": {"repository": image.repo, "tag": image.tag}}
        install(kubeconfig, workdir, values)
        print(f"site up (image, control plane, node, helm install): {time.monotonic() - t0:.1f} s")
        yield Site(nodes, image, values, env)
    finally:
        nodes.stop()
        cluster.stop()
    assert nodes.leftovers() == []


def _deployment(site: Site) -> dict[str, Any]:
    return site.kube.get(f"/apis/apps/v1/namespaces/{RELEASE_NS}/deployments/{RELEASE}")


def _pods(site: Site) -> list[dict[str, Any]]:
    selector = "app.kubernetes.io/name%3Dnova-operator"
    return list(site.kube.get(f"/api/v1/namespaces/{RELEASE_NS}/pods?labelSelector={selector}")["items"])


def _all_ready(site: Site) -> dict[str, Any] | None:
    deployment = _deployment(site)
    ready = deployment.get("status", {}).get("readyReplicas") == deployment["spec"]["replicas"]
    return deployment if ready else None


def _ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _leader(site: Site) -> str:
    leases = site.kube.get(f"/apis/coordination.k8s.io/v1/namespaces/{RELEASE_NS}/leases")["items"]
    holders = [str(lease["spec"].get("holderIdentity") or "") for lease in leases]
    pods = {p["metadata"]["name"] for p in _pods(site)}
    return next((h for h in holders for p in pods if h.startswith(p)), "")


def _leader_pod(site: Site) -> dict[str, Any]:
    holder = _wait(lambda: _leader(site), "a pod holds the leader Lease", site.nodes)
    return next(p for p in _pods(site) if holder.startswith(p["metadata"]["name"]))


def test_the_chart_runs_the_operator_from_the_built_image_with_its_probes_and_security_context(
    site: Site,
) -> None:
    t0 = time.monotonic()
    deployment = _wait(
        lambda: _all_ready(site),
        "every replica of the Deployment Ready",
        site.nodes,
    )
    print(f"helm install -> {deployment['spec']['replicas']} pods Ready: {time.monotonic() - t0:.1f} s")
    # the Debian base, the dependencies, the code: a change of the code is the last layer only
    assert site.image.layers == 3
    pods = _pods(site)
    assert len(pods) == deployment["spec"]["replicas"] == 2  # the chart's default
    for pod in pods:
        assert _ready(pod)
        (container,) = pod["spec"]["containers"]
        assert container["image"] == site.image.ref
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert container["resources"]["limits"]["memory"] == "512Mi"
        assert pod["spec"]["serviceAccountName"] == RELEASE
        (status,) = pod["status"]["containerStatuses"]
        assert status["ready"], status
        assert status["restartCount"] == 0, status
        assert status["imageID"], status
        # what the kernel says, from inside: the chart's uid and gid, nothing writable but /tmp
        name = pod["metadata"]["name"]
        script = (
            "id -u; id -g; touch /probe 2>&1 || true; touch /tmp/probe && echo tmp-ok;"
            " grep -E '^(CapEff|Seccomp):' /proc/self/status"
        )
        done = site.kubectl("-n", RELEASE_NS, "exec", name, "--", "sh", "-c", script)
        assert done.returncode == 0, done.stderr
        uid, gid, refused, tmp, *status_lines = done.stdout.strip().splitlines()
        assert (uid, gid) == ("65532", "65532")
        assert "Read-only file system" in refused
        assert tmp == "tmp-ok"
        proc = dict(line.split(":\t", 1) for line in status_lines)
        assert proc["CapEff"] == "0000000000000000"  # capabilities: drop ALL
        assert proc["Seccomp"] == "2"  # the chart's seccompProfile RuntimeDefault: a filter


def test_one_pod_holds_the_leader_lease_and_serves_metrics(site: Site) -> None:
    leader = _leader_pod(site)
    name = leader["metadata"]["name"]
    raw = site.kubectl("get", "--raw", f"/api/v1/namespaces/{RELEASE_NS}/pods/{name}:8080/proxy/metrics")
    assert raw.returncode == 0, raw.stderr
    families = {line.split()[2] for line in raw.stdout.splitlines() if line.startswith("# TYPE ")}
    assert "process_resident_memory_bytes" in families
    ours = sorted(f for f in families if f.startswith("nova_operator_"))
    assert ours, sorted(families)
    print(f"leader {name}; /metrics: {len(families)} families, {len(ours)} nova_operator_*")


def test_a_nova_gets_status_conditions_from_the_operator_in_the_pod(site: Site) -> None:
    site.kube.post("/api/v1/namespaces", {"metadata": {"name": NOVA_NS}})
    nova = {
        "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
        "kind": "Nova",
        "metadata": {"name": "nova", "namespace": NOVA_NS},
        "spec": nova_spec(),
    }
    site.kube.apply(nova, namespace=NOVA_NS)
    path = f"/apis/nova.openstack.c5c3.io/v1alpha1/namespaces/{NOVA_NS}/novas/nova"
    conditions = _wait(
        lambda: site.kube.get(path).get("status", {}).get("conditions"),
        "the Nova's status conditions",
        site.nodes,
    )
    by_type = {c["type"]: c for c in conditions}
    print("Nova conditions: " + json.dumps({t: [c["status"], c.get("reason")] for t, c in by_type.items()}))
    assert by_type["Ready"]["status"] == "False"
    # nothing it depends on exists: the operator says which (the Secrets the spec names)
    said = " ".join(str(c.get("message", "")) for c in conditions)
    assert "api-db" in said or "cell-db" in said or "service-user" in said, conditions


def test_the_leaders_memory_stays_under_the_charts_limit(site: Site) -> None:
    leader = _leader_pod(site)
    node = leader["spec"]["nodeName"]
    summary = site.kube.get(f"/api/v1/nodes/{node}/proxy/stats/summary")
    (pod,) = [p for p in summary["pods"] if p["podRef"]["name"] == leader["metadata"]["name"]]
    (manager,) = [c for c in pod["containers"] if c["name"] == "manager"]
    rss, working_set = manager["memory"]["rssBytes"], manager["memory"]["workingSetBytes"]
    # the process's own view (file-backed pages included), from its /metrics
    name = leader["metadata"]["name"]
    raw = site.kubectl("get", "--raw", f"/api/v1/namespaces/{RELEASE_NS}/pods/{name}:8080/proxy/metrics")
    assert raw.returncode == 0, raw.stderr
    (process_rss,) = [
        float(line.split()[1])
        for line in raw.stdout.splitlines()
        if line.startswith("process_resident_memory_bytes ")
    ]
    limit = 512 * 2**20
    print(
        f"leader: cgroup RSS {rss / 2**20:.0f} MiB, working set {working_set / 2**20:.0f} MiB,"
        f" process RSS {process_rss / 2**20:.0f} MiB; the chart's limit 512 MiB"
    )
    assert 0 < rss < limit
    assert 0 < process_rss < limit
    assert working_set < limit
