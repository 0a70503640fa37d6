"""Release upgrades on the real API server: the Nova controller under the operator's RBAC, the test
playing the Job and Deployment controllers one object at a time.

The session install (CRDs, RBAC), the ``admin`` client, the in-process ``operator`` and the
base ``Simulator`` come from ``tests/integration/nova/conftest.py`` (loaded by path: the test
tree has no packages). ``UpgradeSimulator`` adds per-object control: Jobs and Deployments can
be held (left running / not rolled out), a Job can be failed, and each Job's pod carries its
own termination message (the pre-flight line for the expand Job).
"""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import pathlib
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from nova_operator import conditions
from nova_operator.kube import Kube
from nova_operator.kube.resources import DEPLOYMENTS, EVENTS, JOBS, MARIADBS, NOVAS, PODS, SECRETS
from nova_operator.kube.types import Object


def _load_nova_conftest() -> Any:
    name = "nova_integration_conftest"
    if name in sys.modules:
        return sys.modules[name]
    path = pathlib.Path(__file__).resolve().parents[1] / "nova" / "conftest.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_nova = _load_nova_conftest()
nova_cluster = _nova.nova_cluster  # fixtures, re-exported so pytest registers them here
admin = _nova.admin
operator = _nova.operator
Operator = _nova.Operator
Simulator = _nova.Simulator
wait_for = _nova.wait_for
ready_condition = _nova.ready_condition
now = _nova.now

OLD, NEW = "2026.1", "2026.2"
IMAGE = "ghcr.io/c5c3/nova"
ROLES = ("nova-conductor", "nova-scheduler", "nova-metadata", "nova-novncproxy", "nova")  # roll order
PHASE_JOBS = ("nova-db-expand", "nova-db-migrate", "nova-db-contract")
SECRETS_DATA = {
    "api-db": {"username": "nova_api", "password": "api-db-password"},
    "cell-db": {"username": "nova", "password": "cell-db-password"},
    "service-user": {"password": "service-user-password"},
    "metadata-proxy": {"shared_secret": "metadata-shared-secret"},
    "bus": {"transport_url": "rabbit://nova:bus-password@rabbitmq.example.org:5672/"},
}


def check_line(code: int) -> str:
    return f"nova-status upgrade check exit {code}\n"


@dataclass
class UpgradeSimulator(Simulator):  # type: ignore[misc,valid-type]
    held_jobs: set[str] = field(default_factory=set)
    failing_jobs: set[str] = field(default_factory=set)
    messages: dict[str, str] = field(default_factory=dict)
    held_deployments: set[str] = field(default_factory=set)

    async def _deployment(self, dep: Object) -> None:
        if dep["metadata"]["name"] in self.held_deployments:
            return
        await super()._deployment(dep)

    async def _job(self, job: Object) -> None:
        name = job["metadata"]["name"]
        if name in self.held_jobs:
            return
        self.fail_jobs = name in self.failing_jobs
        self.cells_report = self.messages.get(name, _nova.CELLS_REPORT)
        await super()._job(job)


@pytest.fixture
async def simulator(admin: Kube, operator: Any, namespace: str) -> AsyncIterator[UpgradeSimulator]:
    sim = UpgradeSimulator(admin, operator, namespace)
    task = asyncio.create_task(sim.run(), name="simulator")
    try:
        yield sim
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


# -- the Nova and its inputs ----------------------------------------------------------------------


def nova_body(release: str = OLD, tag: str | None = None) -> Object:
    return {
        "apiVersion": NOVAS.api_version,
        "kind": "Nova",
        "metadata": {"name": "nova"},
        "spec": {
            "openStackRelease": release,
            "image": {"repository": IMAGE, "tag": tag or release},
            "apiDatabase": {
                "clusterRef": {"name": "mariadb"},
                "database": "nova_api",
                "secretRef": {"name": "api-db"},
            },
            "database": {
                "clusterRef": {"name": "mariadb"},
                "database": "nova",
                "secretRef": {"name": "cell-db"},
            },
            "cache": {"servers": ["memcached:11211"]},
            "messaging": {"secretRef": {"name": "bus"}},
            "keystoneEndpoint": "http://keystone.example.org:5000/v3",
            "serviceUser": {"secretRef": {"name": "service-user"}},
            "metadata": {"sharedSecretRef": {"name": "metadata-proxy"}},
            "api": {"deployment": {"replicas": 1}},
        },
    }


async def create_inputs(admin: Kube, ns: str) -> None:
    for name, data in SECRETS_DATA.items():
        encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
        await admin.create(
            SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": encoded}, ns
        )
    await admin.create(
        MARIADBS,
        {"apiVersion": MARIADBS.api_version, "kind": "MariaDB", "metadata": {"name": "mariadb"}, "spec": {}},
        ns,
    )
    await admin.patch_status(MARIADBS, "mariadb", {"status": {"conditions": ready_condition()}}, ns)


def cond(nova: Object, cond_type: str) -> Object:
    found = conditions.find((nova.get("status") or {}).get("conditions") or [], cond_type)
    return dict(found) if found is not None else {}


def db_reason(nova: Object) -> str:
    return str(cond(nova, "DatabaseReady").get("reason", ""))


def is_ready(nova: Object) -> bool:
    return cond(nova, "Ready").get("status") == "True"


@dataclass
class Cluster:
    """The test's view of one namespace: reads as admin, edits of the Nova, what the operator left."""

    admin: Kube
    ns: str
    sim: UpgradeSimulator

    async def nova(self) -> Object:
        return await self.admin.get(NOVAS, "nova", self.ns)

    async def until(self, predicate: Callable[[Object], bool], within: float = 30) -> Object:
        return await wait_for(self.nova, predicate, within)

    async def edit(self, release: str, tag: str | None = None) -> Object:
        patch = {"spec": {"openStackRelease": release, "image": {"tag": tag or release}}}
        return await self.admin.patch(NOVAS, "nova", patch, self.ns)

    async def ready(self) -> Object:
        await self.admin.create(NOVAS, nova_body(), self.ns)
        return await self.until(lambda n: is_ready(n) and n["status"].get("installedRelease") == OLD, 60)

    async def images(self) -> dict[str, str]:
        found = {}
        for name in ROLES:
            dep = await self.admin.get(DEPLOYMENTS, name, self.ns)
            found[name] = dep["spec"]["template"]["spec"]["containers"][0]["image"]
        return found

    async def jobs(self) -> dict[str, Object]:
        items = (await self.admin.list(JOBS, self.ns)).get("items") or []
        return {j["metadata"]["name"]: j for j in items if not j["metadata"].get("deletionTimestamp")}

    async def wait_jobs(self, names: set[str], within: float = 30) -> dict[str, Object]:
        return dict(await wait_for(self.jobs, lambda js: names <= set(js), within))

    async def wait_image(self, role: str, image: str, within: float = 30) -> dict[str, str]:
        return dict(await wait_for(self.images, lambda imgs: imgs[role] == image, within))

    async def job_names(self) -> set[str]:
        return set(await self.jobs())

    async def events(self) -> list[tuple[str, str, str]]:
        items = (await self.admin.list(EVENTS, self.ns)).get("items") or []
        items.sort(
            key=lambda e: (e.get("firstTimestamp") or "", e["metadata"].get("creationTimestamp") or "")
        )
        return [
            (e["type"], e["reason"], e["message"]) for e in items if e["involvedObject"].get("kind") == "Nova"
        ]

    async def event(self, reason: str, within: float = 15) -> tuple[str, str, str]:
        found = await wait_for(self.events, lambda es: any(e[1] == reason for e in es), within)
        return next(e for e in found if e[1] == reason)

    async def delete_job(self, name: str) -> None:
        await self.admin.delete(JOBS, name, self.ns, propagation="Background")
        for pod in (
            await self.admin.list(PODS, self.ns, label_selector=f"batch.kubernetes.io/job-name={name}")
        )["items"]:
            await self.admin.delete(PODS, pod["metadata"]["name"], self.ns)


@pytest.fixture
async def cluster(admin: Kube, simulator: UpgradeSimulator, namespace: str) -> Cluster:
    await create_inputs(admin, namespace)
    return Cluster(admin, namespace, simulator)
