"""Issue 13 item 2: Secrets are listed, watched and read only in namespaces that hold a Nova.

The operator runs cluster-wide (no ``watch.namespaces``) as a user that has the rendered
``nova-operator`` ClusterRole cluster-wide but the rendered ``nova-operator-secrets`` role only
through a RoleBinding in the tenant namespace. On 3c18ab1 the cluster-wide Secret informer
never synced under such RBAC (403). Here the Nova becomes Ready, every Secret request names
the tenant namespace, the Secrets of another namespace are never cached, and a converged pass
sends no Secret GET.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
import yaml
from simcluster import ControlPlane

from nova_operator.kube import Kube
from nova_operator.kube.resources import NAMESPACES, NOVAS, SECRETS, ResourceRef, render_rbac
from nova_operator.metrics import Metrics
from nova_operator.reconcilers.nova.context import NovaOptions
from nova_operator.reconcilers.nova.controller import make_controller_factory
from nova_operator.runtime.manager import Manager
from nova_operator.runtime.request import Request
from nova_operator.settings import LeaderElectionSettings, ServerSettings, Settings, WatchSettings
from tests.integration.nova.inputs import RecordingKube, create_inputs, is_ready, nova_body, secret

from .conftest import Operator, Simulator, ok_probe, wait_for  # type: ignore[import-not-found]

pytestmark = pytest.mark.integration

CLUSTER_ROLES = ResourceRef("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False)
CLUSTER_ROLE_BINDINGS = ResourceRef(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False
)
ROLE_BINDINGS = ResourceRef("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")


def _role(file: str, name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(render_rbac()[file])
    doc["metadata"] = {"name": name}
    return doc


def _subject(user: str) -> list[Mapping[str, str]]:
    return [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}]


@pytest.fixture
async def tenant_operator(
    nova_cluster: ControlPlane, admin: Kube, namespace: str
) -> AsyncIterator[tuple[Operator, RecordingKube]]:
    """The Nova controller, cluster-wide, as a user that may touch Secrets in ``namespace`` only."""
    tag = uuid.uuid4().hex[:8]
    user = f"scoped-operator-{tag}"
    cluster_role, secrets_role = f"nova-operator-{tag}", f"nova-operator-secrets-{tag}"
    await admin.create(CLUSTER_ROLES, _role("role.yaml", cluster_role))
    await admin.create(CLUSTER_ROLES, _role("secrets_role.yaml", secrets_role))
    rbac = "rbac.authorization.k8s.io"
    await admin.create(
        CLUSTER_ROLE_BINDINGS,
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": cluster_role},
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": cluster_role},
            "subjects": _subject(user),
        },
    )
    await admin.create(
        ROLE_BINDINGS,
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "RoleBinding",
            "metadata": {"name": secrets_role},
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": secrets_role},
            "subjects": _subject(user),
        },
        namespace,
    )
    kube = await RecordingKube.connect(
        kubeconfig=str(nova_cluster.kubeconfig), context="admin", metrics=Metrics()
    )
    kube.sent = []
    kube._api.set_default_header("Impersonate-User", user)
    kube.timeout = 10
    settings = Settings(
        watch=WatchSettings(backoff_initial=0.05, backoff_max=0.5, resync_period=None, sync_timeout=20),
        leader_election=LeaderElectionSettings(enabled=False),
        servers=ServerSettings(metrics_bind_address="0", health_probe_bind_address="0"),
        shutdown_timeout=5,
    )
    manager = Manager(kube, settings)
    controller = make_controller_factory(
        NovaOptions(operator_namespace="nova-system", prober=ok_probe, stale_services=False)
    )(manager)
    task = asyncio.create_task(manager.run(), name="manager")
    try:
        async with asyncio.timeout(20):
            await asyncio.gather(*(inf.wait_for_sync() for inf in manager.informers))
        yield Operator(kube, manager, controller, namespace), kube
    finally:
        manager.stop()
        await task
        await kube.close()


async def test_secrets_are_cached_only_where_a_nova_lives(
    admin: Kube, tenant_operator: tuple[Operator, RecordingKube], namespace: str
) -> None:
    operator, kube = tenant_operator
    other = f"t-{uuid.uuid4().hex[:10]}"
    await admin.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}})
    await admin.create(SECRETS, secret("unrelated", {"password": "other-tenant-password"}), other)
    await create_inputs(admin, namespace)
    sim = Simulator(admin, operator, namespace)
    sim_task = asyncio.create_task(sim.run())
    try:
        await admin.create(NOVAS, nova_body(), namespace)
        await wait_for(lambda: admin.get(NOVAS, "nova", namespace), is_ready, within=90)
        sim.hold_jobs = True

        # Other tests' Novas (other namespaces, this session) are seen too: their namespaces are
        # covered (and refused, 403: no RoleBinding there). A namespace without a Nova never is.
        secret_paths = [(m, p) for m, p in kube.sent if "/secrets" in p]
        assert secret_paths, "the operator sent no Secret request at all"
        assert [p for _, p in secret_paths if p.startswith("/api/v1/secrets")] == []
        with_nova = {n["metadata"]["namespace"] for n in (await admin.list(NOVAS))["items"]}
        seen = {p.split("/")[4] for _, p in secret_paths}
        assert other not in seen
        assert seen <= with_nova, seen - with_nova
        cache = operator.controller.reconciler.caches[SECRETS]  # type: ignore[attr-defined]
        assert cache.covers(namespace)
        assert not cache.covers(other)
        assert {k.namespace for k in cache.list_keys()} == {namespace}  # only here may it list

        # steady state: converged passes read every Secret from the cache
        before = len(kube.sent)
        for _ in range(10):
            await operator.controller.reconciler.reconcile(Request(namespace, "nova"))
        passes = [(m, p) for m, p in kube.sent[before:] if f"/namespaces/{namespace}/" in p]
        assert [(m, p) for m, p in passes if "/secrets" in p] == []
        assert [(m, p) for m, p in passes if m != "GET" and "/events" not in p] == []
        print(f"10 converged passes sent {len(passes)} requests: {sorted(set(passes))}")

        # the last Nova of the namespace goes: its Secrets leave the cache
        await admin.delete(NOVAS, "nova", namespace)
        await wait_for(lambda: asyncio.sleep(0, cache.covers(namespace)), lambda c: not c, within=60)
        assert cache.list_keys(namespace) == []
    finally:
        sim_task.cancel()
        await asyncio.gather(sim_task, return_exceptions=True)
