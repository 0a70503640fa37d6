"""The HTTPRoute steps on the real API server: a route no parent accepted yet, and a cluster without
the Gateway API.
"""

from __future__ import annotations

from nova_operator import conditions, intervals
from nova_operator.kube import Kube
from nova_operator.kube.resources import (
    HTTPROUTES,
)
from nova_operator.reconcilers.nova import (
    http_route,
)
from nova_operator.reconcilers.nova.context import NovaOptions
from tests.integration.nova.passes import make_ctx, stored_nova
from tests.integration.nova.reasons_kit import (
    reason,
    written,
)
from tests.integration.nova.requests import Recorder

GATEWAY = {"hostname": "nova.example.org", "parentRef": {"name": "public"}}


async def test_a_route_no_parent_accepted_yet_is_http_route_not_accepted(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    ctx = make_ctx(ours, await stored_nova(admin, namespace, gateway=GATEWAY))
    assert (await http_route.reconcile_http_route(ctx)).requeue_after == intervals.DEPLOYMENT_POLL
    assert reason(ctx, conditions.HTTP_ROUTE_READY)[:2] == ("False", "HTTPRouteNotAccepted")
    assert (await admin.get(HTTPROUTES, "nova", namespace))["spec"]["hostnames"] == ["nova.example.org"]


async def test_a_cluster_without_the_gateway_api_is_gateway_api_not_installed(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await stored_nova(admin, namespace, gateway=GATEWAY)
    ctx = make_ctx(ours, nova, options=NovaOptions(gateway_api=False))
    assert (await http_route.reconcile_http_route(ctx)).requeue_after is None
    assert reason(ctx, conditions.HTTP_ROUTE_READY)[:2] == ("False", "GatewayAPINotInstalled")
    assert written(ours) == []
