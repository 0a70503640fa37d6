"""A pool comes up, reaches Ready, and keeps its onboarding aggregates (novacompute-crd.md §5-§11)."""

from __future__ import annotations

from typing import Any

import pytest

from nova_operator.kube.resources import CONFIGMAPS, DAEMONSETS, DEPLOYMENTS, JOBS
from nova_operator.metrics import WRITE_VERBS
from nova_operator.reconcilers.compute.steps import STEP_CONDITIONS
from tests.integration.novacompute.inputs import ready

from .conftest import Env

pytestmark = pytest.mark.integration

READY_REASONS = {
    "NovaReady": "NovaResolved",
    "NodesReady": "NodesResolved",
    "ConfigReady": "ConfigRendered",
    "DaemonSetReady": "DaemonSetReady",
    "VPAReady": "VPANotRequired",
    "AggregatesReady": "AggregatesEnsured",
    "ServicesReady": "ServicesUp",
    "Ready": "AllReady",
    "ExtraConfigHealthy": "NoOwnedKeysOverridden",
}


async def test_a_pool_comes_up_and_reaches_ready(env: Env) -> None:
    await env.nova()
    n1 = await env.node("n1", pool="a", zone="az1")
    n2 = await env.node("n2", pool="a", zone="az2")
    await env.node("other", pool="b", zone="az1")
    await env.pool()

    ds = await env.until(lambda: env.get(DAEMONSETS, "pool-nova-compute"))
    terms = ds["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}]
    assert ds["metadata"]["ownerReferences"][0]["kind"] == "NovaCompute"
    pending = await env.until(lambda: env.condition("ServicesReady"))
    assert pending["reason"] in ("WaitingForServices", "ComputeAPIError")  # no service registered yet

    # nova-compute starts on both nodes and registers; the DaemonSet controller reports the rollout.
    env.fake.add_compute(n1)
    env.fake.add_compute(n2)
    await env.daemonset_rolled_out(count=2)
    await env.until(lambda: ready(env))

    cr = await env.cr()
    status = cr["status"]
    assert {c["type"]: c["reason"] for c in status["conditions"]} == READY_REASONS
    assert all(c["observedGeneration"] == cr["metadata"]["generation"] for c in status["conditions"])
    assert status["observedGeneration"] == cr["metadata"]["generation"]
    assert status["installedImage"] == "ghcr.io/c5c3/nova-compute:2025.2"
    assert status["desiredNumberScheduled"] == 2
    assert status["numberReady"] == 2
    assert [(e["name"], e["phase"], e["zone"]) for e in status["nodes"]] == [
        (n1, "Active", "az1"),
        (n2, "Active", "az2"),
    ]
    assert status["nodes"][0]["serviceID"] == env.fake.service_by_host(n1).uuid  # type: ignore[union-attr]
    assert status["nodes"][0]["serviceStatus"] == "enabled"
    assert status["nodes"][0]["serviceState"] == "up"
    assert "nova.openstack.c5c3.io/compute-drain" in cr["metadata"]["finalizers"]

    # The pool config: one immutable ConfigMap, mounted by the DaemonSet with the contract.
    ds = await env.get(DAEMONSETS, "pool-nova-compute")
    assert ds is not None
    volumes = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    cm = await env.get(CONFIGMAPS, volumes["pool-config"]["configMap"]["name"])
    assert cm is not None
    assert cm["immutable"] is True
    assert "virt_type = kvm" in cm["data"]["compute-pool.conf"]
    assert volumes["compute-config"]["secret"]["secretName"] == "nova-compute-config"
    hash_annotation = ds["spec"]["template"]["metadata"]["annotations"][
        "nova.openstack.c5c3.io/compute-config-hash"
    ]
    assert len(hash_annotation) == 64

    # Onboarding aggregates: one per zone plus tenant_filter_tests, each marked with the Nova.
    aggregates = {a.name: a for a in env.fake.aggregates.values()}
    assert set(aggregates) == {"az1", "az2", "tenant_filter_tests"}
    assert aggregates["az1"].availability_zone == "az1"
    assert aggregates["tenant_filter_tests"].availability_zone is None
    assert {a.metadata["c5c3.io:nova"] for a in aggregates.values()} == {f"{env.ns}/nova"}
    created = await env.events("AggregateCreated")
    assert sorted(e["message"] for e in created) == [
        "created aggregate az1 with availability zone az1",
        "created aggregate az2 with availability zone az2",
        "created aggregate tenant_filter_tests",
    ]
    assert {e["source"]["component"] for e in created} == {"novacompute-controller"}
    assert all(e["involvedObject"]["kind"] == "NovaCompute" for e in created)

    # At most one Keystone token per pass: the Nova's view shares one within its window (issue 41).
    tokens = env.fake.calls_to("POST", "/v3/auth/tokens")
    assert 1 <= len(tokens) <= env.step_count("Aggregates")
    # No call ever enables a service, and nothing but the mapping read used 2.88.
    assert env.fake.calls("PUT", "/v2.1/os-services") == []

    # Step metrics: every step ran and was timed; the error series exist and stayed at zero.
    for step, cond in STEP_CONDITIONS.items():
        assert env.step_count(step) > 0, step
        assert env.step_errors(step, cond) == 0.0, step

    # Steady state: passes keep polling, but a converged status is not written again.
    await env.settle(0.5)
    rv = (await env.cr())["metadata"]["resourceVersion"]
    polls = env.step_count("Services")
    writes = env.metrics.api_request_count(WRITE_VERBS)
    await env.settle(3.0)
    assert env.step_count("Services") >= polls + 2
    assert (await env.cr())["metadata"]["resourceVersion"] == rv
    assert env.metrics.api_request_count(WRITE_VERBS) == writes  # no write of any kind


async def test_a_pool_waits_for_its_nova_and_the_contract(env: Env) -> None:
    await env.node("n1", pool="a", zone="az1")
    await env.pool()
    await env.until(lambda: env.condition("NovaReady"))
    cond = await env.condition("NovaReady")
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "NovaNotFound")
    assert await env.get(DAEMONSETS, "pool-nova-compute") is None
    await env.nova()

    async def resolved() -> bool:
        c = await env.condition("NovaReady")
        return c is not None and c["reason"] == "NovaResolved"

    await env.until(resolved)
    await env.until(lambda: env.get(DAEMONSETS, "pool-nova-compute"))


async def test_an_unmapped_host_stays_pending_and_the_pool_runs_host_discovery(env: Env) -> None:
    await env.nova()
    n1 = await env.node("n1", pool="a", zone="az1")
    labels = {"app": "nova-api"}
    await env.admin.create(
        DEPLOYMENTS,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "nova", "namespace": env.ns},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [{"name": "api", "image": "ghcr.io/c5c3/nova:2025.2"}],
                        "volumes": [{"name": "config", "configMap": {"name": "nova-config-0123abcd"}}],
                    },
                },
            },
        },
        env.ns,
    )
    env.fake.add_compute(n1, mapped=False)  # registered, but not in the cell's host mappings yet
    await env.pool()

    async def waiting() -> dict[str, Any] | None:
        cond = await env.condition("ServicesReady")
        return cond if cond is not None and cond["reason"] == "WaitingForHostMapping" else None

    cond = await env.until(waiting)
    assert cond["status"] == "False"
    job = await env.until(lambda: env.get(JOBS, "nova-discover-hosts"))
    assert job["metadata"]["ownerReferences"][0]["kind"] == "Nova"
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "ghcr.io/c5c3/nova:2025.2"
    assert container["command"][-3:] == ["cell_v2", "discover_hosts", "--verbose"]
    started = await env.until(lambda: env.events("HostDiscoveryStarted"))
    assert n1 in started[0]["message"]
    assert (await env.entry("n1") or {}).get("phase") == "Pending"

    env.fake.map_host(n1)  # what the Job (or the scheduler's periodic discovery) does

    async def active() -> bool:
        return (await env.entry("n1") or {}).get("phase") == "Active"

    await env.until(active)
    assert len(await env.events("HostDiscoveryStarted")) == 1  # one Job for the whole wait
