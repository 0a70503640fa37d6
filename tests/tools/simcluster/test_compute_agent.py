"""The compute agent's pass on the fake Nova: one registration per node, whatever the node's pods.

The pass reads every host's service from one walk of the fake's services (``services_by_host``), so
at 5,000 nodes it is not a walk per pod; these cases hold its behaviour to what it was per pod."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from simcluster.client.asynckube import AsyncKube
from simcluster.standins.compute import COMPUTE_COMPONENT, ComputeAgent
from simcluster.standins.openstack import FakeOpenStack


def _pod(name: str, node: str, *, ready: bool = True) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": "openstack",
            "name": name,
            "uid": name,
            "resourceVersion": "1",
            "labels": {"app.kubernetes.io/component": COMPUTE_COMPONENT},
        },
        "spec": {"nodeName": node},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def _agent(*pods: dict[str, Any]) -> tuple[ComputeAgent, FakeOpenStack]:
    fake = FakeOpenStack()
    agent = ComputeAgent(cast(AsyncKube, None), {}, fake, register_delay=0.0)
    for pod in pods:
        agent.pods.put(pod)
    return agent, fake


def _hosts(fake: FakeOpenStack) -> list[str]:
    return sorted(s.host for s in fake.compute_services())


def test_each_ready_pods_node_registers_once_over_passes() -> None:
    agent, fake = _agent(_pod("a", "node-a"), _pod("b", "node-b"), _pod("c", "node-c", ready=False))
    for _ in range(3):
        asyncio.run(agent.agent_pass())
    assert _hosts(fake) == ["node-a", "node-b"]


def test_two_ready_pods_on_one_node_in_one_pass_register_one_service() -> None:
    """A rollout's old and new pod both Ready on the node: nova-compute's row is the host's, one."""
    agent, fake = _agent(_pod("old", "node-a"), _pod("new", "node-a"))
    asyncio.run(agent.agent_pass())
    assert _hosts(fake) == ["node-a"]


def test_a_node_whose_pod_is_gone_goes_down_and_comes_back_up_with_its_pod() -> None:
    pod = _pod("a", "node-a")
    agent, fake = _agent(pod)
    asyncio.run(agent.agent_pass())
    agent.pods.remove(pod)
    asyncio.run(agent.agent_pass())
    assert [s.state for s in fake.compute_services()] == ["down"]
    agent.pods.put(pod)
    asyncio.run(agent.agent_pass())
    assert [(s.host, s.state) for s in fake.compute_services()] == [("node-a", "up")]


def test_services_by_host_finds_what_service_by_host_finds() -> None:
    fake = FakeOpenStack()
    first = fake.add_compute("node-a")
    fake.add_compute("node-a")  # a second row of the same host: the first registered is the host's
    fake.add_service("ctl-0", "nova-scheduler")
    found = fake.services_by_host()
    assert found["node-a"] is first is fake.service_by_host("node-a")
    assert set(found) == {"node-a", "ctl-0"}
    assert found["ctl-0"] is fake.service_by_host("ctl-0")
