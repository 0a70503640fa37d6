"""Keystone, Placement and Glance from PyPI, on the real MariaDB and memcached, and the network stand-in."""

from __future__ import annotations

import http.client
import json
import os
import pathlib
import secrets
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from simcluster.realtier.services.backends import RealBackends
from simcluster.realtier.services.openstack import OpenStackServices, ServiceUser

DASHED = "-" + secrets.token_urlsafe(17)  # the admin password this module's Keystone starts with


@pytest.fixture(scope="module")
def openstack(
    backends: RealBackends, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OpenStackServices]:
    mc = backends.memcached
    services = OpenStackServices(
        pathlib.Path(tmp_path_factory.mktemp("openstack")),
        backends.mariadb,
        f"{mc.address}:{mc.port}",
        admin_password=DASHED,
    ).start(service_users=("nova",))
    try:
        yield services
    finally:
        services.stop()


def token_for(
    os_: OpenStackServices, user: str, password: str, project: str = "service"
) -> tuple[str, dict[str, Any]]:
    body = {
        "auth": {
            "identity": {
                "methods": ["password"],
                "password": {"user": {"name": user, "domain": {"name": "Default"}, "password": password}},
            },
            "scope": {"project": {"name": project, "domain": {"name": "Default"}}},
        }
    }
    req = urllib.request.Request(
        f"{os_.keystone_url}/auth/tokens", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return str(resp.headers["X-Subject-Token"]), json.loads(resp.read())["token"]


def call(
    url: str, token: str, method: str = "GET", data: bytes | None = None, ctype: str = "application/json"
) -> Any:
    req = urllib.request.Request(url, data, {"X-Auth-Token": token, "Content-Type": ctype}, method=method)
    with urllib.request.urlopen(req, timeout=60) as resp:
        text = resp.read()
        return json.loads(text) if text else None


def test_an_admin_password_that_begins_with_a_dash_bootstraps_keystone(openstack: OpenStackServices) -> None:
    # One generated password in 64 begins with "-"; passed as its own argument, keystone-manage
    # took it for an option and bootstrap failed ("expected one argument").
    assert openstack.admin_password == DASHED
    _, token = token_for(openstack, "admin", DASHED, project="admin")
    assert "admin" in {r["name"] for r in token["roles"]}


def test_service_user_token_carries_the_catalog(openstack: OpenStackServices) -> None:
    nova = openstack.users["nova"]
    _, token = token_for(openstack, nova.name, nova.password)
    types = {entry["type"]: entry for entry in token["catalog"]}
    assert {"identity", "placement", "image", "network"} <= set(types)
    assert {e["url"] for e in types["placement"]["endpoints"]} == {openstack.placement_url}
    assert {r["name"] for r in token["roles"]} >= {"admin", "service"}


def _endpoints(token: dict[str, Any]) -> set[tuple[str, str, str, str]]:
    """The token's catalog: (service type, region, interface, URL) of each endpoint."""
    return {
        (entry["type"], e["region_id"], e["interface"], e["url"])
        for entry in token["catalog"]
        for e in entry["endpoints"]
    }


def _regions(token: dict[str, Any]) -> set[str]:
    return {region for _, region, _, _ in _endpoints(token)}


def test_a_removed_region_leaves_the_catalog_and_the_tiers_region_stays(openstack: OpenStackServices) -> None:
    # A test's own region (test_tls_nova.py's) must not outlive it: a later Nova without spec.region
    # may be handed its endpoints.
    nova = openstack.users["nova"]
    _, before = token_for(openstack, nova.name, nova.password)
    openstack.add_region(
        "RegionGone", {"identity": "https://gone.invalid:5000/v3", "placement": "http://gone.invalid"}
    )
    try:
        _, token = token_for(openstack, nova.name, nova.password)
        assert _regions(token) == {"RegionOne", "RegionGone"}
    finally:
        openstack.remove_region("RegionGone")
    _, after = token_for(openstack, nova.name, nova.password)
    assert _regions(after) == {"RegionOne"}
    assert _endpoints(after) == _endpoints(before)
    openstack.remove_region("RegionGone")  # already gone: nothing to do


def test_a_rotated_password_is_the_only_one_keystone_accepts(openstack: OpenStackServices) -> None:
    old = openstack.users["nova"]
    openstack.ensure_user(ServiceUser("nova", "rotated-password"))
    try:
        token_for(openstack, "nova", "rotated-password")
        with pytest.raises(urllib.error.HTTPError) as refused:
            token_for(openstack, "nova", old.password)
        assert refused.value.code == 401
    finally:
        openstack.ensure_user(old)


def test_placement_answers_with_a_token_only(openstack: OpenStackServices) -> None:
    with pytest.raises(urllib.error.HTTPError) as anonymous:
        call(f"{openstack.placement_url}/resource_providers", "")
    assert anonymous.value.code == 401
    token, _ = token_for(openstack, "placement", openstack.users["placement"].password)
    assert call(f"{openstack.placement_url}/resource_providers", token) == {"resource_providers": []}


def _forked_reads(url: str, token: str, children: int = 2, each: int = 60) -> list[str]:
    """Requests of ``children`` processes forked after their parent's first request, all on the
    parent's connection object (as nova-scheduler's workers share its Placement client): what each
    read that was not the answer to its own request."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    headers = {"X-Auth-Token": token, "Accept": "application/json", "OpenStack-API-Version": "placement 1.7"}
    conn.request("GET", f"{parts.path}/resource_classes/VCPU", headers=headers)
    conn.getresponse().read()
    classes = ("VCPU", "MEMORY_MB", "DISK_GB", "PCI_DEVICE", "SRIOV_NET_VF")
    pipes = []
    for child in range(children):
        read, write = os.pipe()
        if os.fork() == 0:  # the child: ask, and report what did not match
            os.close(read)
            wrong = []
            for i in range(each):
                asked = classes[(child + i) % len(classes)]
                try:
                    conn.request("GET", f"{parts.path}/resource_classes/{asked}", headers=headers)
                    got = json.loads(conn.getresponse().read()).get("name")
                except Exception as exc:  # reported to the parent, as text
                    got = repr(exc)
                if got != asked:
                    wrong.append(f"{asked} -> {got}")
            os.write(write, json.dumps(wrong).encode())
            os._exit(0)
        os.close(write)
        pipes.append(read)
    wrong: list[str] = []
    for read in pipes:
        with os.fdopen(read) as f:
            wrong += json.loads(f.read() or "[]")
    for _ in pipes:
        os.wait()
    return wrong


def test_forked_workers_sharing_a_placement_connection_read_only_their_own_answers(
    openstack: OpenStackServices,
) -> None:
    # Every response says "Connection: close", so no worker inherits a live connection: behind a
    # kept-alive one, two children read each other's answers (nova-scheduler's KeyError).
    token, _ = token_for(openstack, "placement", openstack.users["placement"].password)
    assert _forked_reads(openstack.placement_url, token) == []


def test_glance_stores_an_uploaded_image(openstack: OpenStackServices) -> None:
    token, _ = token_for(openstack, "glance", openstack.users["glance"].password)
    image = call(
        f"{openstack.glance_url}/v2/images",
        token,
        "POST",
        json.dumps({"name": "tiny", "disk_format": "raw", "container_format": "bare"}).encode(),
    )
    call(
        f"{openstack.glance_url}/v2/images/{image['id']}/file",
        token,
        "PUT",
        b"\0" * 65536,
        "application/octet-stream",
    )
    shown = call(f"{openstack.glance_url}/v2/images/{image['id']}", token)
    assert shown["status"] == "active"
    assert shown["size"] == 65536


def test_the_network_endpoint_lists_nothing_and_sets_no_quota(openstack: OpenStackServices) -> None:
    assert openstack.network is not None
    base = openstack.network.url
    assert call(f"{base}/v2.0/security-groups?tenant_id=x", "") == {"security_groups": []}
    assert call(f"{base}/v2.0/ports", "") == {"ports": []}
    assert call(f"{base}/v2.0/quotas/p1", "")["quota"]["port"] == -1
