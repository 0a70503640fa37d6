"""The three route members of the concurrent group (§7.4): HTTPRoute, MetadataHTTPRoute, ConsoleHTTPRoute.

A gateway block that is unset (a disabled console proxy counts as unset) deletes its route
and reports ``HTTPRouteNotRequired``. A set block applies the route and waits (10 s) until a
parent accepts it. A cluster without the Gateway API reports ``GatewayAPINotInstalled`` for a
set block instead of failing.
"""

from __future__ import annotations

from typing import Final

from nova_operator import conditions, intervals
from nova_operator.decisions.readiness import route_accepted
from nova_operator.kube.resources import HTTPROUTES
from nova_operator.naming import Component
from nova_operator.reconcilers.nova.context import PassContext
from nova_operator.renderers import http_route
from nova_operator.runtime.request import Result

ACCEPTED: Final = "HTTPRouteAccepted"
NOT_REQUIRED: Final = "HTTPRouteNotRequired"
NOT_ACCEPTED: Final = "HTTPRouteNotAccepted"
NOT_INSTALLED: Final = "GatewayAPINotInstalled"

_ROUTES: Final = {
    Component.API: (conditions.HTTP_ROUTE_READY, ""),
    Component.METADATA: (conditions.METADATA_HTTP_ROUTE_READY, "-metadata"),
    Component.NOVNCPROXY: (conditions.CONSOLE_HTTP_ROUTE_READY, "-console"),
}


async def reconcile_route(ctx: PassContext, component: Component) -> Result:
    condition, suffix = _ROUTES[component]
    desired = http_route.http_route(ctx.nova, component)
    if not ctx.options.gateway_api:
        if desired is None:
            ctx.set(condition, True, NOT_REQUIRED, "no gateway block is set")
        else:
            ctx.set(
                condition,
                False,
                NOT_INSTALLED,
                "the cluster does not serve gateway.networking.k8s.io/v1 HTTPRoute",
            )
        return Result()
    if desired is None:
        await ctx.remove(HTTPROUTES, f"{ctx.name}{suffix}")
        ctx.set(condition, True, NOT_REQUIRED, "no gateway block is set")
        return Result()
    live = await ctx.ensure(desired, ref=HTTPROUTES)
    name = live["metadata"]["name"]
    if not route_accepted(live):
        ctx.set(condition, False, NOT_ACCEPTED, f"HTTPRoute {name} is not accepted by a parent yet")
        return Result(requeue_after=intervals.DEPLOYMENT_POLL)
    ctx.set(condition, True, ACCEPTED, f"HTTPRoute {name} is accepted")
    return Result()


async def reconcile_http_route(ctx: PassContext) -> Result:
    return await reconcile_route(ctx, Component.API)


async def reconcile_metadata_http_route(ctx: PassContext) -> Result:
    return await reconcile_route(ctx, Component.METADATA)


async def reconcile_console_http_route(ctx: PassContext) -> Result:
    return await reconcile_route(ctx, Component.NOVNCPROXY)
