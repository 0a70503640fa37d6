"""The NovaRef step: each wait in order, then what it hands forward (novacompute-crd.md §6)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from nova_operator.models.novacompute import NovaCompute
from nova_operator.reconcilers.compute.nova_ref import reconcile_nova_ref
from nova_operator.secret_refs import SECRET_DATA_LIMIT
from tests.unit.reconcilers.compute.fakes import FakeCompute, FakeKube, make_pass, nova


def world(*, release: str = "2025.2", ref: bool = True, password: str = "pw") -> FakeKube:
    n = nova()
    n["status"] = {"installedRelease": release} if release else {}
    if ref:
        n["status"]["computeConfigSecretRef"] = {"name": "nova-compute-config"}
    objects: dict[tuple[str, str], Any] = {("novas", "nova"): n}
    if password is not None:
        data = {"password": base64.b64encode(password.encode()).decode()} if password else {}
        objects[("secrets", "nova-service-user")] = {"data": data}
    return FakeKube(objects=objects)


@pytest.mark.parametrize(
    ("kube", "reason"),
    [
        (FakeKube(), "NovaNotFound"),
        (world(release=""), "WaitingForInstalledRelease"),
        (world(ref=False), "ComputeConfigNotPublished"),
        (world(password=""), "WaitingForServiceUserSecret"),
    ],
)
async def test_each_wait_sets_nova_ready_false_and_requeues_15s(kube: FakeKube, reason: str) -> None:
    p, _ = make_pass([], compute=FakeCompute(), kube=kube)
    assert (await reconcile_nova_ref(p)).requeue_after == 15
    c = p.condition("NovaReady")
    assert (c["status"], c["reason"]) == ("False", reason)


async def test_resolved_hands_forward_image_contract_url_and_credentials() -> None:
    p, _ = make_pass([], compute=FakeCompute(), kube=world(release="2026.1"))
    assert (await reconcile_nova_ref(p)).requeue_after is None
    assert p.image == "ghcr.io/c5c3/nova-compute:2026.1"  # the installed release, not the target
    assert p.contract_secret == "nova-compute-config"
    assert p.nova_url == "http://nova.ns.svc.cluster.local:8774"
    assert p.credentials is not None
    assert (p.credentials.username, p.credentials.password, p.credentials.project_name) == (
        "nova",
        "pw",
        "service",
    )
    assert p.credentials.auth_url == "http://keystone-api.openstack.svc:5000/v3"
    c = p.condition("NovaReady")
    assert (c["status"], c["reason"]) == ("True", "NovaResolved")
    assert "2026.1" in c["message"]


async def test_spec_image_wins() -> None:
    p, _ = make_pass([], compute=FakeCompute(), kube=world())
    cr = dict(p.cr)
    cr["spec"] = {
        **cr["spec"],
        "image": {"repository": "registry.example/nc", "digest": "sha256:" + "a" * 64},
    }
    p.pool = NovaCompute.model_validate(cr)
    await reconcile_nova_ref(p)
    assert p.image == "registry.example/nc@sha256:" + "a" * 64


async def test_a_service_user_secret_over_the_size_limit_is_refused_by_name() -> None:
    """Issue 36 §5: a pool does not use (nor cache) a Secret over ``SECRET_DATA_LIMIT``."""
    kube = world(release="2026.1", password="p" * (SECRET_DATA_LIMIT + 1))
    p, _ = make_pass([], compute=FakeCompute(), kube=kube)
    assert (await reconcile_nova_ref(p)).requeue_after == 15
    c = p.condition("NovaReady")
    assert (c["status"], c["reason"]) == ("False", "SecretTooLarge")
    assert f"Secret ns/nova-service-user holds {SECRET_DATA_LIMIT + 1} bytes" in c["message"]
    assert "ppp" not in c["message"]
    assert p.credentials is None
