"""Issue 38 item 3 on the real processes: ``spec.policy`` reaches the compute API's oslo.policy.

A member of a project (Keystone's ``member`` role, not ``admin``) may create servers under nova's
defaults: its create gets past the policy check and fails only on the made-up flavor (400). With
``os_compute_api:servers:create: role:admin`` in ``spec.policy.rules`` the real API answers that
member 403, while the admin still gets past the check (the same 400). The module leaves the rule in
place (it restricts nobody the other modules call as: they use the admin); its user stays too.
"""

from __future__ import annotations

import json
import secrets
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest
import yaml
from simcluster import SimHandle
from simcluster.realtier.services.openstack import ServiceUser

from tests.realnova.realcluster import GROUP, NAMESPACE, NOVA, OpenStackClient, compute_url, wait_for
from tests.realnova.rollouts import changed, pod_names, templates, wait_rolled

pytestmark = pytest.mark.realnova

NOVA_PATH = f"{GROUP}/namespaces/{NAMESPACE}/novas/{NOVA}"
CREATE = "os_compute_api:servers:create"
PROJECT = "service"  # an existing project of the tier's Keystone


def _token(handle: SimHandle, user: ServiceUser) -> str:
    assert handle.real is not None
    body = {
        "auth": {
            "identity": {
                "methods": ["password"],
                "password": {
                    "user": {"name": user.name, "domain": {"id": "default"}, "password": user.password}
                },
            },
            "scope": {"project": {"name": user.project, "domain": {"id": "default"}}},
        }
    }
    req = urllib.request.Request(
        f"{handle.real.openstack.keystone_url}/auth/tokens",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return str(resp.headers["X-Subject-Token"])


def _member(handle: SimHandle) -> ServiceUser:
    """A user with Keystone's ``member`` role (and no other) on the project."""
    assert handle.real is not None
    services = handle.real.openstack
    token = services.admin_token()
    member = services._find(token, "roles", "member")  # keystone-manage bootstrap makes it
    assert member is not None
    user = ServiceUser("policy-member", secrets.token_urlsafe(18), project=PROJECT)
    services.ensure_user(user, token=token, roles=(member,))
    return user


def _create(compute: str, token: str) -> tuple[int, str]:
    """A server create the schema accepts, naming a flavor that does not exist: (status, body)."""
    body: dict[str, Any] = {
        "server": {
            "name": "policy-probe",
            "imageRef": str(uuid.uuid4()),
            "flavorRef": "no-such-flavor",
            "networks": "none",
        }
    }
    headers = {
        "X-Auth-Token": token,
        "Content-Type": "application/json",
        "OpenStack-API-Version": "compute 2.95",
    }
    req = urllib.request.Request(f"{compute}/v2.1/servers", json.dumps(body).encode(), headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _nova_view(handle: SimHandle) -> str:
    """The Nova's generation, spec.policy and the conditions that are not True (for a failure)."""
    nova = handle.cluster.kube.get(NOVA_PATH)
    status = nova.get("status") or {}
    conds = [
        f"{c['type']}={c['status']}/{c.get('reason')}: {c.get('message')}"
        for c in status.get("conditions") or []
        if c["status"] != "True"
    ]
    return (
        f"generation {nova['metadata']['generation']}, observed {status.get('observedGeneration')}, "
        f"spec.policy {nova['spec'].get('policy')}, {conds}"
    )


def test_a_rule_that_forbids_server_create_to_non_admins_makes_the_real_api_answer_403(
    minimal: SimHandle,
) -> None:
    handle = minimal
    kube = handle.cluster.kube
    compute = compute_url(handle, NOVA).rstrip("/")
    admin = OpenStackClient(handle, compute).token()
    member = _token(handle, _member(handle))

    # nova's defaults: a project member may create (the made-up flavor fails it after the check)
    status, body = _create(compute, member)
    assert status == 400, body
    assert "403" not in body

    before_pods, before = pod_names(handle), templates(handle)
    kube.patch(NOVA_PATH, {"spec": {"policy": {"rules": {CREATE: "role:admin"}}}})
    readers = {"deployment/nova", "deployment/nova-metadata"}  # the only pods that mount the policy
    wait_for(
        lambda: readers <= changed(before, templates(handle)) or None,
        within=300,
        what="the pod templates of the API and metadata Deployments changed (a new policy ConfigMap)",
        handle=handle,
        detail=lambda: _nova_view(handle),
    )
    wait_rolled(handle, before_pods, readers, within=360)
    # the config ConfigMap is as it was: no db-sync, the other roles, the CronJob and the pool untouched
    assert changed(before, templates(handle)) == readers

    api = kube.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{NOVA}")
    volume = next(v for v in api["spec"]["template"]["spec"]["volumes"] if v["name"] == "policy")
    policy = kube.get(f"/api/v1/namespaces/{NAMESPACE}/configmaps/{volume['configMap']['name']}")
    assert yaml.safe_load(policy["data"]["policy.yaml"]) == {CREATE: "role:admin"}

    status, body = _create(compute, member)
    assert status == 403, body
    assert CREATE in body  # nova names the rule that refused it
    status, body = _create(compute, admin)
    assert status == 400, body  # the admin still passes the check
