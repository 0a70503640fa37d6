"""Issue 26 item 2: a List body is decoded item by item as it arrives (``kube.liststream``).

``Kube.list(..., each=...)`` hands every item to ``each`` once it is complete, before the rest of
the body is read, and the List keeps what ``each`` returned: a page of large objects the caller
narrows is never held whole.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from kubernetes_asyncio import client as k8s_client

from nova_operator.clock import FakeClock
from nova_operator.kube import Kube
from nova_operator.kube.liststream import decode_list
from nova_operator.kube.resources import SECRETS
from nova_operator.kube.types import Object
from nova_operator.metrics import Metrics


def page(n: int, size: int) -> Object:
    return {
        "kind": "SecretList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "42", "continue": "next", "remainingItemCount": 1234567},
        "items": [
            {"metadata": {"name": f"s{i}", "namespace": "ns"}, "data": {"v": "é" + "x" * size}, "n": 1.5e3}
            for i in range(n)
        ],
    }


class Chunks:
    """The body in chunks of ``size`` bytes, counting how many bytes have been handed out."""

    def __init__(self, body: bytes, size: int) -> None:
        self.body, self.size, self.sent = body, size, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while self.sent < len(self.body):
            chunk = self.body[self.sent : self.sent + self.size]
            self.sent += len(chunk)
            yield chunk


def narrow(obj: Object) -> Object:
    return {"metadata": obj["metadata"]}


@pytest.mark.parametrize("chunk", [1, 3, 1000, 10**7])
@pytest.mark.parametrize("indent", [None, 2])
async def test_a_list_in_any_chunking_decodes_as_json_loads_does_with_each_applied(
    chunk: int, indent: int | None
) -> None:
    doc = page(4, 3000 if chunk > 1 else 30)
    body = json.dumps(doc, indent=indent, ensure_ascii=chunk % 2 == 0).encode()
    got = await decode_list(aiter(Chunks(body, chunk)), narrow)
    assert got == {**doc, "items": [narrow(i) for i in doc["items"]]}


async def test_each_item_is_handed_over_before_the_rest_of_the_body_is_read() -> None:
    doc = page(10, 100_000)
    body = json.dumps(doc).encode()
    chunks = Chunks(body, 16 * 1024)
    read_when_formed: list[int] = []

    def each(obj: Object) -> Object:
        read_when_formed.append(chunks.sent)
        return narrow(obj)

    got = await decode_list(aiter(chunks), each)
    assert len(got["items"]) == 10
    ends = [body.index(f'"s{i + 1}"'.encode()) if i < 9 else len(body) for i in range(10)]
    # each item was formed while at most about one more item (and one chunk) had been read
    for formed_at, end in zip(read_when_formed, ends, strict=True):
        assert formed_at <= end + 2 * 100_000 + 16 * 1024


@pytest.mark.parametrize(
    "body",
    [b'{"items": [{"a": 1}, {"b": ', b'{"items": [{"a": 1}] "x": 1}', b"", b'{"items": [1, 2', b"[]"],
)
async def test_a_truncated_or_invalid_body_raises_value_error(body: bytes) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - json's own messages vary with where it stopped
        await decode_list(aiter(Chunks(body, 4)), lambda obj: obj)


async def test_a_number_cut_by_a_chunk_boundary_is_read_whole() -> None:
    body = b'{"metadata": {"n": 1}, "count": 123456}'
    for size in range(1, len(body)):
        assert (await decode_list(aiter(Chunks(body, size)), narrow))["count"] == 123456


class StreamedResponse:
    def __init__(self, body: bytes) -> None:
        self.status = 200
        self.headers: dict[str, str] = {}
        self.content = self
        self._chunks = Chunks(body, 8192)

    def iter_chunked(self, size: int) -> AsyncIterator[bytes]:
        assert size <= 64 * 1024  # a streamed List is read in bounded pieces
        return aiter(self._chunks)

    async def read(self) -> bytes:
        raise AssertionError("a List with each is not read whole")

    def release(self) -> None:
        return None


class Api:
    def __init__(self, body: bytes) -> None:
        self.body = body
        self.configuration = k8s_client.Configuration()
        self.configuration.host = "https://127.0.0.1:6443"
        self.query: list[tuple[str, str]] = []

    async def call_api(self, path: str, method: str, **kw: Any) -> StreamedResponse:
        self.query = kw["query_params"]
        return StreamedResponse(self.body)

    async def close(self) -> None:
        return None


async def test_kube_list_with_each_streams_the_page_through_each() -> None:
    doc = page(3, 50_000)
    api = Api(json.dumps(doc).encode())
    kube = Kube(cast(k8s_client.ApiClient, api), metrics=Metrics(), clock=FakeClock())
    seen: list[str] = []

    def each(obj: Object) -> Object:
        seen.append(obj["metadata"]["name"])
        return narrow(obj)

    got = await kube.list(SECRETS, "ns", limit=2, continue_token="tok", each=each)
    assert seen == ["s0", "s1", "s2"]
    assert got["items"] == [narrow(i) for i in doc["items"]]
    assert got["metadata"]["continue"] == "next"
    assert ("limit", "2") in api.query
    assert ("continue", "tok") in api.query
    await asyncio.sleep(0)
