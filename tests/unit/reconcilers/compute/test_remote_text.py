"""A compute API error body never reaches a NovaCompute condition or event (issue 26, item 3)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from simcluster.hazards.hostile import HostileServer

from nova_operator.openstack import Credentials
from nova_operator.reconcilers.compute.aggregates import reconcile_aggregates
from tests.unit.reconcilers.compute.fakes import FakeCompute, make_pass

MARKER = "MARKER-7f3a-remote-body"


@pytest.fixture
async def nova() -> AsyncIterator[HostileServer]:
    server = await HostileServer().start()
    server.on("POST", "/v3/auth/tokens", HostileServer.token())
    try:
        yield server
    finally:
        await server.stop()


async def test_an_error_body_never_reaches_the_aggregates_condition(nova: HostileServer) -> None:
    nova.on("GET", "/v2.1/os-aggregates", HostileServer.answer(503, text=MARKER * 40))
    p, events = make_pass([{"name": "n1", "phase": "Active", "zone": "az1"}], compute=FakeCompute())
    p._client = None
    p.credentials = Credentials(nova.url, "nova", "pw", "service", "Default", "Default")
    p.nova_url = nova.url
    await reconcile_aggregates(p)
    cond = p.condition("AggregatesReady")
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "ComputeAPIError")
    assert cond["message"] == "GET /v2.1/os-aggregates: HTTP 503 Service Unavailable"
    assert all(MARKER not in message for _, _, message in events.emitted)
