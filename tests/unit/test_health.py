"""The probe and metrics HTTP endpoints."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import time

import aiohttp
import pytest

from nova_operator.metrics import Metrics
from nova_operator.runtime.health import HttpServer, health_routes, metrics_routes, parse_address


async def get(port: int, path: str, method: str = "GET") -> tuple[int, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
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
    server = HttpServer(
        "127.0.0.1", 0, {**health_routes(lambda: ready), **metrics_routes(metrics.exposition)}
    )
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


async def test_healthz_is_503_with_every_reason_the_liveness_check_names() -> None:
    problems: list[str] = []
    server = HttpServer("127.0.0.1", 0, health_routes(lambda: True, lambda: problems))
    await server.start()
    try:
        assert await get(server.port, "/healthz") == (200, "ok\n")
        problems[:] = ["watch stale: pods in a heard nothing", "worker stuck: nova ns/x"]
        assert await get(server.port, "/healthz") == (
            503,
            "unhealthy:\n- watch stale: pods in a heard nothing\n- worker stuck: nova ns/x\n",
        )
        assert await get(server.port, "/readyz") == (200, "ok\n")  # readiness is a separate question
    finally:
        await server.stop()


def _probe(port: int, path: str) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


async def test_a_probe_server_on_its_own_thread_reports_a_blocked_event_loop() -> None:
    loop = asyncio.get_running_loop()
    calls: list[str] = []

    def problems() -> list[str]:
        calls.append("checked on the probed loop")
        return []

    server = HttpServer(
        "127.0.0.1", 0, health_routes(lambda: True, problems), check_loop=loop, loop_timeout=0.3
    )
    await server.start()
    try:
        assert await asyncio.to_thread(_probe, server.port, "/healthz") == (200, "ok\n")
        assert calls == ["checked on the probed loop"]
        # Block this loop (a synchronous call that never yields) while a probe comes in.
        probe = loop.run_in_executor(None, _probe, server.port, "/healthz")
        time.sleep(1.0)  # noqa: ASYNC251 - blocking the loop is the fault under test
        status, body = await probe
        assert (status, body) == (503, "unhealthy:\n- event loop unresponsive: no answer within 0.3 s\n")
        assert await asyncio.to_thread(_probe, server.port, "/healthz") == (200, "ok\n")  # it recovered
    finally:
        await server.stop()


async def test_a_taken_port_fails_the_threaded_start() -> None:
    first = HttpServer("127.0.0.1", 0, health_routes(lambda: True))
    await first.start()
    try:
        second = HttpServer(
            "127.0.0.1", first.port, health_routes(lambda: True), check_loop=asyncio.get_running_loop()
        )
        with pytest.raises(OSError, match="address already in use"):
            await second.start()
    finally:
        await first.stop()


async def test_head_answers_the_status_without_a_body() -> None:
    server = HttpServer("127.0.0.1", 0, health_routes(lambda: True))
    await server.start()
    try:
        assert await get(server.port, "/healthz", "HEAD") == (200, "")
    finally:
        await server.stop()


async def test_idle_and_half_sent_connections_are_closed_after_the_idle_timeout() -> None:
    """A connection that sends nothing, or only part of a request, is closed (issue 26 item 9)."""
    server = HttpServer("127.0.0.1", 0, health_routes(lambda: True), idle_timeout=0.3)
    await server.start()
    try:
        idle = await asyncio.open_connection("127.0.0.1", server.port)
        partial = await asyncio.open_connection("127.0.0.1", server.port)
        partial[1].write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # headers never finished
        await partial[1].drain()
        for reader, writer in (idle, partial):
            assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the server
            writer.close()
        assert server.connections == 0
    finally:
        await server.stop()


async def test_a_connection_beyond_the_cap_takes_the_oldest_idle_slot() -> None:
    server = HttpServer("127.0.0.1", 0, health_routes(lambda: True), max_connections=5)
    await server.start()
    held = []
    try:
        for _ in range(8):
            held.append(await asyncio.open_connection("127.0.0.1", server.port))
            await asyncio.sleep(0.01)  # accepted in this order
        closed = [await _closed(reader) for reader, _ in held]
        assert closed == [True, True, True, False, False, False, False, False]  # the 3 oldest
        assert (server.evicted, server.refused) == (3, 0)
        assert server.connections <= 5
        assert await get(server.port, "/healthz") == (200, "ok\n")  # the idle ones keep no probe out
    finally:
        for _, writer in held:
            writer.close()
        await server.stop()


async def _closed(reader: asyncio.StreamReader) -> bool:
    """Whether the server closed the connection (read returns EOF) rather than leaving it open."""
    try:
        return await asyncio.wait_for(reader.read(), 0.5) == b""
    except TimeoutError:
        return False


@pytest.mark.parametrize("half_sent", [False, True], ids=["idle", "half-sent-requests"])
async def test_the_kubelets_probes_are_answered_while_a_neighbour_holds_every_slot(half_sent: bool) -> None:
    """Issue 36 §5: any pod could fill the probe server's 64 slots (idle connections, or requests
    never finished) and the kubelet's probes were then closed on accept (19 of 20 failed)."""
    server = HttpServer("127.0.0.1", 0, health_routes(lambda: True), check_loop=asyncio.get_running_loop())
    await server.start()
    flood = []
    try:
        for _ in range(64):
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            if half_sent:
                writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
                await writer.drain()
            flood.append((reader, writer))
        answered = 0
        for _ in range(20):
            with contextlib.suppress(ConnectionError, IndexError, ValueError):  # closed on accept
                answered += await asyncio.wait_for(get(server.port, "/healthz"), 5) == (200, "ok\n")
            # the neighbour refills: one more idle connection after each probe
            flood.append(await asyncio.open_connection("127.0.0.1", server.port))
        assert answered == 20, f"{answered} of 20 probes answered"
        assert server.connections <= 64
    finally:
        for _, writer in flood:
            writer.close()
        await server.stop()


async def test_metrics_are_served_as_the_scraper_asks_text_openmetrics_gzip_and_by_name() -> None:
    """Issue 40 item 5: content negotiation, OpenMetrics, gzip and ``name[]``, as prometheus_client's
    own servers answer them."""
    metrics = Metrics()
    metrics.api_requests.labels("get", "configmaps", "200").inc()
    server = HttpServer("127.0.0.1", 0, metrics_routes(metrics.exposition))
    await server.start()
    url = f"http://127.0.0.1:{server.port}/metrics"
    try:
        async with aiohttp.ClientSession(auto_decompress=False) as session:
            async with session.get(url, headers={"Accept-Encoding": "identity"}) as plain:
                assert plain.headers["Content-Type"].startswith("text/plain; version=0.0.4")
                assert "Content-Encoding" not in plain.headers
                text = await plain.text()
            assert "# EOF" not in text
            assert "nova_operator_workqueue_depth" in text
            openmetrics = {
                "Accept": "application/openmetrics-text; version=1.0.0",
                "Accept-Encoding": "identity",
            }
            async with session.get(url, headers=openmetrics) as om:
                assert om.headers["Content-Type"].startswith("application/openmetrics-text")
                assert (await om.text()).rstrip().endswith("# EOF")
            async with session.get(url, headers={"Accept-Encoding": "gzip"}) as zipped:
                assert zipped.headers["Content-Encoding"] == "gzip"
                unzipped = gzip.decompress(await zipped.read()).decode()
            sample = 'nova_operator_api_requests_total{code="200",resource="configmaps",verb="get"} 1.0'
            assert sample in text
            assert sample in unzipped  # the same exposition (process_* series move between scrapes)
            one = "nova_operator_api_requests_total"
            async with session.get(
                url, params={"name[]": one}, headers={"Accept-Encoding": "identity"}
            ) as named:
                body = await named.text()
            assert sample in body
            assert "nova_operator_workqueue_depth" not in body
    finally:
        await server.stop()
    await asyncio.sleep(0)
