"""The compute client against endpoints a tenant controls (issue 26, items 1 and 3).

Each server is a small aiohttp server on 127.0.0.1 (``simcluster.hazards.hostile``): a huge answer, an
answer that trickles one byte every 0.5 s, a redirect to a server that records whether it was
hit, an error body with a marker. The outer ``asyncio.timeout(GUARD)`` only keeps a failing
test from hanging: the client's own deadline is a tenth of it.
"""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import AsyncIterator

import pytest
from simcluster.hazards.hostile import HeaderTrickle, HostileServer

from nova_operator.openstack import ComputeAPIError, ComputeClient, Credentials

DEADLINE = 1.0
GUARD = 10 * DEADLINE
PASSWORD = "pw-never-sent-elsewhere"
TOKENS = "/v3/auth/tokens"
MARKER = "MARKER-7f3a-remote-body"
MiB = 1024 * 1024


@pytest.fixture
async def nova() -> AsyncIterator[HostileServer]:
    server = await HostileServer().start()
    server.on("POST", TOKENS, HostileServer.token())  # the same server plays Keystone by default
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def elsewhere() -> AsyncIterator[HostileServer]:
    """Where a redirect points: it must never be hit."""
    server = await HostileServer().start()
    server.on("POST", TOKENS, HostileServer.token())
    server.on("GET", "/v2.1/os-aggregates", HostileServer.answer(200, {"aggregates": []}))
    try:
        yield server
    finally:
        await server.stop()


def creds(keystone: str) -> Credentials:
    return Credentials(keystone, "nova", PASSWORD, "service", "Default", "Default")


async def connect(keystone: str, nova_url: str) -> ComputeClient:
    async with asyncio.timeout(GUARD):
        return await ComputeClient.connect(creds(keystone), nova_url, request_timeout=DEADLINE)


# -- item 1: bounded bodies -------------------------------------------------------------------


@pytest.mark.parametrize("content_length", [False, True], ids=["chunked", "content-length"])
async def test_a_huge_answer_is_an_error_and_is_not_read_into_memory(
    nova: HostileServer, content_length: bool
) -> None:
    nova.on("GET", "/v2.1/os-services", nova.huge(64 * MiB, content_length=content_length))
    client = await connect(nova.url, nova.url)
    tracemalloc.start()
    try:
        with pytest.raises(ComputeAPIError, match="larger than 8388608 bytes") as err:
            async with asyncio.timeout(GUARD):
                await client.list_services()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert err.value.status == 0
    assert peak < 16 * MiB  # the 8 MiB cap and a chunk, not the 64 MiB answer
    (stream,) = nova.streams
    async with asyncio.timeout(GUARD):
        await stream.ended.wait()
    assert not stream.finished  # the connection was dropped, the rest never read


async def test_a_page_of_hypervisors_is_capped_lower_than_the_unpaged_lists(nova: HostileServer) -> None:
    nova.on("GET", "/v2.1/os-hypervisors/detail", nova.huge(3 * MiB))
    client = await connect(nova.url, nova.url)
    with pytest.raises(ComputeAPIError, match="larger than 2097152 bytes"):
        async with asyncio.timeout(GUARD):
            await client.mapped_hosts()


# -- item 1: a total deadline -----------------------------------------------------------------


async def test_a_keystone_that_trickles_its_headers_is_cut_off_at_the_deadline(nova: HostileServer) -> None:
    keystone = await HeaderTrickle().start()
    try:
        with pytest.raises(ComputeAPIError, match="timed out after 1 s") as err:
            await connect(keystone.url, nova.url)
        assert err.value.status == 0
        assert str(err.value).startswith("POST /v3/auth/tokens: ")
    finally:
        await keystone.stop()


async def test_a_keystone_that_trickles_its_body_costs_nothing(
    nova: HostileServer, elsewhere: HostileServer
) -> None:
    # The token is a header of the 201; the body (the catalog) is never read.
    keystone = elsewhere
    keystone.on("POST", TOKENS, keystone.trickle(status=201, headers={"X-Subject-Token": "tok-1"}))
    nova.on("GET", "/v2.1/os-aggregates", HostileServer.answer(200, {"aggregates": []}))
    client = await connect(keystone.url, nova.url)
    async with asyncio.timeout(GUARD):
        assert await client.list_aggregates() == []
    assert nova.requests("GET")[0].headers["X-Auth-Token"] == "tok-1"


async def test_a_nova_that_trickles_its_body_is_cut_off_at_the_deadline(nova: HostileServer) -> None:
    nova.on("GET", "/v2.1/os-aggregates", nova.trickle())
    client = await connect(nova.url, nova.url)
    with pytest.raises(ComputeAPIError, match="timed out after 1 s") as err:
        async with asyncio.timeout(GUARD):
            await client.list_aggregates()
    assert str(err.value).startswith("GET /v2.1/os-aggregates: ")
    (stream,) = nova.streams
    async with asyncio.timeout(GUARD):
        await stream.ended.wait()  # the connection is closed, not left trickling


async def test_no_request_is_sent_after_a_call_was_cancelled(nova: HostileServer) -> None:
    # A token about to expire made keystoneauth re-authenticate inside the call (in a thread), and
    # the thread sent the PUT once the slow second token arrived, long after the call had been
    # cancelled (the Lease had moved). A cancelled call must end every request it started.
    nova.on("POST", TOKENS, HostileServer.token(expires_in=60, later_delay=0.8))
    nova.on("PUT", "/v2.1/os-services/u1", HostileServer.slow(1.5, HostileServer.answer(200, {})))
    client = await connect(nova.url, nova.url)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.5):
            await client.disable_service("u1", "c5c3.io: leaving NovaCompute ns/pool")
    nova.mark()
    await asyncio.sleep(2.5)  # longer than any request the cancelled call could still be making
    assert [h for h in nova.hits if h.late] == []


# -- item 3: no redirect followed -------------------------------------------------------------


async def test_nova_redirects_are_not_followed(nova: HostileServer, elsewhere: HostileServer) -> None:
    nova.on("GET", "/v2.1/os-aggregates", HostileServer.redirect(elsewhere.url + "/v2.1/os-aggregates"))
    nova.on(
        "PUT", "/v2.1/os-services/u1", HostileServer.redirect(elsewhere.url + "/v2.1/os-services/u1", 308)
    )
    client = await connect(nova.url, nova.url)
    with pytest.raises(ComputeAPIError) as err:
        await client.list_aggregates()
    assert err.value.status == 307
    assert (
        str(err.value) == "GET /v2.1/os-aggregates: HTTP 307 Temporary Redirect (redirects are not followed)"
    )
    with pytest.raises(ComputeAPIError) as err:
        await client.disable_service("u1", "reason")
    assert err.value.status == 308
    assert elsewhere.hits == []


async def test_keystone_redirects_are_not_followed(nova: HostileServer, elsewhere: HostileServer) -> None:
    nova.on("POST", TOKENS, HostileServer.redirect(elsewhere.url + TOKENS))
    with pytest.raises(ComputeAPIError) as err:
        await connect(nova.url, nova.url)
    assert err.value.status == 307
    assert elsewhere.hits == []  # the password went nowhere else


# -- item 3: no remote body in an error or a condition ----------------------------------------


async def test_an_error_body_never_reaches_the_error(nova: HostileServer) -> None:
    nova.on("GET", "/v2.1/os-services", HostileServer.answer(500, text=MARKER))
    nova.on("DELETE", "/v2.1/os-services/u1", HostileServer.answer(418, text=MARKER))
    client = await connect(nova.url, nova.url)
    with pytest.raises(ComputeAPIError) as err:
        await client.list_services()
    assert str(err.value) == "GET /v2.1/os-services: HTTP 500 Internal Server Error"
    with pytest.raises(ComputeAPIError) as err:
        await client.delete_service("u1")
    assert MARKER not in str(err.value)
    assert err.value.status == 418


async def test_a_keystone_error_body_never_reaches_the_error(nova: HostileServer) -> None:
    nova.on("POST", TOKENS, HostileServer.answer(401, text=MARKER))
    with pytest.raises(ComputeAPIError) as err:
        await connect(nova.url, nova.url)
    assert str(err.value) == "POST /v3/auth/tokens: HTTP 401 Unauthorized"


# -- issue 36: a failed Keystone call is reported in fixed words only ---------------------------


async def _raw_server(reply: bytes) -> tuple[asyncio.Server, str]:
    """A TCP server on 127.0.0.1 that answers every connection with ``reply`` and closes it."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1024)
        writer.write(reply)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


@pytest.mark.parametrize(
    "reply",
    [b"NOT-HTTP " + MARKER.encode() + b"\r\n\r\n", b"HTTP/1.1 201 Created\r\nX-Subject-Token", b""],
    ids=["garbage status line", "cut in the headers", "closed at once"],
)
async def test_a_keystone_that_answers_nonsense_is_one_fixed_text(reply: bytes) -> None:
    server, url = await _raw_server(reply)
    try:
        with pytest.raises(ComputeAPIError) as err:
            await connect(url, url)
    finally:
        server.close()
        await server.wait_closed()
    # no exception class, no remote word: only the kind's fixed text
    assert str(err.value) == "POST /v3/auth/tokens: malformed or interrupted answer"
    assert err.value.status == 0


async def test_a_keystone_that_refuses_the_connection_is_one_fixed_text() -> None:
    server, url = await _raw_server(b"")
    server.close()
    await server.wait_closed()  # the port is closed now: the connection is refused
    with pytest.raises(ComputeAPIError) as err:
        await connect(url, url)
    assert str(err.value) == "POST /v3/auth/tokens: connection failed"


# -- issue 36: what the compute API sends never shapes an error --------------------------------

SHAPE_ERROR = "answer is not in the documented shape"


async def test_a_down_cells_host_name_is_not_quoted(nova: HostileServer) -> None:
    down = {"services": [{"host": MARKER, "status": "UNKNOWN", "binary": "nova-compute"}]}
    nova.on("GET", "/v2.1/os-services", HostileServer.answer(200, down))
    client = await connect(nova.url, nova.url)
    with pytest.raises(ComputeAPIError) as err:
        await client.list_services()
    assert str(err.value) == (
        "GET /v2.1/os-services: a compute service is in a cell that did not answer (status UNKNOWN)"
    )


MALFORMED = [
    ("services", "GET", "/v2.1/os-services", {"services": [{"id": "u1", "status": "enabled"}]}),  # no host
    ("services", "GET", "/v2.1/os-services", {"services": "MARKER"}),
    ("services", "GET", "/v2.1/os-services", {"services": [7]}),
    ("all_services", "GET", "/v2.1/os-services", {"services": 7}),
    ("all_services", "GET", "/v2.1/os-services", ["MARKER"]),  # not an object at all
    ("mapped_hosts", "GET", "/v2.1/os-hypervisors/detail", {"hypervisors": [{"service": "MARKER"}]}),
    ("mapped_hosts", "GET", "/v2.1/os-hypervisors/detail", {"hypervisors": [{"service": {"host": "h"}}]}),
    ("count_servers", "GET", "/v2.1/servers", {"servers": 5}),
    ("aggregates", "GET", "/v2.1/os-aggregates", {"aggregates": [{"id": "MARKER"}]}),
    ("aggregates", "GET", "/v2.1/os-aggregates", {"aggregates": [{"id": None}]}),
    ("aggregates", "GET", "/v2.1/os-aggregates", {"aggregates": [{"id": 1, "metadata": ["MARKER"]}]}),
    ("aggregates", "GET", "/v2.1/os-aggregates", {"aggregates": [{"id": 1, "hosts": 3}]}),
    ("create_aggregate", "POST", "/v2.1/os-aggregates", {"aggregate": "MARKER"}),
]


@pytest.mark.parametrize(
    ("call", "method", "path", "doc"), MALFORMED, ids=[f"{m[0]}-{i}" for i, m in enumerate(MALFORMED)]
)
async def test_a_malformed_answer_is_a_compute_api_error_in_fixed_words(
    nova: HostileServer, call: str, method: str, path: str, doc: object
) -> None:
    nova.on(method, path, HostileServer.answer(200, doc))
    client = await connect(nova.url, nova.url)
    calls = {
        "services": client.list_services,
        "all_services": client.list_all_services,
        "mapped_hosts": client.mapped_hosts,
        "count_servers": lambda: client.count_servers("n1"),
        "aggregates": client.list_aggregates,
        "create_aggregate": lambda: client.create_aggregate("az1", "az1"),
    }
    with pytest.raises(ComputeAPIError) as err:  # not TypeError, KeyError, ValueError, AttributeError
        async with asyncio.timeout(GUARD):
            await calls[call]()
    assert str(err.value) == f"{method} {path}: {SHAPE_ERROR}"
    # the original error (whose text may quote the answer) is not chained into a log's traceback
    assert err.value.__cause__ is None
    assert err.value.__suppress_context__ or err.value.__context__ is None


@pytest.mark.parametrize("suffix", ["/?", "/v3#", "/admin?reset=1&x="])
async def test_a_keystone_url_with_a_query_or_fragment_is_not_called(
    nova: HostileServer, suffix: str
) -> None:
    """Issue 36: a Nova admitted before the CRD refused it still must not send the password to the
    path before the '?' or '#': the client refuses the URL and sends nothing."""
    with pytest.raises(ComputeAPIError) as err:
        await connect(nova.url + suffix, nova.url)
    assert str(err.value) == (
        "POST /v3/auth/tokens: the Keystone URL holds a query or a fragment ('?' or '#'); nothing was sent"
    )
    assert nova.requests() == []
