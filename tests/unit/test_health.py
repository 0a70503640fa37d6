"""The probe and metrics HTTP endpoints."""

from __future__ import annotations

import asyncio

import pytest

from nova_operator.health import HttpServer, health_routes, metrics_routes, parse_address
from nova_operator.metrics import Metrics


async def get(port: int, path: str, method: str = "GET") -> tuple[int, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    raw = await reader.read()
    writer.close()
    await writer.wait_closed()
    head, _, body = raw.decode().partition("\r\n\r\n")
    return int(head.split()[1]), body


def test_parse_address() -> None:
    assert parse_address(":8080") == ("0.0.0.0", 8080)
    assert parse_address("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_address("[::1]:9") == ("::1", 9)
    assert parse_address("0") is None
    with pytest.raises(ValueError, match="invalid bind address"):
        parse_address("localhost")


async def test_readyz_follows_the_ready_check_and_healthz_is_always_ok() -> None:
    ready = False
    metrics = Metrics()
    metrics.api_requests.labels("get", "configmaps", "200").inc()
    server = HttpServer("127.0.0.1", 0, {**health_routes(lambda: ready), **metrics_routes(metrics.render)})
    await server.start()
    try:
        assert await get(server.port, "/healthz") == (200, "ok\n")
        assert (await get(server.port, "/readyz"))[0] == 503
        ready = True
        assert await get(server.port, "/readyz") == (200, "ok\n")
        status, body = await get(server.port, "/metrics")
        assert status == 200
        assert 'nova_operator_api_requests_total{code="200",resource="configmaps",verb="get"} 1.0' in body
        assert (await get(server.port, "/nope"))[0] == 404
        assert (await get(server.port, "/healthz", "POST"))[0] == 405
    finally:
        await server.stop()
    await asyncio.sleep(0)  # let the last connection handler finish
