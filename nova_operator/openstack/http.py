"""One bounded HTTP exchange with an endpoint a tenant controls (its Keystone, its compute API).

A tenant runs its own API pods (``spec.image``) and names its own Keystone, so nothing an answer
says is trusted to be small, fast or honest:

- **a total deadline**: connect, send, headers and body all within ``deadline`` seconds, enforced
  with ``asyncio.timeout`` on the event loop, so a server that trickles one byte at a time is cut
  off like one that says nothing, and a cancelled call has sent its last byte when it returns;
- **a capped body**: read only when the caller wants it, at most ``max_body`` bytes; a longer
  answer (or a ``Content-Length`` over the cap) is dropped with its connection, the rest unread;
  no transparent decompression (``Accept-Encoding: identity``), so the cap counts what is kept;
- **no redirect followed**: a 3xx is returned as it is (callers take it for an error), so no
  request with its body and token is ever re-sent to a host the tenant picks;
- **no remote text in errors**: a ``TransportError`` names the kind of failure in fixed words
  (``Failure``), plus the deadline or cap the operator chose; aiohttp's exception texts (which may
  quote a status line or header the server sent), their class names and the OS's error text (which
  tell apart how the far end failed) are not used: the endpoint may be any host a CR author names.

Response headers are bounded by aiohttp itself (128 fields of at most 8,190 bytes).

**Trust**: an ``https`` URL is verified against the system's CAs, or, with ``trust`` (``trusted``:
a Nova's ``spec.tls`` bundle), against that bundle alone; host names are always checked. A
certificate that does not verify is ``Failure.UNTRUSTED``, told apart from a refused connection so
the condition can say which field to set.
"""

from __future__ import annotations

import asyncio
import enum
import json
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import aiohttp
from multidict import CIMultiDictProxy

CHUNK = 64 * 1024


class Failure(enum.Enum):
    TIMEOUT = "timed out"
    DNS = "the name does not resolve"
    CONNECT = "connection failed"
    UNTRUSTED = "the server's certificate is not trusted"
    TOO_LARGE = "answer larger than the limit"
    PROTOCOL = "malformed or interrupted answer"


class TransportError(Exception):
    """No usable answer. The message is fixed text plus numbers the operator chose, never remote text."""

    def __init__(self, kind: Failure, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class BadBundle(ValueError):
    """A CA bundle that holds no usable PEM certificate (fixed words, never the bundle's text)."""


@lru_cache(maxsize=32)
def trusted(bundle: str) -> ssl.SSLContext:
    """A client context that trusts the certificates of PEM ``bundle`` and nothing else, host names
    checked; one per distinct bundle (a context is immutable once made here). ``BadBundle`` when the
    bundle holds no certificate OpenSSL accepts."""
    if not bundle.strip():
        raise BadBundle("is empty")
    try:
        context = ssl.create_default_context(cadata=bundle)
    except (ssl.SSLError, ValueError):
        raise BadBundle("holds no PEM certificate that can be loaded") from None
    if not context.get_ca_certs():
        raise BadBundle("holds no PEM certificate")
    return context


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    headers: CIMultiDictProxy[str]
    body: bytes  # empty unless the caller asked for the body of this status


async def request(
    method: str,
    url: str,
    *,
    deadline: float,
    max_body: int,
    headers: Mapping[str, str] | None = None,
    json_body: Mapping[str, Any] | None = None,
    read_body: bool = True,
    trust: ssl.SSLContext | None = None,
) -> Reply:
    """Send one request; read the body of a 2xx answer when ``read_body`` (never of another status)."""
    sent = {"Accept-Encoding": "identity", **(headers or {})}
    data: bytes | None = None
    if json_body is not None:
        data = json.dumps(dict(json_body)).encode()
        sent.setdefault("Content-Type", "application/json")
    try:
        async with asyncio.timeout(deadline):
            # A session per call: nothing pooled outlives the call, and no cookie jar carries a
            # tenant's cookies into the next call.
            async with (
                aiohttp.ClientSession(
                    connector=aiohttp.TCPConnector(
                        force_close=True, ssl=trust if trust is not None else True
                    ),
                    timeout=aiohttp.ClientTimeout(total=None),  # the asyncio.timeout above bounds it all
                    auto_decompress=False,
                    cookie_jar=aiohttp.DummyCookieJar(),
                ) as session,
                session.request(method, url, headers=sent, data=data, allow_redirects=False) as resp,
            ):
                body = b""
                if read_body and 200 <= resp.status < 300:
                    body = await _read_capped(resp, max_body)
                else:
                    resp.close()  # the body is not wanted: drop the connection, read nothing
                return Reply(resp.status, resp.headers, body)
    except TimeoutError as exc:
        raise TransportError(Failure.TIMEOUT, f"timed out after {deadline:g} s (no complete answer)") from exc
    except aiohttp.ClientConnectorCertificateError as exc:
        raise TransportError(Failure.UNTRUSTED, Failure.UNTRUSTED.value) from exc
    except aiohttp.ClientConnectorSSLError as exc:
        if isinstance(exc.os_error, ssl.SSLCertVerificationError):
            raise TransportError(Failure.UNTRUSTED, Failure.UNTRUSTED.value) from exc
        raise TransportError(Failure.CONNECT, Failure.CONNECT.value) from exc
    except aiohttp.ClientConnectorError as exc:
        if isinstance(exc, aiohttp.ClientConnectorDNSError) or isinstance(exc.os_error, socket.gaierror):
            raise TransportError(Failure.DNS, Failure.DNS.value) from exc
        raise TransportError(Failure.CONNECT, Failure.CONNECT.value) from exc
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        raise TransportError(Failure.PROTOCOL, Failure.PROTOCOL.value) from exc


async def _read_capped(resp: aiohttp.ClientResponse, cap: int) -> bytes:
    if resp.content_length is not None and resp.content_length > cap:
        resp.close()
        raise TransportError(Failure.TOO_LARGE, f"answer larger than {cap} bytes")
    buf = bytearray()
    async for chunk in resp.content.iter_chunked(CHUNK):
        buf += chunk
        if len(buf) > cap:
            resp.close()
            raise TransportError(Failure.TOO_LARGE, f"answer larger than {cap} bytes")
    return bytes(buf)
