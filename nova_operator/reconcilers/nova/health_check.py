"""Group member ``HealthCheck`` (``NovaAPIReady``), §7.5: an HTTP GET of the API root.

The probe targets the in-cluster URL ``http://{name}.{ns}.svc.cluster.local:8774/`` (the
compute API answers its version document without a token), never the gateway; an operator
running outside the cluster reaches it where ``--nova-api-url`` says. A
success is reused for 30 s for the same CR UID and URL while the condition is True, so a
converged pass sends nothing. The prober is injectable (tests, and clusters the operator
reaches only through the API server).

The API pods run the tenant's image, so the probe trusts nothing of the answer: it follows no
redirect (a 3xx is ``APIUnhealthy``), reads no body (only the status line and headers, within the
10 s deadline), and the condition carries the status code and its standard phrase, never a byte
of the answer (beyond the spec, which quotes 256 characters of the body).
"""

from __future__ import annotations

import asyncio
import time
from http import HTTPStatus
from typing import Final

from nova_operator import conditions, intervals
from nova_operator.openstack import http
from nova_operator.reconcilers.nova.context import PassContext, ProbeError
from nova_operator.runtime.request import Result

CONDITION: Final = conditions.NOVA_API_READY
HEALTHY: Final = "APIHealthy"
UNHEALTHY: Final = "APIUnhealthy"
ENDPOINT_NOT_READY: Final = "EndpointNotReady"
TIMEOUT: Final = "HealthCheckTimeout"
CONNECTION_FAILED: Final = "ConnectionFailed"
FAILED: Final = "HealthCheckFailed"


async def http_probe(url: str, limit: float) -> int:
    """GET ``url``; the status code. Transport failures become ``ProbeError`` with their reason."""
    try:
        reply = await http.request("GET", url, deadline=limit, max_body=0, read_body=False)
    except http.TransportError as exc:
        message = f"GET {url}: {exc}"
        if exc.kind is http.Failure.TIMEOUT:
            raise ProbeError(TIMEOUT, message) from exc
        if exc.kind is http.Failure.DNS:
            raise ProbeError(ENDPOINT_NOT_READY, message) from exc
        if exc.kind is http.Failure.CONNECT:
            raise ProbeError(CONNECTION_FAILED, message) from exc
        raise ProbeError(FAILED, message) from exc
    return reply.status


def answered(url: str, code: int) -> str:
    """The condition message of an answer: status code and standard phrase (fixed text only)."""
    try:
        phrase = HTTPStatus(code).phrase
    except ValueError:
        phrase = "unexpected status"
    if 300 <= code < 400:
        phrase += ", a redirect (not followed)"
    return f"GET {url} answered {code} {phrase}"


def probe_url(ctx: PassContext) -> str:
    return ctx.options.nova_api_url(ctx.name, ctx.namespace).rstrip("/") + "/"


async def reconcile_health_check(ctx: PassContext) -> Result:
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
        code = await prober(url, intervals.HEALTH_CHECK_TIMEOUT)
    except asyncio.CancelledError:
        raise
    except ProbeError as exc:
        cache.pop(key, None)
        ctx.set(CONDITION, False, exc.reason, str(exc))
        return Result(requeue_after=intervals.HEALTH_CHECK_RETRY)
    if 200 <= code < 300:
        cache[key] = clock()
        ctx.set(CONDITION, True, HEALTHY, answered(url, code))
        return Result()
    cache.pop(key, None)
    ctx.set(CONDITION, False, UNHEALTHY, answered(url, code))
    return Result(requeue_after=intervals.HEALTH_CHECK_RETRY)
