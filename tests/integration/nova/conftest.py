"""The Nova controller on the real API server: CRDs and RBAC once per session, an operator per test.

The operator runs under its own token (kubeconfig context ``operator``) with the RBAC that
``nova_operator.kube.resources.render_rbac()`` generates (what ``config/rbac/`` holds). The
test plays every controller a bare control plane lacks, in ``Simulator``: the MariaDB
operator (Ready on the MariaDB and on every Database/User/Grant, then a nudge of the Nova,
which polls those every 30 s in production), the Deployment controller (status of an
available rollout), the Job controller (a succeeded pod carrying the cells report, then
Complete with the 1.33+ success criteria) and a Gateway (Accepted on every route).
"""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from simcluster import ControlPlane

from nova_operator.kube import Kube
from nova_operator.kube.errors import Conflict, KubeError, NotFound
from nova_operator.kube.resources import (
    DATABASES,
    DEPLOYMENTS,
    GRANTS,
    HTTPROUTES,
    JOBS,
    MARIADBS,
    NOVAS,
    PODS,
    USERS,
    ResourceRef,
    render_rbac,
)
from nova_operator.kube.types import Object
from nova_operator.metrics import Metrics
from nova_operator.reconcilers.nova.context import NovaOptions
from nova_operator.reconcilers.nova.controller import RBAC_NEEDS, make_controller_factory
from nova_operator.runtime.controller import Controller
from nova_operator.runtime.manager import Manager
from nova_operator.runtime.request import Request
from nova_operator.settings import LeaderElectionSettings, ServerSettings, Settings, WatchSettings
from tests.integration.nova.requests import Recorder

REPO = pathlib.Path(__file__).resolve().parents[3]
CRDS = ResourceRef(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
NAMESPACES = ResourceRef("", "v1", "namespaces", "Namespace", False)
RBAC = {
    "ServiceAccount": ResourceRef("", "v1", "serviceaccounts", "ServiceAccount"),
    "ClusterRole": ResourceRef("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    "ClusterRoleBinding": ResourceRef(
        "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False
    ),
}
CELLS_REPORT = "cell0=00000000-0000-0000-0000-000000000000\ncell1=7c1a3f2e-5b4d-4e6f-8a9b-0c1d2e3f4a5b\n"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _crd_documents() -> list[Object]:
    files = sorted((REPO / "config" / "crd").glob("*.yaml"))
    files += [REPO / "tools/simcluster/crds/mariadb-operator.yaml"]
    files += [REPO / "tools/simcluster/crds/rabbitmq-cluster-operator.yaml"]
    files += sorted((REPO / "tools/simcluster/crds/gateway-api-v1.6.3").glob("*.yaml"))
    docs = []
    for f in files:
        docs += [
            d for d in yaml.safe_load_all(f.read_text()) if d and d.get("kind") == "CustomResourceDefinition"
        ]
    return docs


async def _install(plane: ControlPlane) -> None:
    async with await Kube.connect(
        kubeconfig=str(plane.kubeconfig), context="admin", metrics=Metrics()
    ) as kube:
        docs = _crd_documents()
        for doc in docs:
            with contextlib.suppress(Conflict):
                await kube.create(CRDS, doc)
        for doc in docs:
            for _ in range(200):
                crd = await kube.get(CRDS, doc["metadata"]["name"])
                conds = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or []}
                if conds.get("Established") == "True":
                    break
                await asyncio.sleep(0.05)
        with contextlib.suppress(Conflict):
            await kube.create(
                NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "nova-system"}}
            )
        for text in render_rbac().values():
            doc = yaml.safe_load(text.split("\n", 1)[1])
            if doc.get("kind") in RBAC:
                ns = (doc.get("metadata") or {}).get("namespace")
                await kube.apply(RBAC[doc["kind"]], doc, field_manager="nova-tests", namespace=ns)


@pytest.fixture(scope="session")
def nova_cluster(control_plane: ControlPlane) -> ControlPlane:
    """CRDs (Nova, NovaCompute, MariaDB, RabbitMQ, Gateway API) and the operator's RBAC, installed once."""
    asyncio.run(_install(control_plane))
    return control_plane


@pytest.fixture
async def admin(nova_cluster: ControlPlane) -> AsyncIterator[Kube]:
    """Plays the user and the missing controllers; its requests are not counted as the operator's."""
    async with await Kube.connect(
        kubeconfig=str(nova_cluster.kubeconfig), context="admin", metrics=Metrics()
    ) as kube:
        kube.timeout = 10
        yield kube


@pytest.fixture(autouse=True)
async def _novas_leave_with_their_test(nova_cluster: ControlPlane, namespace: str) -> AsyncIterator[None]:
    """A test's Novas are deleted when it ends, their finalizers released first.

    The bare control plane has no namespace controller: the test's namespace is deleted but its
    objects stay for the session. Every later test that runs a cluster-wide operator would then
    reconcile all of them first (one pass each, fair or not) before its own Nova, and its waits
    would grow with the number of tests before it (test_secret_scope timed out at 90 s once 100
    more tests created Novas on the real API server).
    """
    yield
    async with await Kube.connect(
        kubeconfig=str(nova_cluster.kubeconfig), context="admin", metrics=Metrics()
    ) as kube:  # its own client: a test may replace the admin fixture with another kind
        try:
            novas = (await kube.list(NOVAS, namespace)).get("items") or []
        except KubeError:
            return
        for nova in novas:
            name = nova["metadata"]["name"]
            with contextlib.suppress(KubeError):
                if nova["metadata"].get("finalizers"):
                    await kube.patch(NOVAS, name, {"metadata": {"finalizers": None}}, namespace)
                await kube.delete(NOVAS, name, namespace)


async def ok_probe(url: str, limit: float) -> int:
    return 200


@dataclass
class Operator:
    kube: Kube
    manager: Manager
    controller: Controller
    namespace: str

    @property
    def metrics(self) -> Metrics:
        return self.kube.metrics

    def writes(self) -> int:
        from nova_operator.metrics import WRITE_VERBS

        return self.metrics.api_request_count(WRITE_VERBS)

    async def force_pass(self, name: str) -> None:
        await self.controller.reconciler.reconcile(Request(self.namespace, name))


@pytest.fixture
async def operator(
    nova_cluster: ControlPlane, namespace: str, request: pytest.FixtureRequest
) -> AsyncIterator[Operator]:
    """The Nova controller in-process, under the operator's own token, watching the test namespace.

    Indirect parametrisation (``request.param``) overrides fields of its ``NovaOptions``; the
    ServiceRecords step (``stale_services``) is off by default here."""
    kube = await Kube.connect(kubeconfig=str(nova_cluster.kubeconfig), context="operator", metrics=Metrics())
    kube.timeout = 10  # a request stuck behind a re-initialising watch cache fails fast and is retried
    settings = Settings(
        watch=WatchSettings(
            namespaces=(namespace,),
            backoff_initial=0.05,
            backoff_max=0.5,
            inactivity_timeout=30,
            resync_period=None,
            sync_timeout=20,
        ),
        leader_election=LeaderElectionSettings(enabled=False),
        servers=ServerSettings(metrics_bind_address="0", health_probe_bind_address="0"),
        shutdown_timeout=5,
    )
    manager = Manager(kube, settings)
    # No compute API runs in this tier: the ServiceRecords step is off unless a test turns it on
    # (``test_service_records.py``, against the fake compute API).
    overrides = {"stale_services": False, **getattr(request, "param", {})}
    options = NovaOptions(operator_namespace="nova-system", prober=ok_probe, **overrides)
    controller = make_controller_factory(options)(manager)
    task = asyncio.create_task(manager.run(), name="manager")
    try:
        async with asyncio.timeout(20):
            await asyncio.gather(*(inf.wait_for_sync() for inf in manager.informers))
        yield Operator(kube, manager, controller, namespace)
    finally:
        manager.stop()
        await task
        await kube.close()
    used = used_verbs(kube.metrics)
    assert not [u for u in used if u[2] == "403"], used
    beyond = sorted({(r, v) for v, r, _ in used if v not in RBAC_NEEDS.get(r, ())})
    assert beyond == [], f"verbs sent but not declared in RBAC_NEEDS: {beyond}"


def used_verbs(metrics: Metrics) -> list[tuple[str, str, str]]:
    """(RBAC verb, resource, code) of every request the operator sent (apply is a patch)."""
    found = []
    for metric in metrics.api_requests.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total") and sample.value:
                verb = {"apply": "patch", "update": "update"}.get(
                    sample.labels["verb"], sample.labels["verb"]
                )
                found.append((verb, sample.labels["resource"], sample.labels["code"]))
    return found


# -- the test plays the missing controllers ------------------------------------------------------


def ready_condition() -> list[Object]:
    return [
        {
            "type": "Ready",
            "status": "True",
            "reason": "Ready",
            "message": "ready",
            "lastTransitionTime": now(),
        }
    ]


@dataclass
class Simulator:
    """Polls the namespace and writes the status real controllers would write (as admin)."""

    admin: Kube
    operator: Operator
    namespace: str
    cells_report: str = CELLS_REPORT
    hold_jobs: bool = False
    fail_jobs: bool = False
    seen_jobs: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)

    async def step(self) -> None:
        ns = self.namespace
        nudge = False
        for ref in (MARIADBS, DATABASES, USERS, GRANTS):
            for obj in (await self.admin.list(ref, ns)).get("items") or []:
                conds = (obj.get("status") or {}).get("conditions") or []
                if not any(c["type"] == "Ready" and c["status"] == "True" for c in conds):
                    await self.admin.patch_status(
                        ref, obj["metadata"]["name"], {"status": {"conditions": ready_condition()}}, ns
                    )
                    nudge = True
        if nudge:  # in production the Nova polls Database/User/Grant every 30 s
            for nova in (await self.admin.list(NOVAS, ns)).get("items") or []:
                self.operator.controller.enqueue(Request(ns, nova["metadata"]["name"]))
        for dep in (await self.admin.list(DEPLOYMENTS, ns)).get("items") or []:
            await self._deployment(dep)
        if not self.hold_jobs:
            for job in (await self.admin.list(JOBS, ns)).get("items") or []:
                await self._job(job)
        for route in (await self.admin.list(HTTPROUTES, ns)).get("items") or []:
            await self._route(route)

    async def _deployment(self, dep: Object) -> None:
        gen = dep["metadata"]["generation"]
        status = dep.get("status") or {}
        replicas = dep["spec"].get("replicas", 1)
        if status.get("observedGeneration") == gen and status.get("readyReplicas") == replicas:
            return
        body = {
            "observedGeneration": gen,
            "replicas": replicas,
            "readyReplicas": replicas,
            "updatedReplicas": replicas,
            "availableReplicas": replicas,
            "conditions": [
                {
                    "type": "Available",
                    "status": "True",
                    "reason": "MinimumReplicasAvailable",
                    "message": "ok",
                    "lastTransitionTime": now(),
                    "lastUpdateTime": now(),
                }
            ],
        }
        await self.admin.patch_status(DEPLOYMENTS, dep["metadata"]["name"], {"status": body}, self.namespace)

    async def _job(self, job: Object) -> None:
        name, uid = job["metadata"]["name"], job["metadata"]["uid"]
        if uid in self.seen_jobs or (job.get("status") or {}).get("conditions"):
            return
        self.seen_jobs.add(uid)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{uid[:5]}",
                "namespace": self.namespace,
                "labels": {"batch.kubernetes.io/job-name": name},
            },
            "spec": {"containers": [{"name": "c", "image": "x"}], "restartPolicy": "Never"},
        }
        await self.admin.create(PODS, pod, self.namespace)
        terminated: Object = {
            "exitCode": 1 if self.fail_jobs else 0,
            "reason": "Completed",
            "message": self.cells_report,
        }
        await self.admin.patch_status(
            PODS,
            pod["metadata"]["name"],
            {
                "status": {
                    "phase": "Failed" if self.fail_jobs else "Succeeded",
                    "containerStatuses": [
                        {
                            "name": "c",
                            "image": "x",
                            "imageID": "",
                            "ready": False,
                            "restartCount": 0,
                            "state": {"terminated": terminated},
                        }
                    ],
                }
            },
            self.namespace,
        )
        t = now()
        if self.fail_jobs:
            conditions = [
                {
                    "type": "FailureTarget",
                    "status": "True",
                    "reason": "BackoffLimitExceeded",
                    "message": "x",
                    "lastTransitionTime": t,
                    "lastProbeTime": t,
                },
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "BackoffLimitExceeded",
                    "message": "Job has reached the specified backoff limit",
                    "lastTransitionTime": t,
                    "lastProbeTime": t,
                },
            ]
            status = {"startTime": t, "failed": 5, "conditions": conditions}
        else:
            conditions = [
                {
                    "type": "SuccessCriteriaMet",
                    "status": "True",
                    "reason": "CompletionsReached",
                    "message": "ok",
                    "lastTransitionTime": t,
                    "lastProbeTime": t,
                },
                {
                    "type": "Complete",
                    "status": "True",
                    "reason": "CompletionsReached",
                    "message": "ok",
                    "lastTransitionTime": t,
                    "lastProbeTime": t,
                },
            ]
            status = {"startTime": t, "completionTime": t, "succeeded": 1, "conditions": conditions}
        await self.admin.patch_status(JOBS, name, {"status": status}, self.namespace)

    async def _route(self, route: Object) -> None:
        parents = (route.get("status") or {}).get("parents") or []
        parent = route["spec"]["parentRefs"][0]
        if parents and parents[0].get("parentRef") == parent:
            return  # accepted for its current parent (a changed parentRef is accepted anew)
        status = {
            "parents": [
                {
                    "parentRef": parent,
                    "controllerName": "example.org/gateway",
                    "conditions": [
                        {
                            "type": "Accepted",
                            "status": "True",
                            "reason": "Accepted",
                            "message": "ok",
                            "observedGeneration": route["metadata"]["generation"],
                            "lastTransitionTime": now(),
                        }
                    ],
                }
            ]
        }
        await self.admin.patch_status(
            HTTPROUTES, route["metadata"]["name"], {"status": status}, self.namespace
        )

    async def run(self) -> None:
        while True:
            try:
                await self.step()
            except (Conflict, NotFound):
                pass
            except Exception as exc:
                self.errors.append(repr(exc))
                print("simulator:", repr(exc))
            await asyncio.sleep(0.1)


@pytest.fixture
async def simulator(admin: Kube, operator: Operator, namespace: str) -> AsyncIterator[Simulator]:
    sim = Simulator(admin, operator, namespace)
    task = asyncio.create_task(sim.run(), name="simulator")
    try:
        yield sim
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def nova_ready_gauge(operator: Operator, ns: str, name: str = "nova") -> Callable[[], Any]:
    """An async read of ``nova_operator_nova_ready`` for ``wait_for`` (it is set after the status write)."""

    async def read() -> float | None:
        return operator.metrics.registry.get_sample_value(
            "nova_operator_nova_ready", {"nova": name, "namespace": ns}
        )

    return read


async def wait_for(get: Callable[[], Any], predicate: Callable[[Any], bool], within: float = 30) -> Any:
    """Poll ``get`` (an async read) until ``predicate`` holds; a timeout fails with the last value seen."""
    last: Any = None
    try:
        async with asyncio.timeout(within):
            while True:
                last = await get()
                if predicate(last):
                    return last
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"condition not reached within {within} s; last value: {last!r}") from None


STORE_CRDS = pathlib.Path(__file__).parent / "crds" / "external-secrets-stores.yaml"


@pytest.fixture
async def external_secrets(admin: Kube) -> None:
    """The two store kinds, served before the operator starts (its probe and informers see them)."""
    for doc in yaml.safe_load_all(STORE_CRDS.read_text()):
        with contextlib.suppress(Conflict):
            await admin.create(CRDS, doc)
        await wait_for(
            lambda name=doc["metadata"]["name"]: admin.get(CRDS, name),
            lambda crd: any(
                c["type"] == "Established" and c["status"] == "True"
                for c in (crd.get("status") or {}).get("conditions") or []
            ),
            within=20,
        )


@pytest.fixture
def ours(admin: Kube) -> Recorder:
    """The operator's requests, recorded apart from the admin's (who plays the user)."""
    return Recorder.of(admin)


@pytest.fixture
async def cluster(admin: Kube) -> AsyncIterator[list[tuple[ResourceRef, str]]]:
    """Cluster-scoped objects a test makes (``reasons_kit.make``): removed after it, the control plane
    outlives it."""
    made: list[tuple[ResourceRef, str]] = []
    yield made
    for ref, name in made:
        await admin.delete(ref, name)
