"""The one I/O seam to the API server: ``Kube``, a thin async client that speaks plain dicts.

Requests go through kubernetes_asyncio's ``ApiClient`` for authentication and TLS, but
responses are never turned into generated model classes: bodies are decoded with
``json.loads`` (about 9x faster, see the architecture notes). Every request is counted
here, once, in ``nova_operator_api_requests_total{verb,resource,code}``, so tests and
benchmarks can count reads and writes exactly.

Errors are raised as ``nova_operator.kube.errors`` exceptions; every one names the request
and, for a timeout, what timed out and after how long.

Connections: watches have a connection pool of their own (one HTTP/1.1 connection per open
watch, no cap), so however many watches are open (kinds x watched namespaces) they never take
a connection from the pool every other request uses. ``own_connections`` gives a caller whose
requests must not wait behind the others (leader election's Lease requests) a pool of its own,
with its own retry policy, whose requests report their phase to ``tracing()``.

Phases (``kube.tracing``): a request made inside a ``tracing()`` scope on such a client records
where it is, so a caller that gives up on it (a timeout) can say where the time went.

Retries (client-go's behaviour): a 429 or a 5xx is retried with backoff (0.25 s doubling,
jitter, at most ``max_retries`` times); ``Retry-After`` is honoured, bounded by
``retry_after_max``. Idempotent requests (GET, PUT, PATCH, DELETE) retry on any 429/5xx; a
POST only when the server said it did not act on it (429) or said when to come back
(``Retry-After``). Each retry is counted in ``nova_operator_api_retries_total{verb,resource,code}``.
Watches are not retried here: the informer backs them off (and waits out a ``Retry-After``).

Memory per connection: asyncio gives every TLS connection a read buffer of its own,
``asyncio.sslproto.SSLProtocol.max_size`` (256 KiB). The operator keeps one connection per open
watch, and the Secrets informer watches each namespace that holds a Nova (``runtime.scoped``), so
that buffer was most of the memory a Nova costs: ``limit_tls_read_buffer`` lowers it to
``TLS_READ_BUFFER`` (16 KiB: one full TLS record, the most a record carries, per read) when a
``Kube`` is made. 100 TLS connections: 30 MiB with the default buffer, 7 MiB with 16 KiB.

Environment lookups: kubernetes_asyncio opens its aiohttp session with ``trust_env``, which makes
aiohttp read ``~/.netrc`` and the proxy variables on a worker thread for every request (two
thread hand-offs per request: about 1 ms each alone, and they halve the request rate under
concurrency). ``config.api_client`` reads the proxy variables once, when the client is made, as
client-go's ``ProxyFromEnvironment`` does, and turns the per-request lookups off. Nothing reads
``.netrc`` (client-go never does).

Every step is bounded: a request (connect, headers and body) by ``timeout``; opening a watch
(connect and response headers) by ``timeout`` too; its events by the informer's inactivity
timeout.

Credentials from a kubeconfig ``exec`` plugin (``ExecToken``) are run again, as client-go's exec
authenticator does, when the token the plugin gave reaches its ``expirationTimestamp`` and when
the server answers 401 (the token was revoked or rotated early); the refused request is sent once
more with the new token (a 401 means it was not acted on).
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import copy
import json
import math
import random
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any, Literal, NamedTuple

import aiohttp
import structlog
from kubernetes_asyncio.client.api_client import ApiClient

from nova_operator.clock import Clock, LoopClock
from nova_operator.kube import errors
from nova_operator.kube.config import ExecToken, api_client, load_api_client
from nova_operator.kube.liststream import decode_list
from nova_operator.kube.resources import ResourceRef
from nova_operator.kube.tracing import current_trace
from nova_operator.kube.types import Object
from nova_operator.metrics import Metrics
from nova_operator.settings import SERVICE_ACCOUNT_DIR

EventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]

_Query = list[tuple[str, str]]
_JSON = "application/json"
_MERGE = "application/merge-patch+json"
_APPLY = "application/apply-patch+yaml"
_IDEMPOTENT = frozenset({"GET", "PUT", "PATCH", "DELETE"})
RETRY_INITIAL = 0.25
RETRY_CAP = 8.0
log = structlog.get_logger("nova_operator.kube")
TLS_READ_BUFFER = 16 * 1024
LIST_CHUNK = 64 * 1024
"""The most a streamed List read takes from the response at a time (``Kube.list`` with ``each``)."""


class WatchEvent(NamedTuple):
    type: EventType
    object: Object


def limit_tls_read_buffer(size: int = TLS_READ_BUFFER) -> None:
    """Give every TLS connection opened from now on a read buffer of ``size`` bytes (process-wide).

    A TLS record holds at most 16 KiB, so reads stay whole records; only fewer bytes are
    taken per read. A smaller buffer set already (an embedding program's choice) is kept.
    """
    protocol = asyncio.sslproto.SSLProtocol
    protocol.max_size = min(protocol.max_size, size)


def _resource_label(ref: ResourceRef, subresource: str | None) -> str:
    return f"{ref}/{subresource}" if subresource else str(ref)


def describe(exc: BaseException) -> str:
    """An exception as text that is never empty (``TimeoutError()`` prints as nothing)."""
    text = str(exc).strip()
    return (
        f"{type(exc).__name__}: {text}"
        if text and isinstance(exc, TimeoutError)
        else text or type(exc).__name__
    )


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds; an HTTP date or junk gives None)."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return max(0.0, seconds) if math.isfinite(seconds) else None


def retry_delay(
    method: str,
    status: int,
    retry_after: float | None,
    attempt: int,
    *,
    max_retries: int,
    retry_after_max: float,
) -> float | None:
    """How long to wait before retrying attempt ``attempt`` (0-based) of a request, or None: do not."""
    if attempt >= max_retries or not (status == 429 or 500 <= status <= 599):
        return None
    if method not in _IDEMPOTENT and status != 429 and retry_after is None:
        return None  # a POST that failed server-side may have acted: only retry when told to
    if retry_after is not None:  # as told, and a little later, so that the refused do not return together
        return min(retry_after * random.uniform(1.0, 1.2), retry_after_max)
    backoff: float = RETRY_INITIAL * 2.0**attempt
    return min(backoff, RETRY_CAP) * random.uniform(1.0, 1.2)


class Kube:
    """Async API access for any ``ResourceRef``; every method returns plain dicts."""

    def __init__(
        self,
        api: ApiClient,
        *,
        metrics: Metrics | None = None,
        timeout: float = 30.0,
        watch_api: ApiClient | None = None,
        clock: Clock | None = None,
        max_retries: int = 4,
        retry_after_max: float = 10.0,
    ) -> None:
        limit_tls_read_buffer()
        self._api = api
        self._watch_api = watch_api  # None: made on the first watch, from the same configuration
        self.metrics = metrics if metrics is not None else Metrics()
        self.metrics.api_host = urllib.parse.urlsplit(str(api.configuration.host)).netloc
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_after_max = retry_after_max
        self._clock: Clock = clock if clock is not None else LoopClock()
        self._own: list[Kube] = []

    def own_connections(
        self,
        *,
        connections: int = 2,
        max_retries: int = 0,
        timeout: float | None = None,
        close_with_this: bool = True,
    ) -> Kube:
        """A client with a connection pool of its own (same server, credentials and metrics).

        Its requests never wait for a connection behind this client's (a LIST of every Secret, a
        burst of writes) and report their phases to ``tracing()``. ``max_retries`` 0: a 429 or
        5xx is raised at once, for a caller that retries on its own schedule. Closed with this
        client unless ``close_with_this`` is false (made on another thread's event loop: the
        caller closes it there).
        """
        cfg = copy.copy(self._api.configuration)
        cfg.connection_pool_maxsize = connections
        own = Kube(
            api_client(cfg, traced=True),
            metrics=self.metrics,
            timeout=self.timeout if timeout is None else timeout,
            clock=self._clock,
            max_retries=max_retries,
            retry_after_max=self.retry_after_max,
        )
        if close_with_this:
            self._own.append(own)
        return own

    @classmethod
    async def connect(
        cls,
        *,
        kubeconfig: str | None = None,
        context: str | None = None,
        metrics: Metrics | None = None,
        service_account_dir: str = SERVICE_ACCOUNT_DIR,
    ) -> Kube:
        api = await load_api_client(
            kubeconfig=kubeconfig, context=context, service_account_dir=service_account_dir
        )
        return cls(api, metrics=metrics)

    @property
    def host(self) -> str:
        return str(self._api.configuration.host)

    async def close(self) -> None:
        for own in self._own:
            await own.close()
        self._own.clear()
        if self._watch_api is not None:
            await self._watch_api.close()
            self._watch_api = None
        await self._api.close()

    def _watch_client(self) -> ApiClient:
        """The watches' own ApiClient: same configuration (credentials shared), uncapped pool."""
        if self._watch_api is None:
            cfg = copy.copy(self._api.configuration)
            cfg.connection_pool_maxsize = 0  # aiohttp: no limit; one connection per open watch
            self._watch_api = api_client(cfg)
        return self._watch_api

    async def __aenter__(self) -> Kube:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- verbs -------------------------------------------------------------------------------

    async def version(self) -> Object:
        """GET /version (used as a reachability check at start-up)."""
        return await self._call("get", "version", "GET", "/version")

    async def get(self, ref: ResourceRef, name: str, namespace: str | None = None) -> Object:
        return await self._call("get", str(ref), "GET", ref.path(namespace, name))

    async def list(
        self,
        ref: ResourceRef,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        resource_version: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        each: Callable[[Object], Object] | None = None,
    ) -> Object:
        """A List: ``metadata.resourceVersion``, ``items`` and, with ``limit``, ``metadata.continue``.

        With ``each``, the body is decoded item by item as it arrives (``kube.liststream``) and
        ``items`` holds what ``each`` returned for each: one item at a time is held whole.
        """
        query: _Query = []
        if label_selector:
            query.append(("labelSelector", label_selector))
        if resource_version is not None:
            query.append(("resourceVersion", resource_version))
        if limit:
            query.append(("limit", str(limit)))
        if continue_token:
            query.append(("continue", continue_token))
        return await self._call("list", str(ref), "GET", ref.path(namespace), query=query, each=each)

    def watch(
        self,
        ref: ResourceRef,
        namespace: str | None = None,
        *,
        resource_version: str,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
        allow_bookmarks: bool = True,
    ) -> WatchStream:
        """A watch from ``resource_version``; use as ``async with kube.watch(...) as events``."""
        query = [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", str(timeout_seconds)),
            ("allowWatchBookmarks", "true" if allow_bookmarks else "false"),
        ]
        if label_selector:
            query.append(("labelSelector", label_selector))
        return WatchStream(self, ref, ref.path(namespace), query)

    async def create(self, ref: ResourceRef, body: Mapping[str, Any], namespace: str | None = None) -> Object:
        return await self._call("create", str(ref), "POST", ref.path(namespace), body=body)

    async def replace(
        self,
        ref: ResourceRef,
        body: Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
    ) -> Object:
        """PUT (optimistic concurrency via ``metadata.resourceVersion`` in ``body``)."""
        name = body["metadata"]["name"]
        return await self._call(
            "update",
            _resource_label(ref, subresource),
            "PUT",
            ref.path(namespace, name, subresource),
            body=body,
        )

    async def apply(
        self,
        ref: ResourceRef,
        body: Mapping[str, Any],
        *,
        field_manager: str,
        namespace: str | None = None,
        force: bool = True,
        subresource: str | None = None,
    ) -> Object:
        """Server-side apply of ``body`` (its ``metadata.name`` names the object)."""
        name = body["metadata"]["name"]
        query = [("fieldManager", field_manager), ("force", "true" if force else "false")]
        return await self._call(
            "apply",
            _resource_label(ref, subresource),
            "PATCH",
            ref.path(namespace, name, subresource),
            query=query,
            body=body,
            content_type=_APPLY,
        )

    async def patch(
        self,
        ref: ResourceRef,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> Object:
        """JSON merge patch."""
        query = [("fieldManager", field_manager)] if field_manager else []
        return await self._call(
            "patch",
            _resource_label(ref, subresource),
            "PATCH",
            ref.path(namespace, name, subresource),
            query=query,
            body=patch,
            content_type=_MERGE,
        )

    async def patch_status(
        self, ref: ResourceRef, name: str, patch: Mapping[str, Any], namespace: str | None = None
    ) -> Object:
        """JSON merge patch of the status subresource."""
        return await self.patch(ref, name, patch, namespace, subresource="status")

    async def delete(
        self,
        ref: ResourceRef,
        name: str,
        namespace: str | None = None,
        *,
        propagation: Literal["Background", "Foreground", "Orphan"] = "Background",
        uid: str | None = None,
    ) -> None:
        body: dict[str, Any] = {"propagationPolicy": propagation}
        if uid:
            body["preconditions"] = {"uid": uid}
        await self._call("delete", str(ref), "DELETE", ref.path(namespace, name), body=body)

    # -- plumbing ----------------------------------------------------------------------------

    async def _send(
        self,
        verb: str,
        resource: str,
        method: str,
        path: str,
        *,
        query: _Query | None = None,
        body: Mapping[str, Any] | None = None,
        content_type: str = _JSON,
        watch: bool = False,
    ) -> aiohttp.ClientResponse:
        """Send one request; the caller reads and releases the response (status already checked).

        Bounded by ``timeout`` up to the response headers; a watch uses its own connection pool.
        """
        started = time.monotonic()
        code = "error"
        api = self._watch_client() if watch else self._api
        what = f"watch {path}" if watch else f"{method} {path}"
        timeout = aiohttp.ClientTimeout(total=None if watch else self.timeout, connect=self.timeout)
        if (trace := current_trace()) is not None:
            trace.request, trace.code = f"{method} {resource}", None
            trace.enter("preparing (credentials)")
        try:
            async with self._clock.timeout(self.timeout):
                resp: aiohttp.ClientResponse = await api.call_api(
                    path,
                    method,
                    query_params=query or [],
                    header_params={"Content-Type": content_type, "Accept": _JSON},
                    body=dict(body) if body is not None else None,
                    auth_settings=["BearerToken"],
                    _preload_content=False,
                    _request_timeout=timeout,
                )
            code = str(resp.status)
            if trace is not None:
                trace.code = resp.status
                trace.enter("reading the response" if resp.status < 300 else f"answered {resp.status}")
        except TimeoutError as exc:
            step = "response headers" if watch else "response"
            raise errors.Unreachable(f"{what}: no {step} within {self.timeout:g} s (timed out)") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise errors.Unreachable(f"{what}: {describe(exc)}") from exc
        finally:
            self.metrics.count_request(verb, resource, code)
            self.metrics.api_request_duration.labels(verb, resource).observe(time.monotonic() - started)
        if resp.status >= 300:
            try:
                async with self._clock.timeout(self.timeout):
                    data = await resp.read()
            except (aiohttp.ClientError, OSError, TimeoutError):
                data = b""
            finally:
                resp.release()
            err = errors.from_status(resp.status, data)
            err.retry_after = parse_retry_after(resp.headers.get("Retry-After"))
            if resp.status == 401 and (token := self._exec_token()) is not None:
                # refused (revoked, rotated early): the next request, or watch open, runs the plugin
                token.invalidate(str(api.configuration.api_key.get("BearerToken") or ""))
                log.info("API server refused the exec plugin's token (401); it will be fetched anew")
            raise err
        return resp

    async def _call(
        self,
        verb: str,
        resource: str,
        method: str,
        path: str,
        *,
        query: _Query | None = None,
        body: Mapping[str, Any] | None = None,
        content_type: str = _JSON,
        each: Callable[[Object], Object] | None = None,
    ) -> Object:
        """One request with its retries on 429 and 5xx (see the module docstring)."""
        attempt = 0
        reauthenticated = False
        while True:
            try:
                return await self._call_once(
                    verb, resource, method, path, query=query, body=body, content_type=content_type, each=each
                )
            except errors.KubeError as exc:
                if exc.status == 401 and not reauthenticated and self._exec_token() is not None:
                    reauthenticated = True  # ``_send`` dropped the refused token: once more with a new one
                    continue
                delay = retry_delay(
                    method,
                    exc.status,
                    exc.retry_after,
                    attempt,
                    max_retries=self.max_retries,
                    retry_after_max=self.retry_after_max,
                )
                if delay is None:
                    raise
                self.metrics.api_retries.labels(verb, resource, str(exc.status)).inc()
                log.info(
                    "API request refused, retrying",
                    request=f"{method} {path}",
                    code=exc.status,
                    retry_after=exc.retry_after,
                    retry_in=round(delay, 3),
                    attempt=attempt + 1,
                )
                await self._clock.sleep(delay)
                attempt += 1

    def _exec_token(self) -> ExecToken | None:
        hook = getattr(self._api.configuration, "refresh_api_key_hook", None)
        return hook if isinstance(hook, ExecToken) else None

    async def _call_once(
        self,
        verb: str,
        resource: str,
        method: str,
        path: str,
        *,
        query: _Query | None,
        body: Mapping[str, Any] | None,
        content_type: str,
        each: Callable[[Object], Object] | None = None,
    ) -> Object:
        resp = await self._send(
            verb, resource, method, path, query=query, body=body, content_type=content_type
        )
        try:
            async with self._clock.timeout(self.timeout):
                if each is not None:
                    return await decode_list(resp.content.iter_chunked(LIST_CHUNK), each)
                data = await resp.read()
        except TimeoutError as exc:
            raise errors.Unreachable(
                f"{method} {path}: response body not read within {self.timeout:g} s (timed out)"
            ) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise errors.Unreachable(f"{method} {path}: {describe(exc)}") from exc
        finally:
            resp.release()
        doc: Object = json.loads(data) if data else {}
        return doc


class WatchStream:
    """One open watch: an async context manager yielding ``WatchEvent``s.

    An in-stream ``ERROR`` event with code 410 raises ``errors.Gone``; other ``ERROR``
    events raise ``errors.KubeError``. The stream ends when the server closes it.
    """

    def __init__(self, kube: Kube, ref: ResourceRef, path: str, query: _Query) -> None:
        self._kube, self._ref, self._path, self._query = kube, ref, path, query
        self._resp: aiohttp.ClientResponse | None = None
        self._buf = b""

    async def __aenter__(self) -> WatchStream:
        self._resp = await self._kube._send(
            "watch", str(self._ref), "GET", self._path, query=self._query, watch=True
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._resp is not None:
            self._resp.close()
            self._resp = None

    def __aiter__(self) -> WatchStream:
        return self

    async def __anext__(self) -> WatchEvent:
        line = await self._next_line()
        event = json.loads(line)
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            raise errors.from_status(int(obj.get("code", 500)), obj)
        return WatchEvent(kind, obj)

    async def _next_line(self) -> bytes:
        if self._resp is None:
            raise RuntimeError("use the watch as an async context manager")
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line, self._buf = self._buf[:nl], self._buf[nl + 1 :]
                if line.strip():
                    return line
                continue
            try:
                chunk = await self._resp.content.readany()
            except (aiohttp.ClientError, OSError, asyncio.IncompleteReadError) as exc:
                raise errors.Unreachable(f"watch {self._path}: {describe(exc)}") from exc
            if not chunk:
                line, self._buf = self._buf, b""
                if line.strip():
                    return line
                raise StopAsyncIteration
            self._buf += chunk
