"""Single steps on a fake API: gates, last-good config, pruning, the probe cache, a refused URL."""

from __future__ import annotations

from typing import Any

from nova_operator import conditions
from nova_operator.kube.resources import CONFIGMAPS
from nova_operator.reconcilers.nova import config, health_check, secrets, transport_url_secret
from nova_operator.reconcilers.nova.context import HealthCache, NovaOptions, ProbeError
from tests.unit.reconcilers.nova.passes import ALL_SECRETS, NS, UID, make_ctx, secret


async def test_a_missing_key_is_a_wait_with_its_reason_and_no_value_handed_on(kube: Any, events: Any) -> None:
    ctx = make_ctx(kube, events, secret("api-db", username="a"), *ALL_SECRETS[1:])
    result = await secrets.reconcile_secrets(ctx)
    assert result.requeue_after == 15.0
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert (c["status"], c["reason"]) == ("False", "WaitingForDBCredentials")
    assert c["message"] == "spec.apiDatabase: Secret ns/api-db has no key password"
    assert c["observedGeneration"] == 3
    assert ctx.state.authtoken_digest == ""
    assert events.emitted == []


async def test_all_secrets_present_hand_on_values_and_digests(kube: Any, events: Any) -> None:
    ctx = make_ctx(kube, events, *ALL_SECRETS)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after is None
    assert ctx.state.service_user_password == "ps"
    assert len(ctx.state.authtoken_digest) == 64
    # the first pass creates the Nova's digest key (issue 13 item 11), nothing else
    assert kube.writes() == [("apply", "secrets", "nova-digest-key")]


async def test_a_transport_url_without_port_is_rejected_before_anything_is_written(
    kube: Any, events: Any
) -> None:
    ctx = make_ctx(kube, events, secret("bus", transport_url="rabbit://u:topsecret@host/"))
    result = await transport_url_secret.reconcile_transport_url_secret(ctx)
    assert result.requeue_after == 15.0
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert c["reason"] == "TransportURLRejected"
    assert "topsecret" not in c["message"]
    assert kube.writes() == []


def _config_map(name: str, created: str, owner: str = UID) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": NS,
            "creationTimestamp": created,
            "labels": {"cobaltcore.c5c3.io/config-base": "nova-config"},
            "ownerReferences": [{"uid": owner, "controller": True, "kind": "Nova", "name": "nova"}],
        },
        "data": {"nova.conf": ""},
    }


async def test_config_keeps_the_current_and_three_newest_historical_config_maps(
    kube: Any, events: Any
) -> None:
    old = [_config_map(f"nova-config-{i:08d}", f"2026-01-01T00:00:0{i}Z") for i in range(6)]
    foreign = _config_map("nova-config-ffffffff", "2020-01-01T00:00:00Z", owner="someone-else")
    for cm in [*old, foreign]:
        kube.put(CONFIGMAPS, cm)
    ctx = make_ctx(kube, events, *old, foreign)
    assert (await config.reconcile_config(ctx)).requeue_after is None
    deleted = sorted(name for verb, _, name in kube.calls if verb == "delete")
    assert deleted == ["nova-config-00000000", "nova-config-00000001", "nova-config-00000002"]
    assert ctx.state.config_map.startswith("nova-config-")
    assert "nova.conf" in ctx.state.config_keys


async def test_an_unknown_option_keeps_the_config_the_api_deployment_mounts(kube: Any, events: Any) -> None:
    live = _config_map("nova-config-0000aaaa", "2026-01-01T00:00:00Z")
    api = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "nova", "namespace": NS},
        "spec": {
            "template": {
                "spec": {"volumes": [{"name": "config", "configMap": {"name": "nova-config-0000aaaa"}}]}
            }
        },
    }
    ctx = make_ctx(kube, events, live, api, extraConfig={"nosuchsection": {"x": "1"}})
    assert (
        await config.reconcile_config(ctx)
    ).requeue_after is None  # the pipeline goes on with the last-good config
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert c["reason"] == "ConfigError"
    assert "no such section" in c["message"]
    assert ctx.state.config_map == "nova-config-0000aaaa"
    assert kube.writes() == []
    assert events.emitted[0][:2] == ("Warning", "ConfigError")


async def test_a_first_install_with_an_unrenderable_config_hands_on_nothing(kube: Any, events: Any) -> None:
    ctx = make_ctx(kube, events, extraConfig={"nosuchsection": {"x": "1"}})
    await config.reconcile_config(ctx)
    assert ctx.state.config_map == ""


async def test_a_passing_probe_is_reused_for_thirty_seconds(kube: Any, events: Any) -> None:
    calls: list[str] = []
    clock = [100.0]

    async def probe(url: str, limit: float) -> int:
        calls.append(url)
        return 200

    options = NovaOptions(prober=probe, health=HealthCache(), monotonic=lambda: clock[0])
    ctx = make_ctx(kube, events, options=options)
    ctx.status["endpoint"] = "http://nova.ns.svc.cluster.local:8774"
    assert (await health_check.reconcile_health_check(ctx)).requeue_after is None
    assert calls == ["http://nova.ns.svc.cluster.local:8774/"]
    clock[0] += 29
    await health_check.reconcile_health_check(ctx)
    assert len(calls) == 1
    clock[0] += 2
    await health_check.reconcile_health_check(ctx)
    assert len(calls) == 2


async def test_the_probe_follows_the_nova_api_url_setting(kube: Any, events: Any) -> None:
    calls: list[str] = []

    async def probe(url: str, limit: float) -> int:
        calls.append(url)
        return 200

    outside = NovaOptions(prober=probe, nova_api_url=lambda name, ns: f"http://127.0.0.1:9774/{ns}/{name}/")
    ctx = make_ctx(kube, events, options=outside)
    ctx.status["endpoint"] = "http://nova.ns.svc.cluster.local:8774"
    await health_check.reconcile_health_check(ctx)
    assert calls == [f"http://127.0.0.1:9774/{ctx.namespace}/{ctx.name}/"]


async def test_a_failing_probe_reports_its_reason_and_retries_in_ten_seconds(kube: Any, events: Any) -> None:
    async def unhealthy(url: str, limit: float) -> int:
        return 503

    async def refused(url: str, limit: float) -> int:
        raise ProbeError("ConnectionFailed", "GET x: connection refused")

    ctx = make_ctx(kube, events, options=NovaOptions(prober=unhealthy))
    ctx.status["endpoint"] = "http://e"
    assert (await health_check.reconcile_health_check(ctx)).requeue_after == 10.0
    c = ctx.condition(conditions.NOVA_API_READY)
    assert c is not None
    assert c["reason"] == "APIUnhealthy"
    assert c["message"] == f"GET {health_check.probe_url(ctx)} answered 503 Service Unavailable"
    ctx = make_ctx(kube, events, options=NovaOptions(prober=refused))
    ctx.status["endpoint"] = "http://e"
    await health_check.reconcile_health_check(ctx)
    c = ctx.condition(conditions.NOVA_API_READY)
    assert c is not None
    assert c["reason"] == "ConnectionFailed"


async def test_a_remote_transport_url_that_is_not_rabbit_halts_without_echoing_it(
    kube: Any, events: Any
) -> None:
    import pytest

    from nova_operator.reconcilers.nova import compute_config

    remote = {
        "keystoneEndpoint": "https://keystone.example.org/v3",
        "transportURLSecretRef": {"name": "remote"},
    }
    tls = {"secretRef": {"name": "bus"}, "tls": {"caBundleSecretRef": {"name": "ca"}}}
    ctx = make_ctx(
        kube,
        events,
        secret("remote", transport_url="amqp://u:topsecret@h:5672/"),
        remoteCompute=remote,
        messaging=tls,
    )
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


async def test_the_secret_store_gate_runs_only_when_a_store_is_named(kube: Any, events: Any) -> None:
    from nova_operator.kube.resources import CLUSTER_SECRET_STORES

    store = {"kind": "ClusterSecretStore", "name": "openbao"}
    ctx = make_ctx(kube, events, *ALL_SECRETS, secretStoreRef=store)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after == 15.0
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert (c["reason"], c["message"]) == ("SecretStoreNotReady", "ClusterSecretStore openbao not found")
    ready = [{"type": "Ready", "status": "True"}]
    kube.put(CLUSTER_SECRET_STORES, {"metadata": {"name": "openbao"}, "status": {"conditions": ready}})
    ctx = make_ctx(kube, events, *ALL_SECRETS, secretStoreRef=store)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after is None
    calls = len(kube.calls)
    key = secret("nova-digest-key", key="k" * 64)  # as the first passes created it: owned by the Nova
    key["metadata"]["ownerReferences"] = [{"kind": "Nova", "name": "nova", "uid": UID, "controller": True}]
    ctx = make_ctx(kube, events, *ALL_SECRETS, key)  # no store named: not even read
    await secrets.reconcile_secrets(ctx)
    assert len(kube.calls) == calls
