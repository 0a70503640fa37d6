"""The HealthCheck step's NovaAPIReady probe against API pods that run the tenant's image (issue 26,
items 1 and 3), in a pass over a Nova stored by the real API server.

Each API is a small aiohttp server on 127.0.0.1 (``simcluster.hazards.hostile``). The probe reads the status
line and headers only, follows no redirect, and puts a status code and its standard phrase into the
condition, never a byte of the answer.
"""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import AsyncIterator
from typing import Any

import pytest
from simcluster.hazards.hostile import HeaderTrickle, HostileServer

from nova_operator import conditions
from nova_operator.kube import Kube
from nova_operator.reconcilers.nova import health_check
from nova_operator.reconcilers.nova.context import NovaOptions
from tests.integration.nova.passes import make_ctx, stored_nova
from tests.integration.nova.requests import Recorder

MARKER = "MARKER-51c2-remote-body"
GUARD = 10.0  # keeps a failing test from hanging; the probe's own deadline is 1 s
MiB = 1024 * 1024


@pytest.fixture
async def api() -> AsyncIterator[HostileServer]:
    server = await HostileServer().start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def elsewhere() -> AsyncIterator[HostileServer]:
    server = await HostileServer().start()
    server.on("GET", "/", HostileServer.answer(200, {"versions": []}))
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def probe(admin: Kube, namespace: str) -> Any:
    """Runs the step once against ``url``; the condition it set. The step sends no API request."""
    nova = await stored_nova(admin, namespace)
    ours = Recorder.of(admin)

    async def run(url: str) -> dict[str, Any]:
        async def prober(probe_url: str, _: float) -> int:
            return await health_check.http_probe(probe_url, 1.0)

        options = NovaOptions(prober=prober, nova_api_url=lambda name, ns: url)
        ctx = make_ctx(ours, nova, options=options)
        ctx.status["endpoint"] = f"http://nova.{namespace}.svc.cluster.local:8774"
        async with asyncio.timeout(GUARD):
            await health_check.reconcile_health_check(ctx)
        assert ours.calls == []
        cond = ctx.condition(conditions.NOVA_API_READY)
        assert cond is not None
        return dict(cond)

    return run


async def test_a_redirect_is_unhealthy_and_not_followed(
    probe: Any, api: HostileServer, elsewhere: HostileServer
) -> None:
    api.on("GET", "/", HostileServer.redirect(elsewhere.url + "/", status=302))
    cond = await probe(api.url)
    assert (cond["status"], cond["reason"]) == ("False", "APIUnhealthy")
    assert cond["message"] == f"GET {api.url}/ answered 302 Found, a redirect (not followed)"
    assert elsewhere.hits == []


async def test_an_error_body_never_reaches_the_condition(probe: Any, api: HostileServer) -> None:
    api.on("GET", "/", HostileServer.answer(500, text=f"<h1>{MARKER}</h1>\n" * 30))
    cond = await probe(api.url)
    assert (cond["status"], cond["reason"]) == ("False", "APIUnhealthy")
    assert cond["message"] == f"GET {api.url}/ answered 500 Internal Server Error"


async def test_a_huge_answer_is_not_read(probe: Any, api: HostileServer) -> None:
    api.on("GET", "/", api.huge(64 * MiB))
    tracemalloc.start()
    try:
        cond = await probe(api.url)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (cond["status"], cond["reason"]) == ("True", "APIHealthy")
    assert peak < 8 * MiB  # the status line and headers, not the 64 MiB body
    (stream,) = api.streams
    async with asyncio.timeout(GUARD):
        await stream.ended.wait()
    assert not stream.finished  # the connection was dropped


async def test_headers_that_trickle_are_cut_off_at_the_deadline(probe: Any) -> None:
    server = await HeaderTrickle(b"HTTP/1.1 200 OK\r\n").start()
    try:
        cond = await probe(server.url)
    finally:
        await server.stop()
    assert (cond["status"], cond["reason"]) == ("False", "HealthCheckTimeout")
    assert cond["message"] == f"GET {server.url}/: timed out after 1 s (no complete answer)"
