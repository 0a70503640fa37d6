"""The MariaDB and RabbitMQ stand-in operators, on a real API server, act on the real servers.

What the Nova operator renders (a Database with its charset, a User whose password is a Secret's
key, Grants, a RabbitmqCluster) becomes the server's own objects, a rotation of the User's Secret
changes the password the server accepts, and deletion drops them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from simcluster import ControlPlane
from simcluster.client.asynckube import AsyncKube
from simcluster.client.kube import Kube
from simcluster.platform.launch import DEPENDENCY_CRD_FILES
from simcluster.realtier.services.backends import RealBackends
from simcluster.standins import MARIADB, RABBIT, StandIns

pytestmark = pytest.mark.integration


def kind(k: str) -> dict[str, str]:
    return {"apiVersion": "k8s.mariadb.com/v1alpha1", "kind": k}


def b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


@pytest.fixture
async def standins(
    control_plane: ControlPlane, backends: RealBackends
) -> AsyncIterator[tuple[AsyncKube, str]]:
    admin = Kube(control_plane.server, control_plane.admin_token, control_plane.ca_file)
    docs = admin.apply_files(DEPENDENCY_CRD_FILES)
    admin.wait_crds_established(
        [d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition"]
    )
    ns = f"rt-{uuid.uuid4().hex[:8]}"
    admin.request("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
    async with AsyncKube(control_plane.server, control_plane.admin_token, control_plane.ca_file) as kube:
        stop = asyncio.Event()
        # its own namespace only: the session's control plane holds what the integration tests left
        runner = asyncio.create_task(StandIns(kube, backend=backends, namespace=ns).run(stop))
        try:
            yield kube, ns
        finally:
            stop.set()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(runner, 30)
    admin.request("DELETE", f"/api/v1/namespaces/{ns}")


async def eventually(check: Callable[[], Any], within: float = 60.0) -> Any:
    deadline = asyncio.get_running_loop().time() + within
    while True:
        result = await asyncio.to_thread(check)
        if result:
            return result
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not true within {within:.0f} s: {check}")
        await asyncio.sleep(0.5)


async def test_database_user_and_grant_become_the_servers_and_go_with_their_objects(
    standins: tuple[AsyncKube, str], backends: RealBackends
) -> None:
    kube, ns = standins
    schema, user = f"rt_{uuid.uuid4().hex[:6]}", f"rtu{uuid.uuid4().hex[:6]}"
    base = f"{MARIADB}/namespaces/{ns}"
    ref = {"mariaDbRef": {"name": "mariadb"}}
    await kube.create(
        f"{base}/mariadbs", {**kind("MariaDB"), "metadata": {"name": "mariadb"}, "spec": {"replicas": 1}}
    )
    await kube.create(
        f"/api/v1/namespaces/{ns}/secrets",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "db-password"},
            "data": {"password": b64("first'pa$s")},
        },
    )
    await kube.create(
        f"{base}/databases",
        {
            **kind("Database"),
            "metadata": {"name": "db"},
            "spec": {**ref, "name": schema, "characterSet": "utf8", "collate": "utf8_general_ci"},
        },
    )
    await kube.create(
        f"{base}/users",
        {
            **kind("User"),
            "metadata": {"name": user},
            "spec": {
                **ref,
                "name": user,
                "host": "%",
                "passwordSecretKeyRef": {"name": "db-password", "key": "password"},
                "maxUserConnections": 17,
            },
        },
    )
    await kube.create(
        f"{base}/grants",
        {
            **kind("Grant"),
            "metadata": {"name": "grant"},
            "spec": {
                **ref,
                "privileges": ["ALL PRIVILEGES"],
                "database": schema,
                "table": "*",
                "username": user,
                "host": "%",
            },
        },
    )
    db = backends.mariadb
    await eventually(lambda: db.login(user, "first'pa$s", database=schema) is None)
    assert db.database_charset(schema) == ("utf8mb3", "utf8mb3_general_ci")
    assert db.max_user_connections(user) == 17

    # a rotation of the Secret: the server takes the new password and refuses the old one
    await kube.merge_patch(
        f"/api/v1/namespaces/{ns}/secrets/db-password", {"data": {"password": b64("second")}}
    )
    await eventually(lambda: db.login(user, "second", database=schema) is None)
    assert db.login(user, "first'pa$s") is not None

    for plural, name in (("grants", "grant"), ("users", user), ("databases", "db")):
        await kube.request("DELETE", f"{base}/{plural}/{name}")
    await eventually(lambda: user not in db.users() and schema not in db.databases())
    # the finalizers are released once the server's objects are gone
    for plural in ("grants", "users", "databases"):
        for _ in range(60):
            if not await kube.list(f"{base}/{plural}"):
                break
            await asyncio.sleep(0.5)
        assert await kube.list(f"{base}/{plural}") == []


async def test_rabbitmq_cluster_default_user_is_a_real_broker_user(
    standins: tuple[AsyncKube, str], backends: RealBackends
) -> None:
    kube, ns = standins
    await kube.create(
        f"{RABBIT}/namespaces/{ns}/rabbitmqclusters",
        {
            "apiVersion": "rabbitmq.com/v1beta1",
            "kind": "RabbitmqCluster",
            "metadata": {"name": "rabbitmq"},
            "spec": {},
        },
    )

    async def secret() -> dict[str, str] | None:
        s = await kube.get(f"/api/v1/namespaces/{ns}/secrets/rabbitmq-default-user")
        return {k: base64.b64decode(v).decode() for k, v in s["data"].items()} if s else None

    data = None
    for _ in range(120):
        data = await secret()
        if data:
            break
        await asyncio.sleep(0.5)
    assert data is not None
    mq = backends.rabbitmq
    await eventually(lambda: mq.authenticates(data["username"], data["password"]))
    rmq = None
    for _ in range(60):  # the status follows once the broker has the user
        rmq = await kube.get(f"{RABBIT}/namespaces/{ns}/rabbitmqclusters/rabbitmq")
        if rmq is not None and "status" in rmq:
            break
        await asyncio.sleep(0.5)
    assert rmq is not None
    assert rmq["status"]["defaultUser"]["secretReference"]["name"] == "rabbitmq-default-user"

    await kube.request("DELETE", f"{RABBIT}/namespaces/{ns}/rabbitmqclusters/rabbitmq")
    await eventually(lambda: data["username"] not in mq.users())
