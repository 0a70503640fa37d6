"""Group member ``HealthCheck`` (``NovaAPIReady``), §7.5: an HTTP GET of the API root.

The probe targets the in-cluster URL ``http://{name}.{ns}.svc.cluster.local:8774/`` (the
compute API answers its version document without a token), never the gateway; an operator
running outside the cluster reaches it where ``--nova-api-url`` says. A
success is reused for 30 s for the same CR UID and URL while the condition is True, so a
converged pass sends nothing. The prober is injectable (tests, and clusters the operator
reaches only through the API server).
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Final

import aiohttp

from nova_operator import conditions, intervals
from nova_operator.reconcilers.context import PassContext, ProbeError
from nova_operator.runtime.request import Result

CONDITION: Final = conditions.NOVA_API_READY
HEALTHY: Final = "APIHealthy"
UNHEALTHY: Final = "APIUnhealthy"
ENDPOINT_NOT_READY: Final = "EndpointNotReady"
TIMEOUT: Final = "HealthCheckTimeout"
CONNECTION_FAILED: Final = "ConnectionFailed"
FAILED: Final = "HealthCheckFailed"
_BODY_LIMIT: Final = 256


async def http_probe(url: str, limit: float) -> tuple[int, str]:
    """GET ``url``; transport failures become ``ProbeError`` with their NovaAPIReady reason."""
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=limit)) as session,
            session.get(url) as resp,
        ):
            return resp.status, await resp.text(errors="replace")
    except TimeoutError as exc:
        raise ProbeError(TIMEOUT, f"GET {url} timed out after {limit:.0f} s") from exc
    except aiohttp.ClientConnectorError as exc:
        if isinstance(exc.os_error, socket.gaierror):
            raise ProbeError(ENDPOINT_NOT_READY, f"GET {url}: the name does not resolve") from exc
        raise ProbeError(
            CONNECTION_FAILED, f"GET {url}: {exc.os_error.strerror or 'connection failed'}"
        ) from exc
    except (aiohttp.ClientError, OSError) as exc:
        raise ProbeError(FAILED, f"GET {url}: {type(exc).__name__}") from exc


def probe_url(ctx: PassContext) -> str:
    return ctx.options.nova_api_url(ctx.name, ctx.namespace).rstrip("/") + "/"


async def run(ctx: PassContext) -> Result:
    if not ctx.status.get("endpoint"):
        ctx.set(CONDITION, False, ENDPOINT_NOT_READY, "status.endpoint is not set yet")
        return Result(requeue_after=intervals.HEALTH_CHECK_RETRY)
    url = probe_url(ctx)
    clock = ctx.options.monotonic or time.monotonic
    cache = ctx.options.health.successes
    key = (ctx.uid, url)
    previous = ctx.condition(CONDITION)
    last = cache.get(key)
    if (
        previous is not None
        and previous.get("status") == "True"
        and last is not None
        and clock() - last < intervals.HEALTH_CHECK_REUSE
    ):
        ctx.set(CONDITION, True, HEALTHY, str(previous.get("message") or f"GET {url} answered"))
        return Result()
    prober = ctx.options.prober or http_probe
    try:
        code, body = await prober(url, intervals.HEALTH_CHECK_TIMEOUT)
    except asyncio.CancelledError:
        raise
    except ProbeError as exc:
        cache.pop(key, None)
        ctx.set(CONDITION, False, exc.reason, str(exc))
        return Result(requeue_after=intervals.HEALTH_CHECK_RETRY)
    if 200 <= code < 300:
        cache[key] = clock()
        ctx.set(CONDITION, True, HEALTHY, f"GET {url} answered {code}")
        return Result()
    cache.pop(key, None)
    flat = " ".join(body.split())[:_BODY_LIMIT]
    ctx.set(CONDITION, False, UNHEALTHY, f"GET {url} answered {code}: {flat}")
    return Result(requeue_after=intervals.HEALTH_CHECK_RETRY)
