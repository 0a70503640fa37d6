"""``status.services`` (issue 38 item 8): Nova's own view of its services on the CR, from the look the
ServiceRecords step already makes, and ``kubectl get nova``'s ``UP`` and ``DOWN`` columns.

The fake compute API lists a pool's nova-compute records (one down), a conductor and a scheduler; the
Nova reaches Ready, its first look fills the status, and the real kubectl prints the two counts.
A record that goes down shows at the next look (a role's Deployment changing starts one).
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from typing import Any

import pytest
from simcluster import ControlPlane, FakeOpenStack
from simcluster.platform.installtools import tool

from nova_operator.kube import Kube
from nova_operator.kube.resources import DEPLOYMENTS, NOVAS
from nova_operator.kube.types import Object
from tests.integration.nova import fake_openstack
from tests.integration.nova.inputs import create_inputs, is_ready, nova_body

from .conftest import Operator, Simulator, wait_for  # type: ignore[import-not-found]

pytestmark = pytest.mark.parametrize("operator", [fake_openstack.STALE_SERVICES], indirect=True)


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenStack]:
    async with fake_openstack.running() as f:
        yield f


async def _services(admin: Kube, ns: str) -> Any:
    return ((await admin.get(NOVAS, "nova", ns)).get("status") or {}).get("services")


def kubectl_argv(plane: ControlPlane) -> list[str]:
    return [str(tool("kubectl")), "--kubeconfig", str(plane.kubeconfig), "--context", "admin"]


def _kubectl_get(plane: ControlPlane, ns: str) -> dict[str, str]:
    """``kubectl get nova nova`` as a user sees it: its columns by header."""
    out = subprocess.run(
        [*kubectl_argv(plane), "get", "nova", "nova", "-n", ns],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.splitlines()
    header, row = out[0].split(), out[1].split()
    return dict(zip(header, row, strict=True))


async def test_the_status_shows_novas_own_view_of_its_services_and_kubectl_its_counts(
    fake: FakeOpenStack,
    admin: Kube,
    operator: Operator,
    simulator: Simulator,
    namespace: str,
    nova_cluster: ControlPlane,
) -> None:
    ns = namespace
    fake.add_compute("node-1")
    fake.add_compute("node-2", state="down")
    fake.add_compute("node-3")
    fake.add_service("ctl2", "nova-conductor")  # run by hand: never the step's to delete
    fake.add_service("ctl1", "nova-scheduler")
    fake.add_service("nova-conductor-6b8d9f7c4-w4n8r", "nova-conductor", state="down")  # a gone pod's
    await create_inputs(admin, ns)
    await admin.create(NOVAS, nova_body(keystoneEndpoint=fake.keystone_url), ns)
    await wait_for(lambda: admin.get(NOVAS, "nova", ns), is_ready, within=60)

    services = await wait_for(lambda: _services(admin, ns), lambda s: s is not None)
    # the look deleted the gone pod's record: the status counts what Nova lists after it
    assert [s.host for s in fake.services_of("nova-conductor")] == ["ctl2"]
    assert services == {
        "up": 4,
        "down": 1,
        "binaries": [
            {"binary": "nova-compute", "up": 2, "down": 1, "downHosts": ["node-2"]},
            {"binary": "nova-conductor", "up": 1, "down": 0},
            {"binary": "nova-scheduler", "up": 1, "down": 0},
        ],
    }
    row = _kubectl_get(nova_cluster, ns)
    assert (row["UP"], row["DOWN"], row["READY"]) == ("4", "1", "True")

    # the scheduler's record goes down; the next look (its Deployment changes) shows it
    fake.set_service_state("ctl1", "down")
    dep: Object = await admin.get(DEPLOYMENTS, "nova-scheduler", ns)
    ready = int((dep.get("status") or {}).get("readyReplicas") or 1)
    fewer = {"readyReplicas": ready - 1, "availableReplicas": ready - 1}
    await admin.patch_status(DEPLOYMENTS, "nova-scheduler", {"status": fewer}, ns)
    services = await wait_for(lambda: _services(admin, ns), lambda s: s["down"] == 2)
    assert services["up"] == 3
    scheduler = [b for b in services["binaries"] if b["binary"] == "nova-scheduler"]
    assert scheduler == [{"binary": "nova-scheduler", "up": 0, "down": 1, "downHosts": ["ctl1"]}]
    assert _kubectl_get(nova_cluster, ns)["DOWN"] == "2"
