"""Credential rotation on the real Nova (issue 25, scenario 2), on the minimal sample and its pool.

Each rotation is done where a site does it, and the stand-in operators carry it to the real
servers as theirs would: the database users' passwords in the MariaDB ``User``'s Secret (the
stand-in mariadb-operator runs ``ALTER USER ... IDENTIFIED BY``), the broker user's in the
RabbitmqCluster's default-user Secret (the stand-in cluster operator runs ``change_password``), the
service user's in Keystone first and then in the Nova's Secret. Then exactly the workloads that
carry that credential get a new pod template (``rollouts``), their pods are replaced, the old
credential is refused by the real server, and nova works: every live scheduler and conductor row is
up, and a server boots ACTIVE. The metadata shared secret's rotation is ``test_day_one``'s (scenario 5).

The two database passwords roll the same workloads, and so do the bus and the Keystone passwords:
each pair is rotated in one step (the digest annotation of each credential is asserted on its own),
which keeps this module to two rollouts. The rotated values stay: the modules after this one read
credentials from the cluster's Secrets, as the operator does.
"""

from __future__ import annotations

import base64
import os
import secrets
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from simcluster import SimHandle

from tests.realnova.cloud import request, upload_image
from tests.realnova.realcluster import NAMESPACE, OpenStackClient, compute_url, wait_for
from tests.realnova.rollouts import (
    CONTROL_PLANE,
    CRONJOB,
    DEPLOYMENTS,
    annotations_changed,
    changed,
    pod_names,
    templates,
    wait_rolled,
)

pytestmark = pytest.mark.realnova

SECRETS = f"/api/v1/namespaces/{NAMESPACE}/secrets"
MARIADB_USERS = f"/apis/k8s.mariadb.com/v1alpha1/namespaces/{NAMESPACE}/users"
DB_SECRETS = {"api": "nova-api-db-credentials", "cell": "nova-cell-db-credentials"}
SERVICE_USER_SECRET = "nova-service-user"
BUS_SECRET = "rabbitmq-default-user"
FLAVOR = {"name": "rotation.tiny", "ram": 128, "vcpus": 1, "disk": 1}
ROLL_WITHIN = 420.0
DB_HASHES = {"nova.c5c3.io/api-db-connection-hash", "nova.c5c3.io/db-connection-hash"}
BUS_KEYSTONE_HASHES = {"nova.c5c3.io/transport-url-hash", "nova.c5c3.io/authtoken-hash"}


@dataclass
class Rotation:
    handle: SimHandle
    client: OpenStackClient
    image: str = ""
    flavor: str = ""
    seconds: dict[str, float] = field(default_factory=dict)


def _secret(handle: SimHandle, name: str) -> dict[str, str]:
    data = handle.cluster.kube.get(f"{SECRETS}/{name}").get("data") or {}
    return {k: base64.b64decode(v).decode() for k, v in data.items()}


def _set(handle: SimHandle, name: str, values: dict[str, str]) -> None:
    handle.cluster.kube.patch(f"{SECRETS}/{name}", {"stringData": values})


def _db_user(handle: SimHandle, block: str) -> tuple[str, str]:
    """The MariaDB account of a database block (its ``User``'s name) and its Secret's password now."""
    name = "nova-api" if block == "api" else "nova"
    user = handle.cluster.kube.get(f"{MARIADB_USERS}/{name}")
    return str(user["spec"].get("name") or name), _secret(handle, DB_SECRETS[block])["password"]


def _new_password() -> str:
    return "rotated-" + secrets.token_urlsafe(15)


def _keystone_token(handle: SimHandle, user: str, password: str) -> int:
    """The status of Keystone's answer to ``user`` signing in with ``password`` (201: a token)."""
    assert handle.real is not None
    body = {
        "auth": {
            "identity": {
                "methods": ["password"],
                "password": {"user": {"name": user, "domain": {"id": "default"}, "password": password}},
            },
            "scope": {"project": {"name": "service", "domain": {"id": "default"}}},
        }
    }
    status, _ = request("POST", f"{handle.real.openstack.keystone_url}/auth/tokens", body=body)
    return status


@pytest.fixture(scope="module")
def rotation(minimal: SimHandle) -> Iterator[Rotation]:
    """An image and a flavor to boot with, deleted afterwards."""
    assert minimal.real is not None
    r = Rotation(minimal, OpenStackClient(minimal, compute_url(minimal, "nova")))
    osv = minimal.real.openstack
    r.image = upload_image(osv.glance_url, r.client.token(), "rotation", os.urandom(64 * 1024))
    r.flavor = r.client.call("POST", "/flavors", {"flavor": FLAVOR})["flavor"]["id"]
    try:
        yield r
    finally:
        _clean_up(r)


def _clean_up(r: Rotation) -> None:
    """The module's flavor and image go. The rotated credentials stay: every module after this one
    reads them where the operator does, from the cluster's Secrets (the samples' file is applied once,
    by the ``minimal`` fixture), and putting the old ones back would cost one more rollout of
    everything for nothing."""
    try:
        r.client.call("DELETE", f"/flavors/{r.flavor}")
    finally:
        assert r.handle.real is not None
        request(
            "DELETE",
            f"{r.handle.real.openstack.glance_url}/v2/images/{r.image}",
            headers={"X-Auth-Token": r.client.token()},
        )


def _boot(r: Rotation, name: str) -> float:
    """A server boots ACTIVE (networks none) and is deleted again; the seconds to ACTIVE."""
    body = {"server": {"name": name, "imageRef": r.image, "flavorRef": r.flavor, "networks": "none"}}
    t0 = time.monotonic()
    sid = r.client.call("POST", "/servers", body, microversion="2.37")["server"]["id"]
    try:

        def active() -> bool | None:
            server = r.client.call("GET", f"/servers/{sid}")["server"]
            if server["status"] == "ERROR":
                raise AssertionError(f"server in ERROR: {server.get('fault')}")
            return (server["status"] == "ACTIVE" and not server.get("OS-EXT-STS:task_state")) or None

        wait_for(active, within=180, what=f"server {name} ACTIVE", handle=r.handle)
        return time.monotonic() - t0
    finally:
        r.client.call("DELETE", f"/servers/{sid}")

        def gone() -> bool | None:
            try:
                r.client.call("GET", f"/servers/{sid}")
            except urllib.error.HTTPError as exc:
                return exc.code == 404 or None
            return None

        wait_for(gone, within=120, what=f"server {name} deleted")


def _services_up(r: Rotation, after: dict[str, set[str]]) -> None:
    """Every live scheduler and conductor pod has its service row, up; every compute row is up."""

    def check() -> bool | None:
        rows = r.client.services()
        up = {(s["binary"], s["host"]) for s in rows if s["state"] == "up"}
        wanted = {("nova-scheduler", p) for p in after["deployment/nova-scheduler"]}
        wanted |= {("nova-conductor", p) for p in after["deployment/nova-conductor"]}
        computes = [s for s in rows if s["binary"] == "nova-compute"]
        return (wanted <= up and bool(computes) and all(s["state"] == "up" for s in computes)) or None

    wait_for(check, within=120, what="the live pods' service rows up", handle=r.handle)


def test_rotating_the_database_passwords_rolls_the_control_plane_only_and_the_old_ones_are_refused(
    rotation: Rotation,
) -> None:
    handle = rotation.handle
    assert handle.real is not None
    mariadb = handle.real.backends.mariadb
    users = {block: _db_user(handle, block) for block in DB_SECRETS}
    for user, password in users.values():
        assert mariadb.login(user, password) is None
    before_pods, before = pod_names(handle), templates(handle)
    rotated = {block: _new_password() for block in DB_SECRETS}
    t0 = time.monotonic()
    for block, name in DB_SECRETS.items():
        _set(handle, name, {"password": rotated[block]})

    after_pods = wait_rolled(handle, before_pods, DEPLOYMENTS, within=ROLL_WITHIN)
    rotation.seconds["databases roll"] = time.monotonic() - t0
    after = templates(handle)
    # the five Deployments carry both DSN digests; the CronJob's runs and the pool do not roll (the
    # CronJob reads the DSN Secrets when each run starts, the pool holds no database credential)
    assert changed(before, after) == set(DEPLOYMENTS)
    for key in DEPLOYMENTS:
        assert annotations_changed(before, after, key) == DB_HASHES, key
    assert CRONJOB not in changed(before, after)

    for block, (user, old) in users.items():  # the real server: the old password refused, the new one in
        refusal = mariadb.login(user, old)
        assert refusal is not None, block
        assert "ERROR 1045" in refusal, (block, refusal)
        assert mariadb.login(user, rotated[block]) is None, block
        assert mariadb.connections_of(user) > 0  # the rolled pods signed in with the new one
    _services_up(rotation, after_pods)
    rotation.seconds["databases boot"] = _boot(rotation, "rotation-db")
    print(f"rotation, databases: rolled {sorted(changed(before, after))}; seconds {rotation.seconds}")


def test_rotating_the_bus_and_service_user_passwords_rolls_the_control_plane_and_the_pool(
    rotation: Rotation,
) -> None:
    handle = rotation.handle
    assert handle.real is not None
    broker, keystone = handle.real.backends.rabbitmq, handle.real.openstack
    bus = _secret(handle, BUS_SECRET)
    service_old = _secret(handle, SERVICE_USER_SECRET)["password"]
    assert broker.authenticates(bus["username"], bus["password"])
    assert _keystone_token(handle, "nova", service_old) == 201
    before_pods, before = pod_names(handle), templates(handle)
    (pool_key,) = set(before) - CONTROL_PLANE
    bus_new, service_new = _new_password(), _new_password()
    t0 = time.monotonic()
    # the broker's user, as the cluster operator's default-user Secret says it (every key that holds it)
    host, port = bus["host"], bus["port"]
    _set(
        handle,
        BUS_SECRET,
        {
            "password": bus_new,
            "connection_string": f"amqp://{bus['username']}:{bus_new}@{host}:{port}/",
            "default_user.conf": f"default_user = {bus['username']}\ndefault_pass = {bus_new}\n",
        },
    )
    keystone.add_service_user("nova", service_new)  # Keystone first, then the Secret (docs/operations.md)
    _set(handle, SERVICE_USER_SECRET, {"password": service_new})

    after_pods = wait_rolled(handle, before_pods, {*DEPLOYMENTS, "pool"}, within=ROLL_WITHIN)
    rotation.seconds["bus+keystone roll"] = time.monotonic() - t0
    after = templates(handle)
    assert changed(before, after) == {*DEPLOYMENTS, pool_key}
    for key in DEPLOYMENTS:
        assert annotations_changed(before, after, key) == BUS_KEYSTONE_HASHES, key
    assert annotations_changed(before, after, pool_key) == {"nova.openstack.c5c3.io/compute-config-hash"}
    contract = _secret(handle, "nova-compute-config")  # the pool's credentials: both rotated ones
    assert contract["password"] == service_new
    assert f":{bus_new}@" in contract["transport_url"]

    wait_for(
        lambda: not broker.authenticates(bus["username"], bus["password"]) or None,
        within=60,
        what="the broker refusing the old password",
    )
    assert broker.authenticates(bus["username"], bus_new)
    assert _keystone_token(handle, "nova", service_old) == 401
    assert _keystone_token(handle, "nova", service_new) == 201
    _services_up(rotation, after_pods)
    rotation.seconds["bus+keystone boot"] = _boot(rotation, "rotation-bus")
    print(
        f"rotation, bus and keystone: rolled {sorted(changed(before, after))}; pods "
        f"{ {k: sorted(v) for k, v in after_pods.items()} }; seconds {rotation.seconds}"
    )
