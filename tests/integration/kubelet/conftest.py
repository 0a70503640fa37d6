"""Fixtures of the kubelet stand-in's tier: a minimal image, a running stand-in on the control plane.

The image is a root tree with the host's ``/usr`` bound read-only (``/bin/sh``, ``python3``), an
``/etc`` with ``passwd``/``group``/``nsswitch.conf`` and a world-writable ``/tmp``. Pods are bound to
the stand-in's nodes by ``spec.nodeName`` (the integration tier's control plane has no scheduler).
"""

from __future__ import annotations

import asyncio
import pathlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from simcluster import ControlPlane
from simcluster.client.asynckube import AsyncKube
from simcluster.realtier.kubelet import Image, Kubelet

JSON = dict[str, Any]
IMAGE = "sim.local/minimal:1"


def build_image(root: pathlib.Path) -> Image:
    root.chmod(0o755)  # the container's / (pytest makes its directories 0700)
    for d in ("usr", "etc", "tmp", "var/tmp", "root", "home"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "tmp").chmod(0o1777)
    for link in ("bin", "lib", "lib64", "sbin"):
        (root / link).symlink_to(f"usr/{link}")
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\nnova:x:42424:42424::/home:/bin/sh\n")
    (root / "etc" / "group").write_text("root:x:0:\nnova:x:42424:\n")
    (root / "etc" / "nsswitch.conf").write_text("passwd: files\ngroup: files\nhosts: files dns\n")
    return Image(root, binds={"/usr": "/usr"})


@pytest.fixture(scope="session")
def image(tmp_path_factory: pytest.TempPathFactory) -> Image:
    return build_image(tmp_path_factory.mktemp("image"))


@pytest.fixture
async def kube(control_plane: ControlPlane) -> AsyncIterator[AsyncKube]:
    async with AsyncKube(control_plane.server, control_plane.admin_token, control_plane.ca_file) as k:
        yield k


@pytest.fixture
async def kubelet(kube: AsyncKube, image: Image, tmp_path: pathlib.Path) -> AsyncIterator[Kubelet]:
    node = f"standin-{uuid.uuid4().hex[:6]}"
    k = Kubelet(kube, [node], {IMAGE: image}, tmp_path / "kubelet", volume_resync=1.0, lease_renew=0.5)
    await k.start()
    try:
        yield k
    finally:
        await k.remove_node(node)


Check = Callable[[JSON], bool]


async def wait_pod(kube: AsyncKube, ns: str, name: str, check: Check, seconds: float = 30.0) -> JSON:
    """Poll the pod until ``check(pod)``; fails with the last pod seen."""
    pod: JSON | None = None
    deadline = asyncio.get_running_loop().time() + seconds
    while asyncio.get_running_loop().time() < deadline:
        pod = await kube.get(f"/api/v1/namespaces/{ns}/pods/{name}")
        if pod is not None and check(pod):
            return pod
        await asyncio.sleep(0.2)
    raise AssertionError(f"pod {ns}/{name} never matched; last seen status: {(pod or {}).get('status')}")


def container(pod: JSON, name: str, init: bool = False) -> JSON:
    key = "initContainerStatuses" if init else "containerStatuses"
    found = (c for c in (pod.get("status") or {}).get(key) or [] if c["name"] == name)
    return next(found, {"name": name, "state": {}, "lastState": {}, "restartCount": 0, "ready": False})


def condition(pod: JSON, kind: str) -> str:
    return next(
        (c["status"] for c in (pod.get("status") or {}).get("conditions") or [] if c["type"] == kind), ""
    )


async def create_pod(kube: AsyncKube, ns: str, node: str, name: str, spec: JSON, **meta: Any) -> JSON:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **meta},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 2, **spec},
    }
    return await kube.create(f"/api/v1/namespaces/{ns}/pods", body)


Waiter = Callable[..., Awaitable[JSON]]
