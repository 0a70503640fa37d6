"""A pool's own pods wake it where a phase waits on them (issue 41; ``reconcilers.compute.pool_pods``).

The controller runs with the Pending, Draining, Releasing and settled polls at 600 s, so nothing in
these tests can move by a poll: a joining node turns Active only because its pod turning Ready woke
the pool (and the pass looked again until nova-compute, a little later, registered its service, also
after a pass whose compute call failed), and
a released node's service is deleted only because the pass after Releasing came at once and the
pod's going woke the pool, and a service seen down is seen up again only because its pod turning
Ready again woke the pool and the pass looked again until the service reported.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes_asyncio import client
from simcluster import ControlPlane

from nova_operator.kube.resources import DAEMONSETS, NOVACOMPUTES, NOVAS, PODS
from nova_operator.openstack.view import VIEW_TTL

from .conftest import Env
from .test_drain import hold_terms, phase, up

pytestmark = pytest.mark.integration
NEVER = 600.0  # no poll comes within a test


@pytest.fixture
async def env(
    control_plane: ControlPlane, admin: Any, admin_api: client.ApiClient, fake: Any, namespace: str
) -> AsyncIterator[Env]:
    e = Env(admin, admin_api, fake, namespace)
    e.intervals = dataclasses.replace(e.intervals, draining=NEVER, releasing=NEVER, settled=NEVER)
    await e.start(control_plane)
    try:
        yield e
    finally:
        await e.stop()


async def _reason(env: Env, reason: str) -> bool:
    cond = await env.condition("ServicesReady")
    return cond is not None and cond["reason"] == reason


async def test_a_joining_node_turns_active_when_its_pod_is_ready_and_its_service_registers_later(
    env: Env,
) -> None:
    await up(env)
    n3 = await env.node("n3", pool="a", zone="az1")
    await env.until(lambda: _is(env, "n3", "Pending"))  # the Node's relabel woke the pool
    await env.pod("n3")
    await env.until(lambda: _reason(env, "WaitingForServices"))
    await env.settle(1.0)
    assert await phase(env, "n3") == "Pending"

    await env.pod_ready("n3")
    await asyncio.sleep(2.0)  # nova-compute registers its service after its container started
    assert await phase(env, "n3") == "Pending"  # the pass woken by Ready found no service yet
    env.fake.add_compute(n3, zone="az1")
    await env.until(lambda: _is(env, "n3", "Active"))
    entry = await env.entry("n3")
    assert entry is not None
    assert entry["serviceState"] == "up"
    await env.until(lambda: _reason(env, "ServicesUp"))


async def test_a_join_whose_pass_found_the_compute_api_failing_looks_again_by_its_pod_not_the_30_s(
    env: Env,
) -> None:
    """A failed compute call requeues after the Pending/ComputeAPIError poll (600 s here); a node
    whose pod just turned Ready keeps the pod's recheck all the same, so the pool sees the service
    nova-compute registers once the API answers again."""
    await up(env)
    n3 = await env.node("n3", pool="a", zone="az1")
    await env.until(lambda: _is(env, "n3", "Pending"))
    await env.pod("n3")
    await env.until(lambda: _reason(env, "WaitingForServices"))
    await env.settle(1.0)

    env.fake.set_fault("error", api="nova")  # the compute API not answering yet
    await env.pod_ready("n3")
    await env.until(lambda: _api_failed(env))
    env.fake.set_fault(None)
    env.fake.add_compute(n3, zone="az1")  # no Kubernetes object changes: only a recheck sees it
    await env.until(lambda: _is(env, "n3", "Active"))
    await env.until(lambda: _reason(env, "ServicesUp"))


async def test_a_pod_ready_long_before_its_nova_is_looked_at_again_from_the_novas_ready(env: Env) -> None:
    """At a bring-up the pool's pods can be Ready long before the Nova (nova-compute cannot register
    before the conductor serves). The Nova turning Ready wakes the pool; its recheck counts from that
    Ready, not from the pod's, which is past every recheck here (a pod Ready two hours ago)."""
    await up(env)
    n3 = await env.node("n3", pool="a", zone="az1")
    await env.until(lambda: _is(env, "n3", "Pending"))
    await env.pod("n3")
    await env.until(lambda: _reason(env, "WaitingForServices"))
    long_ago = (datetime.now(UTC) - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": long_ago}
    await env.admin.patch_status(
        PODS, "pool-n3", {"status": {"phase": "Running", "conditions": [ready]}}, env.ns
    )
    await env.settle(2.0)  # the pass its Ready woke found no service, and has no recheck to ask
    assert await phase(env, "n3") == "Pending"

    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    nova_ready = {
        "type": "Ready",
        "status": "True",
        "reason": "AllReady",
        "message": "",
        "lastTransitionTime": now,
    }
    await env.admin.patch_status(NOVAS, "nova", {"status": {"conditions": [nova_ready]}}, env.ns)
    await asyncio.sleep(2.0)  # the pass the Nova's Ready woke found no service yet
    assert await phase(env, "n3") == "Pending"
    env.fake.add_compute(n3, zone="az1")  # registered through the conductor, a little later
    await env.until(lambda: _is(env, "n3", "Active"))


async def test_a_down_service_is_seen_up_soon_after_its_pod_turns_ready_again(env: Env) -> None:
    """A hung nova-compute: Nova reports its service down, the pool says ServicesDown; the kubelet
    restarts the pod, which turns Ready, and the service reports again a little later. The pod's
    Ready wakes the pool and its pass looks again until it sees the service up; a pod turning Ready
    beside services that are all up wakes nothing."""
    n1, _ = await up(env)
    await env.until(lambda: _reason(env, "ServicesUp"))
    await env.settle(1.0)
    passes = env.step_count("Services")
    await _pod_ready_since(env, "n1", datetime.now(UTC) - timedelta(hours=2))  # Ready long ago, up
    await env.settle(2.0)
    assert env.step_count("Services") == passes  # a converged pool: no pass

    env.fake.set_service_state(n1, "down")  # nova-compute hung
    await asyncio.sleep(VIEW_TTL)  # the settled pool's passes share a services read this long
    await env.admin.patch(NOVACOMPUTES, "pool", {"metadata": {"annotations": {"touch": "1"}}}, env.ns)
    await env.until(lambda: _reason(env, "ServicesDown"))  # that pass has no recheck: a pod Ready 2 h ago
    await env.settle(2.0)
    await _pod_not_ready(env, "n1")  # the kubelet restarts the container
    await env.pod_ready("n1")
    await asyncio.sleep(2.0)  # nova-compute reports again after its start
    assert await _reason(env, "ServicesDown")
    woken = env.step_count("Services") - passes
    assert woken >= 2  # the touch's pass and the one the Ready woke (and its rechecks)
    env.fake.set_service_state(n1, "up")  # no Kubernetes object changes: only a recheck sees it
    await env.until(lambda: _reason(env, "ServicesUp"))
    entry = await env.entry("n1")
    assert entry is not None
    assert entry["serviceState"] == "up"


async def _pod_ready_since(env: Env, short: str, since: datetime) -> None:
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": since.strftime("%Y-%m-%dT%H:%M:%SZ")}
    await env.admin.patch_status(
        PODS, f"pool-{short}", {"status": {"phase": "Running", "conditions": [ready]}}, env.ns
    )


async def _pod_not_ready(env: Env, short: str) -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    cond = {"type": "Ready", "status": "False", "lastTransitionTime": now}
    await env.admin.patch_status(
        PODS, f"pool-{short}", {"status": {"phase": "Running", "conditions": [cond]}}, env.ns
    )


async def _api_failed(env: Env) -> bool:
    for cond_type in ("AggregatesReady", "ServicesReady"):
        cond = await env.condition(cond_type)
        if cond is not None and cond["reason"] == "ComputeAPIError":
            return True
    return False


async def test_a_released_pod_is_let_go_at_once_and_its_going_deletes_the_service(env: Env) -> None:
    _, n2 = await up(env)
    env.fake.clear_calls()
    await env.relabel("n2", None)
    # Draining, disabled and counted empty in one pass: Releasing; the next pass renders the
    # DaemonSet without the hold term at once, not after the Releasing poll.
    await env.until(lambda: _is(env, "n2", "Releasing"))
    ds = await env.until(lambda: _released(env))  # pass k wrote the hold term before Releasing showed
    assert hold_terms(ds) == []
    await env.settle(2.0)  # every pass those writes caused has run
    assert env.fake.service_by_host(n2) is not None  # the pod is still there: no delete yet
    assert env.fake.calls("DELETE", "/v2.1/os-services") == []
    assert await phase(env, "n2") == "Releasing"

    await env.pod_gone("n2")  # only this event can bring the next pass
    await env.until(lambda: _gone(env, "n2"))
    assert env.fake.service_by_host(n2) is None
    assert len(env.fake.calls_to("DELETE", "/v2.1/os-services")) == 1
    assert len(env.fake.calls_to("PUT", "/v2.1/os-services")) == 1


async def _is(env: Env, short: str, want: str) -> bool:
    return await phase(env, short) == want


async def _gone(env: Env, short: str) -> bool:
    return await env.entry(short) is None


async def _released(env: Env) -> Any:
    ds = await env.get(DAEMONSETS, "pool-nova-compute")
    return ds if ds is not None and hold_terms(ds) == [] else None
