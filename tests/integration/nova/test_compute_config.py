"""The ComputeConfig step (``ComputeConfigReady``) on the real API server: the remote contract waits
for its URL while the local one is published, and a refused contract write is ``ComputeConfigError``.
"""

from __future__ import annotations

import base64

import pytest

from nova_operator import conditions
from nova_operator.kube import Kube
from nova_operator.kube.errors import KubeError
from nova_operator.kube.resources import SECRETS
from nova_operator.reconcilers.nova import (
    compute_config,
)
from tests.integration.nova.passes import make_ctx, stored_nova
from tests.integration.nova.reasons_kit import (
    reason,
    written,
)
from tests.integration.nova.requests import Recorder

REMOTE = {
    "keystoneEndpoint": "https://keystone.example.org/v3",
    "transportURLSecretRef": {"name": "remote-bus"},
}


async def test_a_remote_contract_without_its_url_waits_and_the_local_one_is_published(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    # the CRD refuses remoteCompute without messaging.tls (the stand-in took any spec)
    tls = {"secretRef": {"name": "bus"}, "tls": {"caBundleSecretRef": {"name": "ca"}}}
    ctx = make_ctx(ours, await stored_nova(admin, namespace, remoteCompute=REMOTE, messaging=tls))
    ctx.state.broker_ca = "CA"  # the Secrets step ran first
    ctx.state.transport_url = "rabbit://nova:pw@bus:5672/"
    ctx.state.digest_key = b"k"  # the Secrets step ran first
    assert (await compute_config.reconcile_compute_config(ctx)).requeue_after is None
    status, why, message = reason(ctx, conditions.COMPUTE_CONFIG_READY)
    assert (status, why) == ("False", "WaitingForRemoteTransportURL")
    assert "spec.remoteCompute.transportURLSecretRef" in message
    assert "remote-bus" in message
    assert ctx.status["computeConfigSecretRef"] == {"name": "nova-compute-config"}
    assert "remoteComputeConfigSecretRef" not in ctx.status
    assert [n for v, _, n in written(ours)] == ["nova-compute-config"]  # published, on the server


async def test_a_refused_contract_write_is_compute_config_error(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    url = "rabbit://nova:pw@bus:5672/"  # a server message may quote a value it refused
    ours.refuse["apply"] = KubeError(
        f'Secret {namespace}/nova-compute-config is invalid: data[transport_url]: "{url}" too long',
        status=422,
    )
    ctx = make_ctx(ours, await stored_nova(admin, namespace))
    ctx.state.transport_url = url
    ctx.state.digest_key = b"k"  # the Secrets step ran first
    with pytest.raises(KubeError):
        await compute_config.reconcile_compute_config(ctx)
    status, why, message = reason(ctx, conditions.COMPUTE_CONFIG_READY)
    assert (status, why) == ("False", "ComputeConfigError")
    assert "nova-compute-config" in message
    assert "pw@" not in message
    assert 'data[transport_url]: "***" too long' in message


async def test_the_contract_carries_the_https_bundle_its_fragment_names(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    bundle = "-----BEGIN CERTIFICATE-----\nMIIBhttps\n-----END CERTIFICATE-----\n"
    nova = await stored_nova(admin, namespace, tls={"caBundleSecretRef": {"name": "internal-ca"}})
    ctx = make_ctx(ours, nova)
    ctx.state.transport_url = "rabbit://nova:pw@bus:5672/"
    ctx.state.digest_key = b"k"
    ctx.state.https_ca = bundle  # the Secrets step ran first
    assert (await compute_config.reconcile_compute_config(ctx)).requeue_after is None
    assert reason(ctx, conditions.COMPUTE_CONFIG_READY)[:2] == ("True", "ComputeConfigPublished")
    stored = await admin.get(SECRETS, "nova-compute-config", namespace)
    assert base64.b64decode(stored["data"]["https-ca.crt"]).decode() == bundle
    fragment = base64.b64decode(stored["data"]["nova-compute.conf"]).decode()
    assert "[keystone_authtoken]\n" in fragment
    assert fragment.count("cafile = /etc/nova/compute-config/https-ca.crt\n") >= 4  # each client section
