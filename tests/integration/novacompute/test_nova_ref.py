"""The NovaRef step on the real API server: each wait in order, its errors, then what it hands forward
(novacompute-crd.md §6). The Nova and its service-user Secret are stored by kube-apiserver."""

from __future__ import annotations

from typing import Any

import pytest

from nova_operator import conditions
from nova_operator.kube import errors
from nova_operator.kube.resources import NOVACOMPUTES, NOVAS, SECRETS
from nova_operator.reconcilers.compute.context import ComputeSettings
from nova_operator.reconcilers.compute.nova_ref import reconcile_nova_ref
from nova_operator.secret_refs import SECRET_DATA_LIMIT, SecretRefPolicy
from tests.integration.novacompute.passes import CONTRACT, SERVICE_USER, Stage, encoded

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("nova", "reason"),
    [
        (None, "NovaNotFound"),
        ({"release": None}, "WaitingForInstalledRelease"),
        ({"ref": False}, "ComputeConfigNotPublished"),
        ({"password": ""}, "WaitingForServiceUserSecret"),
    ],
)
async def test_each_wait_sets_nova_ready_false_and_requeues_15s(
    stage: Stage, nova: dict[str, Any] | None, reason: str
) -> None:
    if nova is not None:
        await stage.nova(**nova)
    p, _ = stage.pass_over(await stage.pool())
    assert (await reconcile_nova_ref(p)).requeue_after == 15
    c = p.condition("NovaReady")
    assert c is not None
    assert (c["status"], c["reason"]) == ("False", reason)


async def test_resolved_hands_forward_image_contract_url_and_credentials(stage: Stage) -> None:
    nova = await stage.nova(release="2026.1")
    p, _ = stage.pass_over(await stage.pool())
    assert (await reconcile_nova_ref(p)).requeue_after is None
    assert p.image == "ghcr.io/c5c3/nova-compute:2026.1"  # the installed release, not the target
    assert p.contract_secret == "nova-compute-config"
    assert p.nova_url == f"http://nova.{stage.ns}.svc.cluster.local:8774"
    assert p.nova == nova  # the server's copy is handed forward
    assert p.credentials is not None
    assert (p.credentials.username, p.credentials.password, p.credentials.project_name) == (
        "nova",
        "pw",
        "service",
    )
    assert p.credentials.auth_url == "http://keystone-api.openstack.svc:5000/v3"
    c = p.condition("NovaReady")
    assert c is not None
    assert (c["status"], c["reason"]) == ("True", "NovaResolved")
    assert "2026.1" in c["message"]


async def test_spec_image_wins(stage: Stage) -> None:
    await stage.nova()
    cr = await stage.pool(image={"repository": "registry.example/nc", "digest": "sha256:" + "a" * 64})
    p, _ = stage.pass_over(cr)
    await reconcile_nova_ref(p)
    assert p.image == "registry.example/nc@sha256:" + "a" * 64


async def test_a_service_user_secret_over_the_size_limit_is_refused_by_name(stage: Stage) -> None:
    """Issue 36 §5: a pool does not use (nor cache) a Secret over ``SECRET_DATA_LIMIT``."""
    await stage.nova(release="2026.1", password="p" * (SECRET_DATA_LIMIT + 1))
    p, _ = stage.pass_over(await stage.pool())
    assert (await reconcile_nova_ref(p)).requeue_after == 15
    c = p.condition("NovaReady")
    assert c is not None
    assert (c["status"], c["reason"]) == ("False", "SecretTooLarge")
    assert f"Secret {stage.ns}/{SERVICE_USER} holds {SECRET_DATA_LIMIT + 1} bytes" in c["message"]
    assert "ppp" not in c["message"]
    assert p.credentials is None


async def test_a_failed_read_of_the_nova_is_nova_error_and_raises(stage: Stage) -> None:
    await stage.nova()
    p, _ = stage.pass_over(await stage.pool())
    stage.kube.refuse[("get", NOVAS.plural)] = errors.KubeError(
        "novas nova: etcdserver: request timed out", status=500
    )
    with pytest.raises(errors.KubeError):
        await reconcile_nova_ref(p)
    c = p.condition(conditions.NOVA_REF_READY)
    assert c is not None
    assert (c["status"], c["reason"]) == ("False", "NovaError")
    assert c["message"].startswith(f"reading Nova {stage.ns}/nova: ")
    assert stage.kube.of_verb("get", SECRETS.plural) == []  # nothing read past the failure


async def test_a_nova_that_does_not_parse_is_nova_error_unless_only_a_step_of_its_own_is_concerned(
    stage: Stage,
) -> None:
    """kube-apiserver refuses both broken fields below today (the CRD carries the rules): such a Nova
    reaches a pool only when it was stored before a rule existed, and then as the informer holds it.
    So the stored Nova is the valid one and the pass's cache hands the step its older content."""
    nova = await stage.nova()
    archive = {"schedule": "every night"}  # a rule only the model checked once
    with pytest.raises(errors.KubeError, match="schedule must be a cron expression"):
        await stage.admin.patch(NOVAS, "nova", {"spec": {"dbArchive": archive}}, stage.ns)
    older = {**nova, "spec": {**nova["spec"], "dbArchive": archive}}
    p, _ = stage.pass_over(await stage.pool())
    p.cached = lambda ref, ns, name: older if ref == NOVAS else None
    assert (await reconcile_nova_ref(p)).requeue_after is None  # the Nova's archive is not the pool's
    c = p.condition(conditions.NOVA_REF_READY)
    assert c is not None
    assert c["status"] == "True"
    with pytest.raises(errors.KubeError, match="openStackRelease"):
        await stage.admin.patch(NOVAS, "nova", {"spec": {"openStackRelease": "someday"}}, stage.ns)
    unparsable = {**older, "spec": {**older["spec"], "openStackRelease": "someday"}}  # no step's alone
    p, _ = stage.pass_over(await stage.admin.get(NOVACOMPUTES, "pool", stage.ns))
    p.cached = lambda ref, ns, name: unparsable if ref == NOVAS else None
    with pytest.raises(ValueError):  # noqa: PT011 - pydantic's ValidationError
        await reconcile_nova_ref(p)
    c = p.condition(conditions.NOVA_REF_READY)
    assert c is not None
    assert (c["status"], c["reason"]) == ("False", "NovaError")
    assert "does not parse" in c["message"]


async def test_with_the_flag_a_pool_does_not_send_an_unlabelled_password_to_keystone(stage: Stage) -> None:
    """--secret-ref-label: an unlabelled service-user Secret is refused by name (its password unread
    into credentials); once the label is on the stored Secret the next pass uses it."""
    label = "nova.openstack.c5c3.io/usable-by-nova"
    await stage.nova()
    policy = SecretRefPolicy(label)
    p, _ = stage.pass_over(await stage.pool(), settings=ComputeSettings(secret_refs=policy))
    assert (await reconcile_nova_ref(p)).requeue_after == 15
    c = p.condition("NovaReady")
    assert c is not None
    assert (c["status"], c["reason"]) == ("False", "SecretRefNotLabelled")
    assert f"Secret {stage.ns}/{SERVICE_USER} does not carry the label" in c["message"]
    assert p.credentials is None
    await stage.admin.patch(SECRETS, SERVICE_USER, {"metadata": {"labels": {label: "x"}}}, stage.ns)
    p, _ = stage.pass_over(p.cr, settings=ComputeSettings(secret_refs=policy))
    assert (await reconcile_nova_ref(p)).requeue_after is None
    assert p.credentials is not None
    assert p.credentials.password == "pw"


async def test_the_operators_calls_for_a_pool_trust_the_bundle_of_the_novas_contract(stage: Stage) -> None:
    """Issue 38 item 1: with the Nova's ``spec.tls``, the credentials carry the contract's
    ``https-ca.crt`` (the bundle the Nova's Secrets step read); without it, the system's CAs."""
    bundle = "-----BEGIN CERTIFICATE-----\nMIIBcontract\n-----END CERTIFICATE-----\n"
    await stage.secret(CONTRACT, encoded(**{"https-ca.crt": bundle, "password": "x"}))
    await stage.nova(release="2026.1", spec={"tls": {"caBundleSecretRef": {"name": "internal-ca"}}})
    p, _ = stage.pass_over(await stage.pool())
    assert (await reconcile_nova_ref(p)).requeue_after is None
    assert p.credentials is not None
    assert p.credentials.ca_bundle == bundle
    await stage.admin.patch(NOVAS, "nova", {"spec": {"tls": None}}, stage.ns)
    again, _ = stage.pass_over(p.cr)
    assert (await reconcile_nova_ref(again)).requeue_after is None
    assert again.credentials is not None
    assert again.credentials.ca_bundle == ""  # the contract may still carry it: the Nova no longer asks
