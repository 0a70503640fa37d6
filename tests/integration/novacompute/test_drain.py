"""The drain and the release (novacompute-crd.md §12, §13, §16, §19).

A node leaving the pool: its enabled service is disabled exactly once, nothing enables it
or migrates a server, and it is deleted only after the fake Nova counts zero servers on the
host and the pool's pod is gone from the node.
"""

from __future__ import annotations

from typing import Any

import pytest
from simcluster.standins.openstack import Aggregate

from nova_operator.kube.resources import DAEMONSETS, NOVACOMPUTES
from nova_operator.reconcilers.compute.steps import STEP_CONDITIONS

from .conftest import Env

pytestmark = pytest.mark.integration


async def up(env: Env, servers: dict[str, int] | None = None) -> tuple[str, str]:
    """A Ready pool on n1 (az1) and n2 (az2), a pod on each, services registered with ``servers``."""
    servers = servers or {}
    await env.nova()
    n1 = await env.node("n1", pool="a", zone="az1")
    n2 = await env.node("n2", pool="a", zone="az2")
    for short, name in (("n1", n1), ("n2", n2)):
        env.fake.add_compute(name, servers=servers.get(short, 0))
        await env.pod(short)
    await env.pool()
    await env.daemonset_rolled_out(count=2)

    async def ready() -> bool:
        cond = await env.condition("Ready")
        return cond is not None and cond["status"] == "True"

    await env.until(ready)
    return n1, n2


async def phase(env: Env, short: str, pool: str = "pool") -> str | None:
    entry = await env.entry(short, pool)
    return entry["phase"] if entry else None


def hold_terms(ds: dict[str, Any]) -> list[str]:
    terms = ds["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    return [t["matchFields"][0]["values"][0] for t in terms if "matchExpressions" not in t]


def no_enable_no_migration(env: Env) -> None:
    puts = env.fake.calls("PUT", "/v2.1/os-services")
    assert all(c.body.get("status") == "disabled" for c in puts), "a service was enabled"
    assert [
        c
        for c in env.fake.calls()
        if "migrat" in c.path or (c.path.endswith("/action") and "servers" in c.path)
    ] == []


async def test_a_node_labelled_out_is_drained_then_released(env: Env) -> None:
    n1, n2 = await up(env, servers={"n2": 2})
    env.fake.clear_calls()

    await env.relabel("n2", None)
    await env.until(lambda: _is(env, "n2", "Draining"))
    entry = await env.entry("n2")
    assert entry is not None
    assert entry["instances"] == 2
    assert entry["serviceStatus"] == "disabled"
    reason = f"c5c3.io: leaving NovaCompute {env.ns}/pool"
    assert entry["disabledReason"] == reason
    svc = env.fake.service_by_host(n2)
    assert svc is not None
    assert (svc.status, svc.disabled_reason) == ("disabled", reason)

    # The hold term keeps the pod on the leaving node; the pool term no longer selects it.
    ds = await env.until(lambda: _ds_holding(env, n2))
    assert hold_terms(ds) == [n2]
    services = await env.until(lambda: _reason(env, "ServicesReady", "Draining"))
    assert services["status"] == "True"
    assert services["message"] == f"{n2}: 2 instances"
    nodes = await env.condition("NodesReady")
    assert nodes is not None
    assert nodes["message"] == "1 nodes selected, 1 leaving"

    # Several polls later: still exactly one disable, no delete, the servers untouched.
    await env.settle(2.0)
    assert len(env.fake.calls_to("PUT", "/v2.1/os-services")) == 1
    assert env.fake.calls("DELETE", "/v2.1/os-services") == []
    assert await phase(env, "n2") == "Draining"

    # The host empties (hvo's eviction, or the owners): Releasing, but the pod is still there.
    env.fake.set_servers(n2, 0)
    await env.until(lambda: _is(env, "n2", "Releasing"))
    entry = await env.entry("n2")
    assert entry is not None
    assert "instances" not in entry
    ds = await env.until(lambda: _ds_holding(env, None))
    assert hold_terms(ds) == []  # the pod is released
    await env.settle(1.0)
    assert env.fake.calls("DELETE", "/v2.1/os-services") == []
    assert env.fake.service_by_host(n2) is not None

    # The pod goes: the service is deleted and the entry dropped.
    await env.pod_gone("n2")
    await env.until(lambda: _gone(env, "n2"))
    assert env.fake.service_by_host(n2) is None
    deletes = env.fake.calls_to("DELETE", "/v2.1/os-services")
    assert len(deletes) == 1
    assert deletes[0].status == 204
    assert len(env.fake.calls_to("PUT", "/v2.1/os-services")) == 1
    no_enable_no_migration(env)
    assert env.fake.service_by_host(n1) is not None

    disabled = await env.events("ComputeServiceDisabled")
    deleted = await env.events("ComputeServiceDeleted")
    assert len(disabled) == 1
    assert disabled[0]["count"] == 1
    assert n2 in disabled[0]["message"]
    assert len(deleted) == 1
    assert n2 in deleted[0]["message"]
    services = await env.until(lambda: _reason(env, "ServicesReady", "ServicesUp"))
    assert services["status"] == "True"
    for step, cond in STEP_CONDITIONS.items():
        assert env.step_errors(step, cond) == 0.0, step


async def test_a_409_on_delete_sends_the_node_back_to_draining(env: Env) -> None:
    _, n2 = await up(env)
    env.fake.set_migrations(n2, 1)  # no servers, but a migration in flight: DELETE answers 409
    await env.pod_gone("n2")
    await env.relabel("n2", None)

    async def conflicted() -> bool:
        return any(c.status == 409 for c in env.fake.calls("DELETE", "/v2.1/os-services"))

    await env.until(conflicted)
    assert await phase(env, "n2") in ("Draining", "Releasing")  # back to Draining, then counted again
    assert env.fake.service_by_host(n2) is not None
    assert await env.events("ComputeServiceDeleted") == []
    env.fake.set_migrations(n2, 0)
    await env.until(lambda: _gone(env, "n2"))
    assert env.fake.service_by_host(n2) is None
    assert len(env.fake.calls_to("PUT", "/v2.1/os-services")) == 1  # disabled once, never again
    no_enable_no_migration(env)
    assert env.step_errors("Services", "ServicesReady") == 0.0  # a 409 is not an error


async def test_a_404_on_delete_counts_as_done(env: Env) -> None:
    _, n2 = await up(env)
    env.fake.gone_on_delete.add(n2)
    await env.pod_gone("n2")
    await env.relabel("n2", None)
    await env.until(lambda: _gone(env, "n2"))
    deletes = env.fake.calls_to("DELETE", "/v2.1/os-services")
    assert [c.status for c in deletes] == [404]
    assert len(await env.events("ComputeServiceDeleted")) == 1


async def test_nova_unreachable_changes_nothing_and_the_drain_resumes(env: Env) -> None:
    _, n2 = await up(env, servers={"n2": 1})
    await env.relabel("n2", None)
    await env.until(lambda: _is(env, "n2", "Draining"))
    before = await env.entry("n2")

    await env.fake.go_offline("nova")
    env.fake.set_servers(n2, 0)  # the host empties while the operator cannot see it
    aggregates = await env.until(lambda: _reason(env, "AggregatesReady", "ComputeAPIError"))
    assert aggregates["status"] == "False"
    await env.settle(2.0)
    assert await env.entry("n2") == before  # nothing moved
    ready = await env.condition("Ready")
    assert ready is not None
    assert ready["status"] == "False"
    assert env.step_errors("Aggregates", "AggregatesReady") == 0.0  # a requeue, not an error

    await env.fake.go_online("nova")
    await env.until(lambda: _is(env, "n2", "Releasing"))
    await env.pod_gone("n2")
    await env.until(lambda: _gone(env, "n2"))
    assert env.fake.service_by_host(n2) is None
    assert len(env.fake.calls_to("PUT", "/v2.1/os-services")) == 1
    no_enable_no_migration(env)


async def test_a_cell_that_does_not_answer_stops_every_drain_decision(env: Env) -> None:
    _, n2 = await up(env)
    env.fake.set_cell_down({n2})
    await env.relabel("n2", None)
    await env.until(lambda: _reason(env, "ServicesReady", "ComputeAPIError"))
    await env.settle(1.0)
    assert await phase(env, "n2") == "Draining"
    assert env.fake.calls("PUT", "/v2.1/os-services") == []
    assert env.fake.calls("DELETE", "/v2.1/os-services") == []
    env.fake.set_cell_down(set())
    await env.pod_gone("n2")
    await env.until(lambda: _gone(env, "n2"))


async def test_deleting_the_pool_releases_every_node_before_the_finalizer_goes(env: Env) -> None:
    n1, _n2 = await up(env, servers={"n1": 1})
    # Leftovers of an earlier pool of this Nova, and an aggregate that is not ours at all.
    env.fake.aggregates[900] = _aggregate(
        900, "az-old", {"c5c3.io:nova": f"{env.ns}/nova", "filter_tenant_id": "t"}
    )
    env.fake.aggregates[901] = _aggregate(901, "az-foreign", {})
    await env.admin.delete(NOVACOMPUTES, "pool", env.ns)

    await env.until(lambda: _is(env, "n1", "Draining"))
    await env.until(lambda: _is(env, "n2", "Releasing"))
    ds = await env.until(lambda: _ds_holding(env, n1))
    assert hold_terms(ds) == [n1]  # no pool term while deleting; n1 keeps its pod
    await env.pod_gone("n2")
    await env.until(lambda: _gone(env, "n2"))
    await env.settle(1.0)
    cr = await env.cr()
    assert cr["metadata"]["deletionTimestamp"]
    assert "nova.openstack.c5c3.io/compute-drain" in cr["metadata"]["finalizers"]  # n1 still has a server

    env.fake.set_servers(n1, 0)
    await env.until(lambda: _is(env, "n1", "Releasing"))
    await env.until(lambda: _no_daemonset(env))  # no term left: the DaemonSet is removed
    await env.pod_gone("n1")
    await env.until(lambda: _cr_gone(env), within=30)

    assert env.fake.services == {}
    assert {a.name for a in env.fake.aggregates.values()} == {"az-old", "az-foreign"}
    assert {e["message"] for e in await env.events("AggregateDeleted")} == {
        "deleted aggregate az1: empty and no longer needed",
        "deleted aggregate az2: empty and no longer needed",
        "deleted aggregate tenant_filter_tests: empty and no longer needed",
    }
    kept = await env.events("AggregateKept")
    assert kept
    assert "filter_tenant_id" in kept[0]["message"]
    assert len(await env.events("ComputeServiceDeleted")) == 2
    assert len(env.fake.calls_to("PUT", "/v2.1/os-services")) == 2
    no_enable_no_migration(env)


# -- probes ----------------------------------------------------------------------------------


def _aggregate(id_: int, name: str, metadata: dict[str, str]) -> Any:
    return Aggregate(id=id_, name=name, availability_zone=None, metadata=metadata)


async def _is(env: Env, short: str, want: str) -> bool:
    return await phase(env, short) == want


async def _gone(env: Env, short: str) -> bool:
    return await env.entry(short) is None


async def _reason(env: Env, cond_type: str, reason: str) -> dict[str, Any] | None:
    cond = await env.condition(cond_type)
    return cond if cond is not None and cond["reason"] == reason else None


async def _ds_holding(env: Env, node: str | None) -> dict[str, Any] | None:
    ds = await env.get(DAEMONSETS, "pool-nova-compute")
    if ds is None:
        return None
    held = hold_terms(ds)
    return ds if (held == [node] if node else held == []) else None


async def _no_daemonset(env: Env) -> bool:
    return await env.get(DAEMONSETS, "pool-nova-compute") is None


async def _cr_gone(env: Env) -> bool:
    return await env.get(NOVACOMPUTES, "pool") is None


async def test_an_unreachable_nova_api_holds_the_deletion_until_it_returns(env: Env) -> None:
    _, n2 = await up(env)
    await env.fake.go_offline("nova")
    await env.admin.delete(NOVACOMPUTES, "pool", env.ns)
    await env.until(lambda: _reason(env, "AggregatesReady", "ComputeAPIError"))
    await env.settle(1.5)
    cr = await env.cr()
    assert "nova.openstack.c5c3.io/compute-drain" in cr["metadata"]["finalizers"]
    assert env.fake.service_by_host(n2) is not None
    await env.fake.go_online("nova")
    await env.until(lambda: _is(env, "n2", "Releasing"))
    await env.pod_gone("n1")
    await env.pod_gone("n2")
    await env.until(lambda: _cr_gone(env), within=30)
    assert env.fake.services == {}


async def test_a_pool_whose_nova_is_gone_is_released_without_any_nova_call(env: Env) -> None:
    await env.node("n1", pool="a", zone="az1")
    await env.pool()
    await env.until(lambda: _reason(env, "NovaReady", "NovaNotFound"))
    await env.admin.delete(NOVACOMPUTES, "pool", env.ns)
    await env.until(lambda: _cr_gone(env))
    assert env.fake.calls(api="nova") == []


async def test_a_node_selected_again_mid_drain_goes_back_to_active_and_stays_disabled(env: Env) -> None:
    _, n2 = await up(env, servers={"n2": 1})
    await env.relabel("n2", None)
    await env.until(lambda: _is(env, "n2", "Draining"))
    await env.relabel("n2", "a")
    await env.until(lambda: _is(env, "n2", "Active"))
    entry = await env.entry("n2")
    assert entry is not None
    assert entry["serviceStatus"] == "disabled"  # re-enabling is a person's decision
    assert "instances" not in entry
    await env.settle(1.0)
    puts = env.fake.calls_to("PUT", "/v2.1/os-services")
    assert len(puts) == 1
    no_enable_no_migration(env)
    assert env.fake.service_by_host(n2).status == "disabled"  # type: ignore[union-attr]
