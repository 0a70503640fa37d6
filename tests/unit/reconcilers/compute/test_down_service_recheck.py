"""A service seen down is looked at again soon after its pod turns Ready again (issue 41).

A hung nova-compute gets its service reported down (``ServicesDown``); the kubelet restarts its pod,
and the service reports again a little after that pod is Ready. The pass then looks again on the
join's schedule (``pool_pods.recheck``) until that gap reaches the steady 60 s poll, reading the
services anew each time. A pool whose services are all up gets neither the earlier look nor an
extra compute API request.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from nova_operator.kube.types import Object
from nova_operator.openstack import ComputeAPIError, ComputeService
from nova_operator.reconcilers.compute.context import ComputePass
from nova_operator.reconcilers.compute.services import reconcile_services

from .test_failed_call_recheck import make_pass
from .test_pool_pods import NOW, pod

DOWN: Object = {"name": "n1", "phase": "Active", "zone": "az1", "serviceID": "s1", "serviceState": "down"}
UP: Object = {**DOWN, "serviceState": "up"}
OTHER: Object = {"name": "n2", "phase": "Active", "zone": "az1", "serviceID": "s2", "serviceState": "up"}


class Answering:
    """The compute API answering with the services given; every call counted by name."""

    def __init__(self, states: dict[str, str], *, fail: bool = False) -> None:
        self.services = {
            host: ComputeService(f"s{host[1:]}", host, "enabled", state, "") for host, state in states.items()
        }
        self.fail = fail
        self.calls: list[str] = []

    async def list_services(self) -> dict[str, ComputeService]:
        self.calls.append("list_services")
        if self.fail:
            raise ComputeAPIError("GET /os-services: HTTP 0 no answer")
        return dict(self.services)

    async def mapped_hosts(self) -> set[str]:
        self.calls.append("mapped_hosts")
        return set(self.services)


def _pass(ledger: list[Object], ready_ago: float, api: Answering) -> ComputePass:
    p, _ = make_pass(ledger, [pod("n1", since=NOW - timedelta(seconds=ready_ago)), pod("n2")])
    p._client = api  # type: ignore[assignment]
    fresh: list[tuple[str, ...]] = []

    async def fresh_read(*kinds: str) -> object:
        fresh.append(kinds)
        return api

    p.fresh = fresh_read  # type: ignore[method-assign]
    p.fresh_reads = fresh  # type: ignore[attr-defined]
    return p


def _cond(p: ComputePass) -> tuple[bool, str]:
    c = next(c for c in p.conditions if c["type"] == "ServicesReady")
    return c["status"] == "True", str(c["reason"])


@pytest.mark.parametrize(
    ("ready_ago", "again"), [(8, 2.0), (40, 10.0), (200, 50.0), (240, 60.0), (900, 60.0)]
)
async def test_a_down_service_whose_pod_turned_ready_is_looked_at_again_until_the_steady_poll(
    ready_ago: float, again: float
) -> None:
    api = Answering({"n1": "down", "n2": "up"})
    p = _pass([DOWN, OTHER], ready_ago, api)
    result = await reconcile_services(p)
    assert _cond(p) == (False, "ServicesDown")
    assert result.requeue_after == again  # a quarter of the age since Ready, the 60 s poll past 240 s
    assert api.calls == ["list_services"]
    # a look for the return reads the services anew, not a sibling's read of up to 10 s ago
    assert p.fresh_reads == ([("services",)] if again < 60.0 else [])  # type: ignore[attr-defined]


async def test_the_service_seen_up_again_ends_the_looks() -> None:
    api = Answering({"n1": "up", "n2": "up"})
    p = _pass([DOWN, OTHER], 8, api)
    result = await reconcile_services(p)
    assert _cond(p) == (True, "ServicesUp")
    assert p.status["nodes"][0]["serviceState"] == "up"
    assert result.requeue_after == 60.0


@pytest.mark.parametrize("ready_ago", [0, 8, 40])
async def test_a_converged_pool_gets_no_earlier_look_and_no_extra_request(ready_ago: float) -> None:
    """All services up: a pod's recent Ready changes nothing (one shared read, the 60 s poll)."""
    api = Answering({"n1": "up", "n2": "up"})
    p = _pass([UP, OTHER], ready_ago, api)
    result = await reconcile_services(p)
    assert _cond(p) == (True, "ServicesUp")
    assert result.requeue_after == 60.0
    assert api.calls == ["list_services"]
    assert p.fresh_reads == []  # type: ignore[attr-defined]


async def test_a_failed_call_beside_a_down_service_with_a_ready_pod_keeps_its_look() -> None:
    api = Answering({}, fail=True)
    p = _pass([DOWN, OTHER], 8, api)
    result = await reconcile_services(p)
    assert _cond(p) == (False, "ComputeAPIError")
    assert result.requeue_after == 2.0
    converged = _pass([UP, OTHER], 8, Answering({}, fail=True))
    assert (await reconcile_services(converged)).requeue_after == 30.0  # the spec's
