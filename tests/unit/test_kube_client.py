"""``Kube``'s plumbing on a fake clock: retries on 429/5xx with Retry-After, bounded steps, clear errors.

The ApiClient is replaced by a scripted one (``call_api`` answers from a list); time moves only
when the test advances the fake clock, so a wait of seconds is checked exactly and at once.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any, cast

import pytest
from aiohttp import web
from kubernetes_asyncio import client as k8s_client

from nova_operator.clock import FakeClock
from nova_operator.kube import Kube, errors
from nova_operator.kube.client import RETRY_CAP, parse_retry_after, retry_delay
from nova_operator.kube.config import api_client, environment_proxy
from nova_operator.kube.resources import CONFIGMAPS, LEASES
from nova_operator.kube.tracing import tracing
from nova_operator.metrics import Metrics


class Response:
    def __init__(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.headers = headers or {}
        self._data = json.dumps(body if body is not None else {}).encode()
        self.released = False

    async def read(self) -> bytes:
        return self._data

    def release(self) -> None:
        self.released = True


class ScriptedApi:
    """``call_api`` answers with the next scripted item: a Response, an exception, or "hang"."""

    def __init__(self, *script: Response | Exception | str) -> None:
        self.script = list(script)
        self.calls: list[tuple[str, str]] = []
        self.configuration = k8s_client.Configuration()
        self.configuration.host = "https://127.0.0.1:6443"

    async def call_api(self, path: str, method: str, **kw: Any) -> Response:
        self.calls.append((method, path))
        item = self.script.pop(0) if self.script else Response(200, {"ok": True})
        if item == "hang":
            await asyncio.Event().wait()
        if isinstance(item, Exception):
            raise item
        assert isinstance(item, Response)
        return item

    async def close(self) -> None:
        return None


def make(api: ScriptedApi, clock: FakeClock, watch_api: ScriptedApi | None = None) -> Kube:
    return Kube(
        cast(k8s_client.ApiClient, api),
        metrics=Metrics(),
        clock=clock,
        watch_api=cast(k8s_client.ApiClient, watch_api or ScriptedApi()),
    )


def busy(status: int = 429, retry_after: str | None = None) -> Response:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return Response(status, {"kind": "Status", "message": "too many requests", "code": status}, headers)


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


def retries(kube: Kube, verb: str, code: str) -> float:
    value = kube.metrics.registry.get_sample_value(
        "nova_operator_api_retries_total", {"verb": verb, "resource": "configmaps", "code": code}
    )
    return value or 0.0


async def test_429_with_retry_after_waits_as_told_then_retries() -> None:
    clock = FakeClock()
    api = ScriptedApi(busy(429, "2"), busy(429, "2"), Response(200, {"metadata": {"name": "a"}}))
    kube = make(api, clock)
    call = asyncio.create_task(kube.get(CONFIGMAPS, "a", "ns"))
    await settle()
    assert len(api.calls) == 1
    clock.advance(1.99)
    await settle()
    assert len(api.calls) == 1  # the issue: 6 retries in 0.17 s; here nothing before 2 s
    clock.advance(0.41)  # as told plus at most 20% (the refused do not all return at once)
    await settle()
    assert len(api.calls) == 2
    clock.advance(2.4)
    await settle()
    assert (await call)["metadata"]["name"] == "a"
    assert retries(kube, "get", "429") == 2


async def test_retry_after_is_bounded() -> None:
    clock = FakeClock()
    api = ScriptedApi(busy(503, "3600"), Response(200))
    kube = make(api, clock)
    call = asyncio.create_task(kube.get(CONFIGMAPS, "a", "ns"))
    await settle()
    clock.advance(kube.retry_after_max)
    await settle()
    assert len(api.calls) == 2
    await call


async def test_5xx_without_retry_after_is_retried_with_growing_backoff_then_raised() -> None:
    clock = FakeClock()
    api = ScriptedApi(*[busy(500) for _ in range(10)])
    kube = make(api, clock)
    call = asyncio.create_task(kube.list(CONFIGMAPS, "ns"))
    times: list[float] = []
    while not call.done():
        await settle()
        if len(api.calls) > len(times):
            times.append(clock.now())
        if (due := clock.next_due()) is not None:
            clock.advance(due - clock.now())
    with pytest.raises(errors.KubeError) as raised:
        await call
    assert raised.value.status == 500
    assert len(api.calls) == 1 + kube.max_retries
    gaps = [b - a for a, b in itertools.pairwise(times)]
    for i, gap in enumerate(gaps):
        assert 0.25 * 2**i <= gap <= 0.25 * 2**i * 1.2 + 1e-9, gaps
    assert retries(kube, "list", "500") == kube.max_retries


async def test_a_post_is_retried_on_429_but_not_on_a_bare_5xx() -> None:
    clock = FakeClock()
    body = {"metadata": {"name": "a"}}
    api = ScriptedApi(busy(429), Response(201, body))
    kube = make(api, clock)
    call = asyncio.create_task(kube.create(CONFIGMAPS, body, "ns"))
    await settle()
    clock.advance(RETRY_CAP)
    await settle()
    assert (await call)["metadata"]["name"] == "a"

    api = ScriptedApi(busy(500), Response(201, body))
    kube = make(api, clock)
    with pytest.raises(errors.KubeError):
        await kube.create(CONFIGMAPS, body, "ns")  # it may have acted: not retried
    assert len(api.calls) == 1

    api = ScriptedApi(busy(503, "1"), Response(201, body))  # the server said when to come back
    kube = make(api, clock)
    call = asyncio.create_task(kube.create(CONFIGMAPS, body, "ns"))
    await settle()
    clock.advance(1.2)
    await settle()
    await call
    assert len(api.calls) == 2


async def test_other_errors_are_not_retried() -> None:
    for status, exc in ((404, errors.NotFound), (409, errors.Conflict), (422, errors.Invalid)):
        api = ScriptedApi(busy(status))
        with pytest.raises(exc):
            await make(api, FakeClock()).get(CONFIGMAPS, "a", "ns")
        assert len(api.calls) == 1


async def test_a_request_that_gets_no_answer_times_out_with_a_message_naming_it() -> None:
    clock = FakeClock()
    kube = make(ScriptedApi("hang"), clock)
    call = asyncio.create_task(kube.version())
    await settle()
    clock.advance(29.9)
    await settle()
    assert not call.done()
    clock.advance(0.1)
    await settle()
    with pytest.raises(errors.Unreachable) as raised:
        await call
    assert str(raised.value) == "GET /version: no response within 30 s (timed out)"  # was "GET /version: "


async def test_a_connection_error_without_text_still_names_its_type() -> None:
    kube = make(ScriptedApi(TimeoutError()), FakeClock())
    with pytest.raises(errors.Unreachable) as raised:
        await kube.version()
    assert str(raised.value) == "GET /version: no response within 30 s (timed out)"
    kube = make(ScriptedApi(ConnectionResetError()), FakeClock())
    with pytest.raises(errors.Unreachable) as raised:
        await kube.version()
    assert str(raised.value) == "GET /version: ConnectionResetError"


async def test_a_watch_goes_through_its_own_connection_pool_and_its_open_is_bounded() -> None:
    clock = FakeClock()
    requests, watches = ScriptedApi(), ScriptedApi("hang")
    kube = make(requests, clock, watch_api=watches)
    opening = asyncio.create_task(kube.watch(CONFIGMAPS, "ns", resource_version="5").__aenter__())
    await settle()
    assert watches.calls == [("GET", "/api/v1/namespaces/ns/configmaps")]
    assert requests.calls == []  # the watch took nothing from the requests' pool
    await kube.get(CONFIGMAPS, "a", "ns")  # and a request is served while it hangs
    clock.advance(30)
    await settle()
    with pytest.raises(errors.Unreachable) as raised:
        await opening
    assert str(raised.value) == (
        "watch /api/v1/namespaces/ns/configmaps: no response headers within 30 s (timed out)"
    )


async def test_the_watch_pool_is_separate_and_uncapped_on_a_real_api_client() -> None:
    cfg = k8s_client.Configuration()
    cfg.host = "https://127.0.0.1:1"
    kube = Kube(k8s_client.ApiClient(configuration=cfg), metrics=Metrics())
    try:
        watch_api = kube._watch_client()
        assert watch_api is not kube._api
        assert watch_api.rest_client.pool_manager.connector.limit == 0  # type: ignore[attr-defined]
        assert kube._api.rest_client.pool_manager.connector.limit == 100  # type: ignore[attr-defined]
        assert watch_api.configuration.host == cfg.host
    finally:
        await kube.close()


def test_retry_after_parsing_and_the_retry_rule() -> None:
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after(" 1.5 ") == 1.5
    assert parse_retry_after("-3") == 0.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") is None
    assert parse_retry_after("inf") is None
    assert parse_retry_after(None) is None
    rule = {"max_retries": 4, "retry_after_max": 10.0}
    assert 2.0 <= (retry_delay("GET", 429, 2.0, 0, **rule) or 0) <= 2.4
    assert retry_delay("GET", 429, 2.0, 4, **rule) is None  # out of retries
    assert retry_delay("PUT", 504, None, 0, **rule) is not None
    assert retry_delay("POST", 504, None, 0, **rule) is None
    assert retry_delay("GET", 404, None, 0, **rule) is None
    assert retry_delay("DELETE", 503, 60.0, 0, **rule) == 10.0


async def test_requests_look_up_nothing_in_the_environment_and_the_proxy_is_read_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    cfg = k8s_client.Configuration()
    cfg.host = "https://api.example:6443"
    kube = Kube(api_client(cfg), metrics=Metrics())
    try:
        for api in (kube._api, kube._watch_client()):
            session = api.rest_client.pool_manager
            assert session.trust_env is False  # no .netrc read, no proxy lookup per request
            assert api.rest_client.proxy == "http://proxy.example:3128"
        assert kube._watch_client().rest_client.pool_manager.connector.limit == 0  # type: ignore[attr-defined]
    finally:
        await kube.close()


async def test_a_kubeconfig_proxy_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://env.example:3128")
    cfg = k8s_client.Configuration()
    cfg.host = "https://api.example:6443"
    cfg.proxy = "http://kubeconfig.example:8080"
    api = api_client(cfg)
    try:
        assert api.rest_client.proxy == "http://kubeconfig.example:8080"
    finally:
        await api.close()


@pytest.mark.parametrize(
    ("host", "no_proxy", "proxied"),
    [
        ("https://api.example:6443", "", True),
        ("https://api.example:6443", "*", False),
        ("https://api.example:6443", "api.example", False),
        ("https://api.example:6443", "example", False),  # a domain: its sub-domains too
        ("https://api.example:6443", ".example", False),
        ("https://api.example:6443", "other.example,  api.example:6443", False),
        ("https://api.example:6443", "api.example:443", True),  # another port
        ("https://myapi.example:6443", "api.example", True),  # a suffix, not a sub-domain
        ("https://10.96.0.1:443", "10.0.0.0/8", False),
        ("https://10.96.0.1:443", "10.96.0.1", False),
        ("https://10.96.0.1:443", "192.168.0.0/16", True),
        ("https://[fd00::1]:443", "fd00::/8", False),
    ],
)
def test_the_proxy_follows_https_proxy_and_no_proxy_as_go_does(
    host: str, no_proxy: str, proxied: bool
) -> None:
    env = {"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": no_proxy}
    assert (environment_proxy(host, env) == "http://proxy:3128") is proxied


def test_plain_http_uses_http_proxy_and_lowercase_wins() -> None:
    env = {"http_proxy": "http://lower:1", "HTTP_PROXY": "http://upper:1", "HTTPS_PROXY": "http://s:1"}
    assert environment_proxy("http://127.0.0.1:8080", env) == "http://lower:1"
    assert environment_proxy("http://127.0.0.1:8080", {}) is None


async def test_own_connections_are_not_queued_behind_a_full_pool_and_report_their_phase() -> None:
    """A pool whose connections are all held by slow requests makes every other request wait;
    a client made by ``own_connections`` gets through, and ``tracing`` says where a request is."""
    seen: list[str] = []
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        seen.append(request.path)
        await release.wait()
        return web.json_response({"kind": "ConfigMap"})

    async def lease(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.json_response({"kind": "Lease", "metadata": {"name": "l"}})

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/ns/configmaps/{name}", slow)
    app.router.add_get("/apis/coordination.k8s.io/v1/namespaces/ns/leases/{name}", lease)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    cfg = k8s_client.Configuration()
    cfg.host = f"http://127.0.0.1:{port}"
    cfg.connection_pool_maxsize = 1
    kube = Kube(api_client(cfg), metrics=Metrics())
    try:
        held = asyncio.create_task(kube.get(CONFIGMAPS, "slow", "ns"))
        async with asyncio.timeout(10):
            while not seen:  # noqa: ASYNC110 - waiting for the server to have the request
                await asyncio.sleep(0.01)
        queued = asyncio.create_task(kube.get(LEASES, "l", "ns"))
        own = kube.own_connections(connections=1)
        with tracing() as trace:
            answer = await asyncio.wait_for(own.get(LEASES, "l", "ns"), 10)
        assert answer["kind"] == "Lease"
        assert trace.code == 200
        assert trace.request == "GET leases.coordination.k8s.io"
        assert not queued.done()  # the shared pool's request still waits for its one connection
        assert seen == [
            "/api/v1/namespaces/ns/configmaps/slow",
            "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l",
        ]

        with tracing() as trace:
            hanging = asyncio.create_task(own.get(CONFIGMAPS, "slow", "ns"))
            async with asyncio.timeout(10):
                while len(seen) < 3:  # noqa: ASYNC110 - waiting for the server to have the request
                    await asyncio.sleep(0.01)
            assert trace.phase == "request sent, awaiting the response"
            assert "GET configmaps: request sent, awaiting the response (for" in trace.describe()
        release.set()
        await asyncio.wait_for(asyncio.gather(held, queued, hanging), 10)
        assert own.max_retries == 0
    finally:
        release.set()
        await kube.close()
        await runner.cleanup()
