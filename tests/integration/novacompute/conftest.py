"""The NovaCompute controller on the real API server, under the operator's RBAC, against a fake OpenStack.

The test plays every missing actor: it creates Nodes and the pool's pods directly (no
kubelet, no DaemonSet controller), writes the DaemonSet status, publishes the Nova's status
and compute contract as the Nova controller would, and registers compute services in the
fake Nova as nova-compute would on start.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import pathlib
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from simcluster import ControlPlane, FakeOpenStack

from nova_operator import conditions
from nova_operator.kube import errors
from nova_operator.kube.client import Kube
from nova_operator.kube.resources import (
    DAEMONSETS,
    EVENTS,
    NAMESPACES,
    NODES,
    NOVACOMPUTES,
    NOVAS,
    PODS,
    SECRETS,
)
from nova_operator.kube.types import Object
from nova_operator.metrics import Metrics
from nova_operator.models.crd import render_crds
from nova_operator.reconcilers.compute.context import ComputeIntervals, ComputeSettings
from nova_operator.reconcilers.compute.controller import factory_with
from nova_operator.renderers import compute_pool
from nova_operator.runtime.manager import Manager
from nova_operator.secret_refs import SecretRefPolicy
from nova_operator.settings import LeaderElectionSettings, ServerSettings, Settings, WatchSettings
from tests.integration.novacompute.passes import Stage

ROOT = pathlib.Path(__file__).resolve().parents[3]
PASSWORD = "service-user-pw"
SCALE = 0.02  # every requeue interval of the spec, times this: 15 s -> 0.3 s, 60 s -> 1.2 s
ZONE = "topology.kubernetes.io/zone"


class ScriptedOpenStack(FakeOpenStack):
    """The fake, with the calls that got an answer (a dropped connection's are left out)."""

    def calls_to(self, method: str, path: str) -> list[Any]:
        return [c for c in self.calls(method, path) if c.status != 0]


async def _install_crds(kube: Kube) -> None:
    from nova_operator.kube.resources import ResourceRef

    crds = ResourceRef(
        "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
    )
    for text in render_crds().values():
        body = yaml.safe_load(text)
        try:
            await kube.create(crds, body)
        except errors.Conflict:
            live = await kube.get(crds, body["metadata"]["name"])
            body["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
            await kube.replace(crds, body)
    for text in render_crds().values():
        name = yaml.safe_load(text)["metadata"]["name"]
        for _ in range(200):
            crd = await kube.get(crds, name)
            if any(
                c["type"] == "Established" and c["status"] == "True"
                for c in crd["status"].get("conditions", [])
            ):
                break
            await asyncio.sleep(0.05)


async def _apply_rbac(api: client.ApiClient) -> None:
    """config/rbac/*.yaml as admin (the operator's ServiceAccount, ClusterRole and binding)."""
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    for call in (lambda: core.create_namespace({"metadata": {"name": "nova-system"}}),):
        try:
            await call()
        except ApiException as exc:
            if exc.status != 409:
                raise
    for path in sorted((ROOT / "config" / "rbac").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        kind = doc.get("kind")
        try:
            if kind == "ServiceAccount":
                await core.create_namespaced_service_account(doc["metadata"]["namespace"], doc)
            elif kind == "ClusterRole":
                await rbac.create_cluster_role(doc)
            elif kind == "ClusterRoleBinding":
                await rbac.create_cluster_role_binding(doc)
        except ApiException as exc:
            if exc.status != 409:
                raise
            if kind == "ClusterRole":
                await rbac.replace_cluster_role(doc["metadata"]["name"], doc)


_READY: set[str] = set()


@pytest.fixture
async def admin(control_plane: ControlPlane, admin_api: client.ApiClient) -> AsyncIterator[Kube]:
    kube = await Kube.connect(kubeconfig=str(control_plane.kubeconfig), context="admin", metrics=Metrics())
    async with kube:
        if "setup" not in _READY:
            await _install_crds(kube)
            await _apply_rbac(admin_api)
            _READY.add("setup")
        yield kube


@pytest.fixture
async def fake() -> AsyncIterator[ScriptedOpenStack]:
    f = ScriptedOpenStack()
    await f.start()
    f.add_user("nova", PASSWORD)
    try:
        yield f
    finally:
        await f.stop()


class Env:
    """One test's world: admin access, the fake OpenStack and the running controller."""

    def __init__(self, admin: Kube, api: client.ApiClient, fake: ScriptedOpenStack, namespace: str) -> None:
        self.admin, self.api, self.fake, self.ns = admin, api, fake, namespace
        self.metrics = Metrics()
        self.manager: Manager | None = None
        self._task: asyncio.Task[None] | None = None
        self._nodes: list[str] = []
        self.secret_refs: SecretRefPolicy | None = None  # --secret-ref-label, when set before start
        self.intervals = ComputeIntervals().scaled(SCALE)  # the requeues, when set before start

    # -- actors --------------------------------------------------------------------------

    async def nova(self, name: str = "nova", *, keystone_url: str | None = None) -> None:
        """A Nova with an installed release and a published contract, and its service-user Secret
        (shared by every Nova of the test). Its Keystone is the fake's unless ``keystone_url``."""
        body = yaml.safe_load((ROOT / "config" / "samples" / "nova_minimal.yaml").read_text())
        body["metadata"] = {"name": name, "namespace": self.ns}
        body["spec"]["keystoneEndpoint"] = keystone_url or self.fake.keystone_url
        await self.admin.create(NOVAS, body, self.ns)
        with contextlib.suppress(errors.Conflict):
            await self.secret("nova-service-user", {"password": PASSWORD})
        await self.secret(
            f"{name}-compute-config",
            {
                "nova-compute.conf": "[DEFAULT]\ndebug = false\n",
                "transport_url": "rabbit://nova:pw@rabbitmq:5672/",
                "password": PASSWORD,
                "cell_name": "cell1",
            },
            labels={"app.kubernetes.io/component": "compute-config"},
        )
        # the Nova's Secrets step makes its digest key; the pool keys compute-config-hash with it
        await self.secret(f"{name}-digest-key", {"key": "0123456789abcdef" * 4})
        await self.admin.patch_status(
            NOVAS,
            name,
            {
                "status": {
                    "installedRelease": "2025.2",
                    "computeConfigSecretRef": {"name": f"{name}-compute-config"},
                }
            },
            self.ns,
        )

    async def secret(self, name: str, data: dict[str, str], labels: dict[str, str] | None = None) -> None:
        encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
        meta: Object = {"name": name, "namespace": self.ns}
        if labels:
            meta["labels"] = labels
        await self.admin.create(
            SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": encoded}, self.ns
        )

    def node_name(self, short: str) -> str:
        return f"{self.ns}-{short}"

    async def node(self, short: str, *, pool: str | None, zone: str | None) -> str:
        name = self.node_name(short)
        labels = {}
        if pool:
            labels["pool"] = pool
        if zone:
            labels[ZONE] = zone
        await self.admin.create(
            NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
        )
        self._nodes.append(name)
        return name

    async def relabel(self, short: str, pool: str | None) -> None:
        await self.admin.patch(NODES, self.node_name(short), {"metadata": {"labels": {"pool": pool}}})

    async def pool(self, name: str = "pool", *, selector: str = "a", nova: str = "nova", **spec: Any) -> None:
        await self.admin.create(
            NOVACOMPUTES,
            {
                "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
                "kind": "NovaCompute",
                "metadata": {"name": name, "namespace": self.ns},
                "spec": {"novaRef": {"name": nova}, "nodeSelector": {"pool": selector}, **spec},
            },
            self.ns,
        )

    async def pod(self, short: str, pool: str = "pool") -> None:
        """A pool pod on a node, as the DaemonSet controller and the scheduler would place it (the
        template's labels: the selector's and managed-by, which the operator's Pod informer selects)."""
        await self.admin.create(
            PODS,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{pool}-{short}",
                    "namespace": self.ns,
                    "labels": compute_pool.labels(pool),
                },
                "spec": {"nodeName": self.node_name(short), "containers": [{"name": "c", "image": "x"}]},
            },
            self.ns,
        )

    async def pod_ready(self, short: str, pool: str = "pool") -> None:
        """The kubelet's report: the pod's containers run (no probes), so the pod is Ready."""
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        ready = {"type": "Ready", "status": "True", "lastTransitionTime": now}
        await self.admin.patch_status(
            PODS, f"{pool}-{short}", {"status": {"phase": "Running", "conditions": [ready]}}, self.ns
        )

    async def pod_gone(self, short: str, pool: str = "pool") -> None:
        await client.CoreV1Api(self.api).delete_namespaced_pod(
            f"{pool}-{short}", self.ns, grace_period_seconds=0
        )

    async def daemonset_rolled_out(self, pool: str = "pool", count: int | None = None) -> None:
        """Play the DaemonSet controller: every scheduled pod updated and ready."""
        ds = await self.until(lambda: self.get(DAEMONSETS, f"{pool}-nova-compute"))
        n = (
            count
            if count is not None
            else len(
                ds["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
                    "requiredDuringSchedulingIgnoredDuringExecution"
                ]["nodeSelectorTerms"]
            )
        )
        await self.admin.patch_status(
            DAEMONSETS,
            ds["metadata"]["name"],
            {
                "status": {
                    "observedGeneration": ds["metadata"]["generation"],
                    "desiredNumberScheduled": n,
                    "currentNumberScheduled": n,
                    "updatedNumberScheduled": n,
                    "numberReady": n,
                    "numberMisscheduled": 0,
                }
            },
            self.ns,
        )

    # -- reads ---------------------------------------------------------------------------

    async def get(self, ref: Any, name: str) -> Object | None:
        try:
            return await self.admin.get(ref, name, self.ns if ref.namespaced else None)
        except errors.NotFound:
            return None

    async def cr(self, name: str = "pool") -> Object:
        obj = await self.get(NOVACOMPUTES, name)
        assert obj is not None
        return obj

    async def entry(self, short: str, pool: str = "pool") -> Object | None:
        nodes = ((await self.cr(pool)).get("status") or {}).get("nodes") or []
        return next((e for e in nodes if e["name"] == self.node_name(short)), None)

    async def condition(self, cond_type: str, pool: str = "pool") -> Object | None:
        conds = ((await self.cr(pool)).get("status") or {}).get("conditions") or []
        found = conditions.find(conds, cond_type)
        return dict(found) if found is not None else None

    async def events(self, reason: str | None = None) -> list[Object]:
        items = (await self.admin.list(EVENTS, self.ns))["items"]
        return [e for e in items if reason is None or e["reason"] == reason]

    async def until(self, probe: Callable[[], Awaitable[Any]], within: float = 30.0) -> Any:
        """Poll ``probe`` until it returns something truthy."""
        async with asyncio.timeout(within):
            while True:
                value = await probe()
                if value:
                    return value
                await asyncio.sleep(0.05)

    async def settle(self, seconds: float = 2.0) -> None:
        """Let the controller run a few polls (60 s, 30 s and 10 s scaled)."""
        await asyncio.sleep(seconds)

    # -- the controller ------------------------------------------------------------------

    async def start(self, control_plane: ControlPlane) -> None:
        kube = await Kube.connect(
            kubeconfig=str(control_plane.kubeconfig), context="operator", metrics=self.metrics
        )
        settings = Settings(
            watch=WatchSettings(
                namespaces=(self.ns,),
                backoff_initial=0.05,
                backoff_max=0.5,
                inactivity_timeout=20,
                resync_period=None,
                sync_timeout=20,
            ),
            leader_election=LeaderElectionSettings(enabled=False),
            servers=ServerSettings(metrics_bind_address="0", health_probe_bind_address="0"),
            shutdown_timeout=5,
        )
        self._kube = kube
        self.manager = Manager(kube, settings)
        compute = ComputeSettings(
            nova_api_url=lambda _nova, _ns: self.fake.nova_url,
            request_timeout=2.0,
            intervals=self.intervals,
            secret_refs=self.secret_refs,
        )
        self.manager.add_controller(factory_with(compute)(self.manager))
        self._task = asyncio.create_task(self.manager.run(), name="novacompute manager")

    async def stop(self) -> None:
        if self.manager is not None and self._task is not None:
            self.manager.stop()
            await asyncio.wait_for(self._task, 15)
            await self._kube.close()
        for name in self._nodes:
            with contextlib.suppress(errors.NotFound):
                await self.admin.delete(NODES, name)

    def step_count(self, step: str) -> float:
        return _sample(self.metrics, "nova_operator_reconcile_duration_seconds_count", sub_reconciler=step)

    def step_errors(self, step: str, cond: str) -> float:
        return _sample(
            self.metrics, "nova_operator_reconcile_errors_total", sub_reconciler=step, condition_type=cond
        )


def _sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return float(value) if value is not None else -1.0


@pytest.fixture
async def env(
    control_plane: ControlPlane,
    admin: Kube,
    admin_api: client.ApiClient,
    fake: ScriptedOpenStack,
    namespace: str,
) -> AsyncIterator[Env]:
    e = Env(admin, admin_api, fake, namespace)
    await e.start(control_plane)
    try:
        yield e
    finally:
        await e.stop()


@pytest.fixture
async def stage(admin: Kube, namespace: str) -> AsyncIterator[Stage]:
    """Step tests: the namespace to store a pool's inputs in and run single steps over (``passes.py``)."""
    s = Stage(admin, namespace)
    try:
        yield s
    finally:
        await s.clear()


__all__ = ["NAMESPACES", "Env", "ScriptedOpenStack", "Stage"]
