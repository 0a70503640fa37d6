"""Issue 13: what the tenant controls (status references, Secret contents) never takes a step astray."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from nova_operator import conditions
from nova_operator.kube.resources import RABBITMQ_CLUSTERS, SECRETS
from nova_operator.reconcilers.nova import transport_url_secret
from tests.unit.reconcilers.nova.passes import make_ctx

NS = "ns"


def _rabbit(secret_ref: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": RABBITMQ_CLUSTERS.api_version,
        "kind": "RabbitmqCluster",
        "metadata": {"name": "rabbit", "namespace": NS},
        "status": {"defaultUser": {"secretReference": secret_ref}},
    }


def _bus_secret(namespace: str, name: str) -> dict[str, Any]:
    values = {"username": "admin", "password": "victim-password", "host": "rabbit.victim", "port": "5672"}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items()},
    }


@pytest.mark.parametrize(
    "secret_ref",
    [
        {"name": "prod-rabbit-default-user", "namespace": "victim-ns"},
        {"name": "../../victim-ns/secrets/prod-rabbit-default-user"},
        {"name": ".."},
    ],
)
async def test_a_default_user_secret_outside_the_namespace_is_never_read(
    kube: Any, events: Any, secret_ref: dict[str, str]
) -> None:
    kube.put(RABBITMQ_CLUSTERS, _rabbit(secret_ref))
    victim = _bus_secret("victim-ns", "prod-rabbit-default-user")
    kube.put(SECRETS, victim)
    ctx = make_ctx(kube, events, victim, messaging={"clusterRef": {"name": "rabbit"}})
    result = await transport_url_secret.reconcile_transport_url_secret(ctx)
    assert result.requeue_after == 15.0
    cond = ctx.condition(conditions.SECRETS_READY)
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "WaitingForMessagingCredentials")
    assert "own namespace" in cond["message"]
    assert "victim-password" not in cond["message"]
    assert ctx.state.transport_url == ""
    assert kube.writes() == []
    assert [c for c in kube.calls if c[1] == str(SECRETS)] == []


async def test_a_default_user_secret_in_the_own_namespace_is_used(kube: Any, events: Any) -> None:
    kube.put(RABBITMQ_CLUSTERS, _rabbit({"name": "rabbit-default-user", "namespace": NS}))
    ctx = make_ctx(
        kube, events, _bus_secret(NS, "rabbit-default-user"), messaging={"clusterRef": {"name": "rabbit"}}
    )
    ctx.state.digest_key = b"k" * 32  # what the Secrets step hands on
    assert (await transport_url_secret.reconcile_transport_url_secret(ctx)).requeue_after is None
    assert ctx.state.transport_url == "rabbit://admin:victim-password@rabbit.victim:5672/"


def _plain(name: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NS},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


async def test_a_password_oslo_cannot_carry_is_a_condition_naming_the_secret_not_the_value(
    kube: Any, events: Any
) -> None:
    from nova_operator.reconcilers.nova import secrets

    ctx = make_ctx(
        kube,
        events,
        _plain("api-db", username="a", password="p"),
        _plain("cell-db", username="c", password="p"),
        _plain("service-user", password="Zq9\\$Wv7"),
        _plain("metadata-proxy", shared_secret="m$$"),
        messaging={"secretRef": {"name": "bus"}},
    )
    result = await secrets.reconcile_secrets(ctx)
    assert result.requeue_after == 15.0
    cond = ctx.condition(conditions.SECRETS_READY)
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "CredentialNotRepresentable")
    assert "spec.serviceUser.secretRef" in cond["message"]
    assert "ns/service-user" in cond["message"]
    assert "Zq9" not in cond["message"]
    assert ctx.state.service_user_password == ""


def _raw(name: str, **data: bytes) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NS},
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }


@pytest.mark.parametrize("step_name", ["Secrets", "DBConnectionSecrets", "TransportURLSecret"])
async def test_a_secret_value_that_is_not_text_is_the_steps_condition_naming_secret_and_key(
    kube: Any, events: Any, step_name: str
) -> None:
    from nova_operator.pipeline import NullObserver, run_sequence
    from nova_operator.reconcilers.nova.steps import NOVA_STEPS

    binary = b"\xff\xfe\x00Zq9-not-text"
    secrets = {
        "api-db": _raw(
            "api-db", username=b"a", password=binary if step_name != "TransportURLSecret" else b"p"
        ),
        "cell-db": _raw("cell-db", username=b"c", password=b"p"),
        "service-user": _raw("service-user", password=b"p"),
        "metadata-proxy": _raw("metadata-proxy", shared_secret=b"m"),
        "bus": _raw("bus", transport_url=binary),
    }
    ctx = make_ctx(kube, events, *secrets.values(), messaging={"secretRef": {"name": "bus"}})
    if step_name == "DBConnectionSecrets":  # the gate step reads the same Secret first
        ctx.caches[SECRETS].upsert(_raw("api-db", username=b"a", password=binary))
    steps = [s for s in NOVA_STEPS if s.name == step_name]
    result = await run_sequence(steps, ctx, NullObserver())
    assert result.requeue_after is None
    cond = ctx.condition(conditions.SECRETS_READY)
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "SecretNotText")
    expected = (
        "key transport_url of Secret ns/bus"
        if step_name == "TransportURLSecret"
        else "key password of Secret ns/api-db"
    )
    assert expected in cond["message"]
    assert "Zq9" not in cond["message"]


async def test_credential_digests_are_keyed_with_the_novas_own_key(kube: Any, events: Any) -> None:
    import hashlib
    import hmac

    from nova_operator.reconcilers.nova import secrets

    inputs = (
        _plain("api-db", username="a", password="p"),
        _plain("cell-db", username="c", password="p"),
        _plain("service-user", password="hunter2"),
        _plain("metadata-proxy", shared_secret="m"),
    )
    ctx = make_ctx(kube, events, *inputs, messaging={"secretRef": {"name": "bus"}})
    assert (await secrets.reconcile_secrets(ctx)).requeue_after is None
    created = kube.store[("secrets", NS, "nova-digest-key")]
    key = base64.b64decode(created["data"]["key"])
    assert len(key) == 64  # 32 random bytes, hex
    digest = ctx.state.authtoken_digest
    assert digest != hashlib.sha256(b"hunter2").hexdigest()  # no offline guess test from a Deployment
    assert digest == hmac.new(key, b"hunter2", hashlib.sha256).hexdigest()
    # the key is kept: the next pass (key cached) writes nothing and gives the same digest
    again = make_ctx(kube, events, *inputs, created, messaging={"secretRef": {"name": "bus"}})
    writes = len(kube.writes())
    await secrets.reconcile_secrets(again)
    assert again.state.authtoken_digest == digest
    assert len(kube.writes()) == writes
    # a rotation still changes it (and so rolls the pods)
    rotated = make_ctx(
        kube,
        events,
        *inputs[:2],
        _plain("service-user", password="hunter3"),
        inputs[3],
        created,
        messaging={"secretRef": {"name": "bus"}},
    )
    await secrets.reconcile_secrets(rotated)
    assert rotated.state.authtoken_digest not in ("", digest)
