"""Mutual TLS to the bus and TLS to the cache (issue 38 item 5) through the Secrets and ComputeConfig
steps on the real API server: each Secret is waited for with its own reason, and the compute contract
carries the bus client certificate (so its rotation changes the contract, which rolls the pools)."""

from __future__ import annotations

import base64

from nova_operator import conditions, intervals
from nova_operator.kube import Kube
from nova_operator.kube.resources import SECRETS
from nova_operator.reconcilers.nova import compute_config, secrets
from tests.integration.nova.passes import ALL_SECRETS, make_ctx, secret, stored, stored_nova
from tests.integration.nova.reasons_kit import reason
from tests.integration.nova.requests import Recorder

BUS = {
    "secretRef": {"name": "bus"},
    "tls": {"caBundleSecretRef": {"name": "bus-ca"}, "clientCertSecretRef": {"name": "bus-client"}},
}
CACHE = {
    "servers": ["memcached-0.memcached:11211"],
    "tls": {"caBundleSecretRef": {"name": "cache-ca"}, "clientCertSecretRef": {"name": "cache-client"}},
}
CERT, KEY = "-----BEGIN CERTIFICATE-----\nclient\n", "-----BEGIN PRIVATE KEY-----\nk3y-1\n"


async def test_each_tls_secret_is_waited_for_with_its_reason_then_the_step_passes(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await stored_nova(admin, namespace, messaging=BUS, cache=CACHE)
    inputs = [*await stored(admin, namespace, *ALL_SECRETS, secret("bus-ca", **{"ca.crt": "CA"}))]
    ctx = make_ctx(ours, nova, *inputs)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after == intervals.SECRET_POLL
    status, why, message = reason(ctx, conditions.SECRETS_READY)
    assert (status, why) == ("False", "WaitingForMessagingClientCert")
    assert message == f"spec.messaging.tls.clientCertSecretRef: Secret {namespace}/bus-client not found"

    inputs += await stored(admin, namespace, secret("bus-client", **{"tls.crt": CERT}))
    ctx = make_ctx(ours, nova, *inputs)
    await secrets.reconcile_secrets(ctx)
    assert reason(ctx, conditions.SECRETS_READY)[2].endswith("bus-client has no key tls.key")

    await admin.patch(
        SECRETS, "bus-client", {"data": {"tls.key": base64.b64encode(KEY.encode()).decode()}}, namespace
    )
    inputs = [i for i in inputs if i["metadata"]["name"] != "bus-client"]
    inputs.append(await admin.get(SECRETS, "bus-client", namespace))
    ctx = make_ctx(ours, nova, *inputs)
    await secrets.reconcile_secrets(ctx)
    status, why, message = reason(ctx, conditions.SECRETS_READY)
    assert (status, why) == ("False", "WaitingForCacheTLS")
    assert message == f"spec.cache.tls.caBundleSecretRef: Secret {namespace}/cache-ca not found"

    inputs += await stored(admin, namespace, secret("cache-ca", **{"ca.crt": "CA"}))
    ctx = make_ctx(ours, nova, *inputs)
    await secrets.reconcile_secrets(ctx)
    status, why, message = reason(ctx, conditions.SECRETS_READY)
    assert (status, why) == ("False", "WaitingForCacheTLS")
    assert message == f"spec.cache.tls.clientCertSecretRef: Secret {namespace}/cache-client not found"

    inputs += await stored(admin, namespace, secret("cache-client", **{"tls.crt": CERT, "tls.key": KEY}))
    ctx = make_ctx(ours, nova, *inputs)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after is None
    assert reason(ctx, conditions.SECRETS_READY)[:2] == ("True", "SecretsAvailable")
    assert (ctx.state.broker_client_cert, ctx.state.broker_client_key) == (CERT, KEY)
    assert KEY not in repr(ctx.state)


async def test_the_compute_contract_carries_the_bus_client_pair_and_names_it(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await stored_nova(admin, namespace, messaging=BUS)
    ctx = make_ctx(ours, nova)
    ctx.state.broker_ca = "CA"  # the Secrets step ran first
    ctx.state.broker_client_cert, ctx.state.broker_client_key = CERT, KEY
    ctx.state.transport_url = "rabbit://nova:pw@bus:5671/"
    ctx.state.digest_key = b"k"
    await compute_config.reconcile_compute_config(ctx)
    assert reason(ctx, conditions.COMPUTE_CONFIG_READY)[:2] == ("True", "ComputeConfigPublished")
    stored_contract = await admin.get(SECRETS, "nova-compute-config", namespace)
    data = {k: base64.b64decode(v).decode() for k, v in stored_contract["data"].items()}
    assert (data["ca.crt"], data["tls.crt"], data["tls.key"]) == ("CA", CERT, KEY)
    assert "ssl_cert_file = /etc/nova/compute-config/tls.crt" in data["nova-compute.conf"]
    assert "ssl_key_file = /etc/nova/compute-config/tls.key" in data["nova-compute.conf"]

    # a rotated client certificate is a new contract (what the pools' compute-config hash follows)
    ctx = make_ctx(ours, nova)
    ctx.state.broker_ca, ctx.state.transport_url, ctx.state.digest_key = (
        "CA",
        "rabbit://nova:pw@bus:5671/",
        b"k",
    )
    ctx.state.broker_client_cert, ctx.state.broker_client_key = CERT, "-----BEGIN PRIVATE KEY-----\nk3y-2\n"
    await compute_config.reconcile_compute_config(ctx)
    rotated = await admin.get(SECRETS, "nova-compute-config", namespace)
    assert base64.b64decode(rotated["data"]["tls.key"]).decode().endswith("k3y-2\n")
