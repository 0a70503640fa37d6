"""Optional features: gateways, autoscaling, network policy, the remote contract, the console proxy off."""

from __future__ import annotations

from typing import Any

from nova_operator.kube import Kube
from nova_operator.kube.errors import NotFound
from nova_operator.kube.resources import (
    DEPLOYMENTS,
    HPAS,
    HTTPROUTES,
    NETWORK_POLICIES,
    NOVAS,
    SECRETS,
    SERVICES,
)
from tests.integration.nova.inputs import cond, create_inputs, is_ready, nova_body, secret

from .conftest import Operator, Simulator, wait_for  # type: ignore[import-not-found]


async def absent(admin: Kube, ref: Any, name: str, ns: str) -> bool:
    try:
        await admin.get(ref, name, ns)
    except NotFound:
        return True
    return False


async def test_every_optional_feature_becomes_ready_and_the_disabled_console_proxy_is_gone(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    await create_inputs(admin, ns)
    await admin.create(SECRETS, secret("rabbitmq-ca", {"ca.crt": "FAKE CA"}), ns)
    await admin.create(
        SECRETS,
        secret("remote-bus", {"transport_url": "rabbit://nova:s3cret-remote@bus.example.org:5671/"}),
        ns,
    )
    gateway = {"hostname": "nova.example.org", "parentRef": {"name": "public", "namespace": "gateways"}}
    body = nova_body(
        consoleProxy={"enabled": False},
        gateway=gateway,
        autoscaling={"maxReplicas": 3, "targetCPUUtilization": 80},
        networkPolicy={"ingress": [{"namespaceSelector": {"matchLabels": {"team": "edge"}}}]},
        remoteCompute={
            "keystoneEndpoint": "https://keystone.example.org/v3",
            "transportURLSecretRef": {"name": "remote-bus"},
        },
    )
    body["spec"]["metadata"]["gateway"] = {
        "hostname": "metadata.example.org",
        "parentRef": {"name": "public"},
    }
    body["spec"]["messaging"]["tls"] = {"caBundleSecretRef": {"name": "rabbitmq-ca"}}
    await admin.create(NOVAS, body, ns)
    nova = await wait_for(lambda: admin.get(NOVAS, "nova", ns), is_ready, within=60)

    assert cond(nova, "ConsoleProxyReady")["reason"] == "ConsoleProxyDisabled"
    assert cond(nova, "ConsoleHTTPRouteReady")["reason"] == "HTTPRouteNotRequired"
    assert cond(nova, "HTTPRouteReady")["reason"] == "HTTPRouteAccepted"
    assert cond(nova, "MetadataHTTPRouteReady")["reason"] == "HTTPRouteAccepted"
    assert cond(nova, "HPAReady")["reason"] == "HPAReady"
    assert cond(nova, "NetworkPolicyReady")["reason"] == "NetworkPolicyReady"
    assert nova["status"]["endpoint"] == "https://nova.example.org/"
    assert nova["status"]["remoteComputeConfigSecretRef"] == {"name": "nova-remote-compute-config"}
    for ref, name in (
        (DEPLOYMENTS, "nova-novncproxy"),
        (SERVICES, "nova-novncproxy"),
        (HTTPROUTES, "nova-console"),
    ):
        assert await absent(admin, ref, name, ns), name
    assert await absent(admin, NETWORK_POLICIES, "nova-novncproxy", ns)
    assert (await admin.get(HPAS, "nova", ns))["spec"]["maxReplicas"] == 3
    contract = await admin.get(SECRETS, "nova-compute-config", ns)
    assert "ca.crt" in contract["data"]
    remote = await admin.get(SECRETS, "nova-remote-compute-config", ns)
    assert sorted(remote["data"]) == sorted(contract["data"])
    assert remote["data"]["transport_url"] != contract["data"]["transport_url"]

    # quiet steady state with every optional object in place
    simulator.hold_jobs = True
    writes = operator.writes()
    for _ in range(20):
        await operator.force_pass("nova")
    assert operator.writes() - writes == 0
    simulator.hold_jobs = False

    # turning the console proxy on brings its Deployment, Service and route back
    nova["spec"]["consoleProxy"] = {
        "enabled": True,
        "gateway": {"hostname": "novnc.example.org", "parentRef": {"name": "public"}},
    }
    nova["spec"].pop("remoteCompute")
    nova = await admin.replace(NOVAS, nova, ns)
    generation = nova["metadata"]["generation"]
    nova = await wait_for(
        lambda: admin.get(NOVAS, "nova", ns),
        lambda n: is_ready(n) and n["status"]["observedGeneration"] == generation,
        within=60,
    )
    assert cond(nova, "ConsoleProxyReady")["reason"] == "ConsoleProxyReady"
    for ref, name in (
        (DEPLOYMENTS, "nova-novncproxy"),
        (SERVICES, "nova-novncproxy"),
        (HTTPROUTES, "nova-console"),
    ):
        assert not await absent(admin, ref, name, ns), name
    assert not await absent(admin, NETWORK_POLICIES, "nova-novncproxy", ns)
    assert "remoteComputeConfigSecretRef" not in nova["status"]
    assert await absent(admin, SECRETS, "nova-remote-compute-config", ns)


async def test_the_start_up_probe_sees_which_optional_kinds_the_cluster_serves(operator: Operator) -> None:
    from nova_operator.reconcilers.nova.controller import probe_options

    options = await probe_options(operator.kube)
    assert options.gateway_api is True
    assert options.mariadb_api is True
    assert options.operator_namespace == "nova-system"
