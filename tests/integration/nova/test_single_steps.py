"""Single steps on the real API server: gates, last-good config, pruning, the probe cache, a refused URL.

Each step runs in a ``make_ctx`` pass over a Nova stored by kube-apiserver (``passes.py``); the
inputs are stored there too and the caches hold the server's copies. Requests are recorded by a
wrapper around the real client (``Recorder``) with the server's answers.
"""

from __future__ import annotations

import pytest

from nova_operator import conditions
from nova_operator.kube import Kube
from nova_operator.kube.errors import NotFound
from nova_operator.kube.resources import CLUSTER_SECRET_STORES, CONFIGMAPS, NOVAS, SECRETS
from nova_operator.kube.types import Object
from nova_operator.metrics import WRITE_VERBS
from nova_operator.reconcilers.nova import compute_config, config, health_check, secrets, transport_url_secret
from nova_operator.reconcilers.nova.context import HealthCache, NovaOptions, ProbeError
from tests.integration.nova.passes import (
    ALL_SECRETS,
    Emitted,
    make_ctx,
    owned_by,
    secret,
    stored,
    stored_nova,
)
from tests.integration.nova.requests import Recorder


def written(kube: Recorder) -> list[tuple[str, str, str]]:
    """(verb, resource, name) of every write request sent."""
    return [(v, r, n) for v, r, n, _ in kube.calls if v in WRITE_VERBS]


async def test_a_missing_key_is_a_wait_with_its_reason_and_no_value_handed_on(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await stored_nova(admin, namespace)
    events = Emitted()
    inputs = await stored(admin, namespace, secret("api-db", username="a"), *ALL_SECRETS[1:])
    ctx = make_ctx(ours, nova, *inputs, events=events)
    result = await secrets.reconcile_secrets(ctx)
    assert result.requeue_after == 15.0
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert (c["status"], c["reason"]) == ("False", "WaitingForDBCredentials")
    assert c["message"] == f"spec.apiDatabase: Secret {namespace}/api-db has no key password"
    assert c["observedGeneration"] == nova["metadata"]["generation"]
    assert ctx.state.authtoken_digest == ""
    assert events.emitted == []


async def test_all_secrets_present_hand_on_values_and_digests(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await stored_nova(admin, namespace)
    ctx = make_ctx(ours, nova, *await stored(admin, namespace, *ALL_SECRETS))
    assert (await secrets.reconcile_secrets(ctx)).requeue_after is None
    assert ctx.state.service_user_password == "ps"
    assert len(ctx.state.authtoken_digest) == 64
    # the first pass creates the Nova's digest key (issue 13 item 11), nothing else
    assert written(ours) == [("apply", "secrets", "nova-digest-key")]


async def test_a_transport_url_without_port_is_rejected_before_anything_is_written(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await stored_nova(admin, namespace)
    bus = await stored(admin, namespace, secret("bus", transport_url="rabbit://u:topsecret@host/"))
    ctx = make_ctx(ours, nova, *bus)
    result = await transport_url_secret.reconcile_transport_url_secret(ctx)
    assert result.requeue_after == 15.0
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert c["reason"] == "TransportURLRejected"
    assert "topsecret" not in c["message"]
    assert written(ours) == []


def config_map(name: str) -> Object:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"cobaltcore.c5c3.io/config-base": "nova-config"}},
        "data": {"nova.conf": ""},
    }


async def test_config_keeps_the_current_and_three_newest_historical_config_maps(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await stored_nova(admin, namespace)
    foreign = await stored_nova(admin, namespace, "someone-else")
    # created oldest first; the server stamps whole seconds, and a tie is broken by name
    old = await stored(
        admin, namespace, *(owned_by(config_map(f"nova-config-{i:08d}"), nova) for i in range(6))
    )
    theirs = await stored(admin, namespace, owned_by(config_map("nova-config-ffffffff"), foreign))
    ctx = make_ctx(ours, nova, *old, *theirs)
    assert (await config.reconcile_config(ctx)).requeue_after is None
    deleted = sorted(n for v, _, n in written(ours) if v == "delete")
    assert deleted == ["nova-config-00000000", "nova-config-00000001", "nova-config-00000002"]
    assert ctx.state.config_map.startswith("nova-config-")
    assert ctx.state.policy_map == ""  # no spec.policy: no policy ConfigMap
    left = {cm["metadata"]["name"] for cm in (await admin.list(CONFIGMAPS, namespace))["items"]}
    kept = {f"nova-config-{i:08d}" for i in (3, 4, 5)} | {"nova-config-ffffffff", ctx.state.config_map}
    assert kept <= left
    assert not left & set(deleted)


async def test_an_unknown_option_keeps_the_config_the_api_deployment_mounts(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await stored_nova(admin, namespace, extraConfig={"nosuchsection": {"x": "1"}})
    api = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "nova"},
        "spec": {
            "selector": {"matchLabels": {"app": "nova"}},
            "template": {
                "metadata": {"labels": {"app": "nova"}},
                "spec": {
                    "containers": [{"name": "api", "image": "nova"}],
                    "volumes": [{"name": "config", "configMap": {"name": "nova-config-0000aaaa"}}],
                },
            },
        },
    }
    live = await stored(
        admin, namespace, owned_by(config_map("nova-config-0000aaaa"), nova), owned_by(api, nova)
    )
    events = Emitted()
    ctx = make_ctx(ours, nova, *live, events=events)
    assert (await config.reconcile_config(ctx)).requeue_after is None  # the pipeline goes on, last-good
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert c["reason"] == "ConfigError"
    assert "no such section" in c["message"]
    assert ctx.state.config_map == "nova-config-0000aaaa"
    assert written(ours) == []
    assert events.emitted[0][:2] == ("Warning", "ConfigError")


async def test_a_first_install_with_an_unrenderable_config_hands_on_nothing(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await stored_nova(admin, namespace, extraConfig={"nosuchsection": {"x": "1"}})
    ctx = make_ctx(ours, nova)
    await config.reconcile_config(ctx)
    assert ctx.state.config_map == ""
    assert written(ours) == []


async def test_a_passing_probe_is_reused_for_thirty_seconds(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    calls: list[str] = []
    clock = [100.0]

    async def probe(url: str, limit: float) -> int:
        calls.append(url)
        return 200

    options = NovaOptions(prober=probe, health=HealthCache(), monotonic=lambda: clock[0])
    ctx = make_ctx(ours, await stored_nova(admin, namespace), options=options)
    ctx.status["endpoint"] = f"http://nova.{namespace}.svc.cluster.local:8774"
    assert (await health_check.reconcile_health_check(ctx)).requeue_after is None
    assert calls == [f"http://nova.{namespace}.svc.cluster.local:8774/"]
    clock[0] += 29
    await health_check.reconcile_health_check(ctx)
    assert len(calls) == 1
    clock[0] += 2
    await health_check.reconcile_health_check(ctx)
    assert len(calls) == 2
    assert ours.calls == []


async def test_the_probe_follows_the_nova_api_url_setting(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    calls: list[str] = []

    async def probe(url: str, limit: float) -> int:
        calls.append(url)
        return 200

    outside = NovaOptions(prober=probe, nova_api_url=lambda name, ns: f"http://127.0.0.1:9774/{ns}/{name}/")
    ctx = make_ctx(ours, await stored_nova(admin, namespace), options=outside)
    ctx.status["endpoint"] = f"http://nova.{namespace}.svc.cluster.local:8774"
    await health_check.reconcile_health_check(ctx)
    assert calls == [f"http://127.0.0.1:9774/{namespace}/nova/"]


async def test_a_failing_probe_reports_its_reason_and_retries_in_ten_seconds(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    async def unhealthy(url: str, limit: float) -> int:
        return 503

    async def refused(url: str, limit: float) -> int:
        raise ProbeError("ConnectionFailed", "GET x: connection refused")

    nova = await stored_nova(admin, namespace)
    ctx = make_ctx(ours, nova, options=NovaOptions(prober=unhealthy))
    ctx.status["endpoint"] = "http://e"
    assert (await health_check.reconcile_health_check(ctx)).requeue_after == 10.0
    c = ctx.condition(conditions.NOVA_API_READY)
    assert c is not None
    assert c["reason"] == "APIUnhealthy"
    assert c["message"] == f"GET {health_check.probe_url(ctx)} answered 503 Service Unavailable"
    ctx = make_ctx(ours, nova, options=NovaOptions(prober=refused))
    ctx.status["endpoint"] = "http://e"
    await health_check.reconcile_health_check(ctx)
    c = ctx.condition(conditions.NOVA_API_READY)
    assert c is not None
    assert c["reason"] == "ConnectionFailed"


async def test_a_remote_transport_url_that_is_not_rabbit_halts_without_echoing_it(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    remote = {
        "keystoneEndpoint": "https://keystone.example.org/v3",
        "transportURLSecretRef": {"name": "remote"},
    }
    tls = {"secretRef": {"name": "bus"}, "tls": {"caBundleSecretRef": {"name": "ca"}}}
    nova = await stored_nova(admin, namespace, remoteCompute=remote, messaging=tls)
    inputs = await stored(admin, namespace, secret("remote", transport_url="amqp://u:topsecret@h:5672/"))
    ctx = make_ctx(ours, nova, *inputs)
    ctx.state.broker_ca = "CA"
    ctx.state.transport_url = "rabbit://u:p@h:5672/"
    ctx.state.digest_key = b"k"  # the Secrets step ran first
    with pytest.raises(compute_config.RemoteContractRefused):
        await compute_config.reconcile_compute_config(ctx)
    c = ctx.condition(conditions.COMPUTE_CONFIG_READY)
    assert c is not None
    assert c["reason"] == "ComputeConfigError"
    assert "'amqp'" in c["message"]
    assert "topsecret" not in c["message"]
    assert written(ours) == [("apply", "secrets", "nova-compute-config")]  # the remote one is not written


async def test_the_secret_store_gate_runs_only_when_a_store_is_named(
    admin: Kube, ours: Recorder, namespace: str, external_secrets: None
) -> None:
    name = f"openbao-{namespace}"  # cluster-scoped: a name of this test's own
    store = {"kind": "ClusterSecretStore", "name": name}
    nova = await stored_nova(admin, namespace, secretStoreRef=store)
    inputs = await stored(admin, namespace, *ALL_SECRETS)
    ctx = make_ctx(ours, nova, *inputs)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after == 15.0
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert (c["reason"], c["message"]) == ("SecretStoreNotReady", f"ClusterSecretStore {name} not found")
    body = {"apiVersion": CLUSTER_SECRET_STORES.api_version, "kind": "ClusterSecretStore"}
    await admin.create(CLUSTER_SECRET_STORES, {**body, "metadata": {"name": name}, "spec": {}})
    try:
        ready = {"conditions": [{"type": "Ready", "status": "True", "reason": "Valid", "message": "ok"}]}
        await admin.patch_status(CLUSTER_SECRET_STORES, name, {"status": ready})
        ctx = make_ctx(ours, nova, *inputs)
        assert (await secrets.reconcile_secrets(ctx)).requeue_after is None
    finally:
        await admin.delete(CLUSTER_SECRET_STORES, name)
    with pytest.raises(NotFound):
        await admin.get(CLUSTER_SECRET_STORES, name)
    key = await admin.get(SECRETS, "nova-digest-key", namespace)  # the passes above made it
    assert key["metadata"]["ownerReferences"][0]["uid"] == nova["metadata"]["uid"]
    plain = await admin.patch(NOVAS, "nova", {"spec": {"secretStoreRef": None}}, namespace)
    calls = len(ours.calls)
    ctx = make_ctx(ours, plain, *inputs, key)  # no store named: not even read
    await secrets.reconcile_secrets(ctx)
    assert len(ours.calls) == calls
