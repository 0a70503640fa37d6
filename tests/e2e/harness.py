"""The e2e tier's shared harness (a helper module): releases of the simulated cluster, namespaces, waits."""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import pathlib
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
import yaml
from simcluster import SERVICE_PASSWORD, KubeError, ManagedProcess, SimHandle
from simcluster.platform.operator import PROGRAM, start_operator

T = TypeVar("T")


JSON = dict[str, Any]


REPO = pathlib.Path(__file__).resolve().parents[2]


SAMPLES = REPO / "config" / "samples"


DEPENDENCIES = REPO / "tools" / "simcluster" / "samples" / "dependencies.yaml"


NOVAS = "/apis/nova.openstack.c5c3.io/v1alpha1/namespaces/{ns}/novas"


DEPLOYMENTS = "/apis/apps/v1/namespaces/{ns}/deployments"


NAME = "nova"  # the sample Nova's name


POOL = "rack7"  # the sample NovaCompute's name


# The pool label of these scenarios: set on the cluster's pool "a" nodes, so relabelling never touches
# the pool label the cluster's own tests use.
POOL_KEY = "e2e.example.org/compute-pool"


INSTANCE = "app.kubernetes.io/instance"


INSTALL_WITHIN = 90.0  # make run measured ~27 s to Ready


def wait_for(check: Callable[[], T | None], within: float, what: str, interval: float = 0.25) -> T:
    """Poll ``check`` until it returns something truthy (API errors count as "not yet")."""
    deadline = time.monotonic() + within
    last: Any = None
    while True:
        try:
            last = check()
        except KubeError as exc:
            last = exc
        if last and not isinstance(last, Exception):
            result: T = last
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within:.0f} s waiting for {what}; last: {last!r}")
        time.sleep(interval)


def items(sim: SimHandle, path: str, selector: str | None = None) -> list[JSON]:
    query = f"?labelSelector={selector}" if selector else ""
    return list(sim.cluster.kube.get(path + query).get("items") or [])


def conditions(obj: JSON) -> dict[str, JSON]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def is_ready(obj: JSON) -> bool:
    """Ready=True for the object's current generation."""
    ready = conditions(obj).get("Ready") or {}
    return ready.get("status") == "True" and ready.get("observedGeneration") == obj["metadata"]["generation"]


class Scenario:
    """One namespace with the sample Nova (and optionally its NovaCompute) and its operator(s)."""

    def __init__(self, sim: SimHandle, ns: str) -> None:
        self.sim = sim
        self.ns = ns
        self.kube = sim.cluster.kube
        self.operators: list[ManagedProcess] = []
        self.metrics_ports: dict[str, int] = {}
        self.health_ports: dict[str, int] = {}
        self.installed_at = 0.0  # monotonic time the samples were applied

    # reading
    def path(self, template: str, name: str = "") -> str:
        base = template.format(ns=self.ns)
        return f"{base}/{name}" if name else base

    def nova(self) -> JSON:
        return self.kube.get(self.path(NOVAS, NAME))

    def list(self, template: str, selector: str | None = None) -> list[JSON]:
        return items(self.sim, self.path(template), selector)

    def deployments(self) -> dict[str, JSON]:
        return {d["metadata"]["name"]: d for d in self.list(DEPLOYMENTS, f"{INSTANCE}={NAME}")}

    def nova_ready(self) -> JSON | None:
        nova = self.nova()
        return nova if is_ready(nova) else None

    def wait_ready(self, within: float = 60.0, what: str = "the Nova Ready") -> JSON:
        return wait_for(self.nova_ready, within, what)

    def patch_nova(self, spec: JSON) -> None:
        self.kube.patch(self.path(NOVAS, NAME), {"spec": spec})

    # the operator
    def start_operator(
        self,
        tag: str,
        *,
        leader_elect: bool = False,
        program: tuple[str, ...] = PROGRAM,
        kubeconfig: pathlib.Path | None = None,
        namespaces: tuple[str, ...] = (),
        extra: tuple[str, ...] = (),
    ) -> ManagedProcess:
        assert self.sim.openstack is not None
        op = start_operator(
            self.sim,
            f"operator-{self.ns}-{tag}",
            *[arg for ns in (self.ns, *namespaces) for arg in ("--namespace", ns)],
            *extra,
            "--nova-api-url", self.sim.openstack.nova_url,
            *(["--leader-elect", "--leader-election-namespace", self.ns] if leader_elect
              else ["--no-leader-elect"]),
            cwd=REPO,
            kubeconfig=kubeconfig,
            program=program,
        )  # fmt: skip
        self.operators.append(op.process)
        self.metrics_ports[op.process.name] = op.metrics_port
        self.health_ports[op.process.name] = op.health_port
        return op.process

    def probe(self, proc: ManagedProcess, path: str = "/healthz") -> tuple[int, str]:
        """``/healthz`` or ``/readyz`` of an operator: (status, body), (0, error) when it does not answer."""
        url = f"http://127.0.0.1:{self.health_ports[proc.name]}{path}"
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                return int(resp.status), resp.read().decode()
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read().decode()
        except OSError as exc:
            return 0, str(exc)

    def metrics(self, proc: ManagedProcess) -> str:
        url = f"http://127.0.0.1:{self.metrics_ports[proc.name]}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                return str(resp.read().decode())
        except OSError:
            return ""

    def metric(self, proc: ManagedProcess, name: str, **labels: str) -> float:
        """The sum of the samples of ``name`` whose labels include ``labels`` (0 when none)."""
        return self.metric_in(self.metrics(proc), name, **labels)

    @staticmethod
    def metric_in(text: str, name: str, **labels: str) -> float:
        """``metric`` of a /metrics text already read."""
        total = 0.0
        for line in text.splitlines():
            if not line.startswith(name + "{"):
                continue
            head, _, value = line.rpartition(" ")
            if all(f'{k}="{v}"' in head for k, v in labels.items()):
                total += float(value)
        return total

    def stop_operators(self) -> None:
        for proc in self.operators:
            proc.stop()

    # installing
    def install(
        self,
        *,
        compute: bool = False,
        dependencies: bool = True,
        credentials: dict[tuple[str, str], str] | None = None,
    ) -> None:
        """The samples as ``make run`` applies them, in this namespace: Secrets, MariaDB and RabbitMQ
        clusters (the stand-ins make them Ready), a Gateway, the minimal Nova (Keystone = the fake).
        ``dependencies=False`` leaves the clusters out (``install_dependencies()`` adds them later);
        ``credentials`` replaces Secret values: (Secret name, key) -> value."""
        assert self.sim.openstack is not None
        self.sim.create_gateway(self.ns, "public-gateway")
        docs = [
            *yaml.safe_load_all((SAMPLES / "secrets.yaml").read_text()),
            *(yaml.safe_load_all(DEPENDENCIES.read_text()) if dependencies else []),
        ]
        for doc in docs:  # the fake Keystone's service user (its password is shared by other tests)
            if doc["kind"] == "Secret" and doc["metadata"]["name"] == "nova-service-user":
                assert doc["stringData"]["password"]
                doc["stringData"]["password"] = SERVICE_PASSWORD
            for (secret, key), value in (credentials or {}).items():
                if doc["kind"] == "Secret" and doc["metadata"]["name"] == secret:
                    assert key in doc["stringData"], (secret, key)
                    doc["stringData"][key] = value
        nova = yaml.safe_load((SAMPLES / "nova_minimal.yaml").read_text())
        nova["spec"]["keystoneEndpoint"] = self.sim.openstack.keystone_url
        docs.append(nova)
        if compute:
            docs.append(self.compute_doc())
        for doc in docs:
            if doc:
                self.apply(doc)

    def install_dependencies(self, kinds: tuple[str, ...] = ("MariaDB", "RabbitmqCluster")) -> None:
        for doc in yaml.safe_load_all(DEPENDENCIES.read_text()):
            if doc and doc["kind"] in kinds:
                self.apply(doc)

    def compute_doc(self) -> JSON:
        pool = yaml.safe_load((SAMPLES / "novacompute.yaml").read_text())
        pool["spec"]["nodeSelector"] = {POOL_KEY: POOL}
        return dict(pool)

    def apply(self, doc: JSON) -> None:
        doc = copy.deepcopy(doc)
        doc["metadata"]["namespace"] = self.ns
        self.kube.apply(doc, self.ns)


_PREPARED: set[int] = set()


def prepare(sim: SimHandle) -> None:
    """Once per cluster: the project's CRDs, RBAC and Lease priority level (``SimHandle.install``), and
    the pool label on pool "a"'s nodes."""
    if id(sim) in _PREPARED:
        return
    assert sim.openstack is not None
    sim.install()
    for kinds in ("novas", "novacomputes"):  # Established, then its storage answers a moment later (429)
        path = f"/apis/nova.openstack.c5c3.io/v1alpha1/{kinds}"
        sim.cluster.kube.wait(lambda p=path: "items" in sim.cluster.kube.get(p), 30, f"{kinds} served")
    for node in sim.nodes["a"]:
        sim.cluster.label_node(node, {POOL_KEY: POOL, "topology.kubernetes.io/zone": "az1"})
    _PREPARED.add(id(sim))


def new_namespace(sim: SimHandle, prefix: str) -> str:
    ns = f"e2e-{prefix}-{uuid.uuid4().hex[:6]}"
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    sim.cluster.kube.post("/api/v1/namespaces", body)
    return ns


def drop_namespace(sim: SimHandle, ns: str) -> None:
    try:
        sim.cluster.kube.delete(f"/api/v1/namespaces/{ns}")
    except KubeError as exc:
        if exc.status != 404:
            raise


def gone(s: Scenario, path: str) -> bool:
    try:
        s.kube.get(path)
    except KubeError as exc:
        if exc.status == 404:
            return True
        raise
    return False


# A distinctive value in every credential the Nova is given (the leak test searches for them).
DISTINCT = {
    ("nova-api-db-credentials", "password"): "Lk7apiDbPw-q3Zr",
    ("nova-cell-db-credentials", "password"): "Lk7cellDbPw-w9Xe",
    ("nova-metadata-proxy", "shared_secret"): "Lk7metaShared-t4Yu",
}


# Everything in the namespace that carries annotations or free text
TEXT_KINDS = (
    "/api/v1/namespaces/{ns}/configmaps",
    "/api/v1/namespaces/{ns}/events",
    "/api/v1/namespaces/{ns}/pods",
    "/api/v1/namespaces/{ns}/services",
    "/api/v1/namespaces/{ns}/secrets",
    "/apis/apps/v1/namespaces/{ns}/deployments",
    "/apis/apps/v1/namespaces/{ns}/replicasets",
    "/apis/batch/v1/namespaces/{ns}/jobs",
    "/apis/batch/v1/namespaces/{ns}/cronjobs",
    "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies",
    NOVAS,
)


def texts(s: Scenario, proc: ManagedProcess) -> dict[str, str]:
    """What may never carry a credential: everything but Secret data, keyed by where it is, and the
    operator's log and metrics."""
    out: dict[str, str] = {}
    for kind in TEXT_KINDS:
        for obj in s.list(kind):
            meta = obj.get("metadata") or {}
            where = f"{kind.rsplit('/', 1)[-1]}/{meta.get('name')}"
            shown = {"annotations": meta.get("annotations"), "labels": meta.get("labels")}
            if kind.endswith("/secrets"):
                out[where] = json.dumps(shown)
                continue
            shown.update({k: v for k, v in obj.items() if k != "metadata"})
            out[where] = json.dumps(shown)
    out["operator log"] = proc.log.read_text(errors="replace")
    out["metrics"] = s.metrics(proc)
    return out


class Release:
    """The sample Nova at 2025.2 with ``DISTINCT`` credentials, its operator, and its later stages."""

    def __init__(self, sim: SimHandle) -> None:
        prepare(sim)
        self.s = Scenario(sim, new_namespace(sim, "upgrade"))
        self.proc = self.s.start_operator("0")
        self.s.install(credentials=DISTINCT)
        self.installed = self.s.wait_ready(INSTALL_WITHIN, "the Nova Ready at 2025.2")
        self.texts: dict[str, dict[str, str]] = {"install": texts(self.s, self.proc)}  # by stage
        self.credentials = [*DISTINCT.values(), SERVICE_PASSWORD]
        for secret in self.s.list("/api/v1/namespaces/{ns}/secrets"):  # the bus' generated default user
            data = secret.get("data") or {}
            if "default-user" in secret["metadata"]["name"] and "password" in data:
                self.credentials.append(base64.b64decode(data["password"]).decode())
        self.upgrade_seconds: float | None = None  # from the release bump to the Nova Ready at 2026.1
        self.deleted = False

    def upgrade(self) -> float:
        """The Nova upgraded to 2026.1 and Ready (once); the seconds it took."""
        if self.upgrade_seconds is None:
            t0 = time.monotonic()
            self.s.patch_nova({"openStackRelease": "2026.1", "image": {"tag": "2026.1"}})

            def upgraded() -> JSON | None:
                nova = self.s.nova_ready()
                if nova is None or nova["status"].get("installedRelease") != "2026.1":
                    return None
                return nova if not nova["status"].get("upgradePhase") else None

            wait_for(upgraded, 120, "installedRelease 2026.1 and the Nova Ready")
            self.upgrade_seconds = time.monotonic() - t0
            self.texts["upgrade"] = texts(self.s, self.proc)
        return self.upgrade_seconds

    def delete(self) -> None:
        """The Nova deleted (its finalizer done), then its operator and namespace (once)."""
        if self.deleted:
            return
        self.deleted = True
        try:
            self.s.kube.delete(self.s.path(NOVAS, NAME))
            wait_for(lambda: gone(self.s, self.s.path(NOVAS, NAME)), 90, "the Nova gone")
            time.sleep(2)  # the last events and log lines of the finalizer
            self.texts["delete"] = texts(self.s, self.proc)
        finally:
            self.s.stop_operators()
            with contextlib.suppress(KubeError):
                drop_namespace(self.s.sim, self.s.ns)


_RELEASES: dict[int, Release] = {}


def shared_release(sim: SimHandle, *, upgraded: bool) -> Release:
    """This cluster's shared ``Release`` if it is not deleted (nor, with ``upgraded=False``,
    upgraded yet); else a fresh one in its place."""
    shared = _RELEASES.get(id(sim))
    if shared is not None and shared.s.sim is not sim:  # a cluster of an earlier session part
        shared = None
    if shared is not None and not shared.deleted and (upgraded or shared.upgrade_seconds is None):
        return shared
    if shared is not None:
        shared.delete()
    shared = _RELEASES[id(sim)] = Release(sim)
    return shared


@pytest.fixture
def release(sim_module: SimHandle) -> Release:
    """The shared ``Release`` at any stage before its deletion (the leak test)."""
    return shared_release(sim_module, upgraded=True)


JOBS = "/apis/batch/v1/namespaces/{ns}/jobs"


LEASE_NAME = "nova-operator-leader"


def job_finished(job: JSON) -> str | None:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c["type"] in ("Complete", "Failed") and c["status"] == "True":
            return str(c["type"])
    return None
