"""Step ``NetworkPolicy`` (``NetworkPolicyReady``), §7.6: ``{name}`` and ``{name}-novncproxy``.

The first step of every pass, so a requested policy exists before any pod of the Nova and a
failure of a later step never skips it. The broker port of the egress rule comes from the
published ``{name}-transport-url`` (this step runs before the TransportURLSecret step; on
the very first pass there is none yet and the rule is added on the next pass, before any
bus client, the conductor, is created).

Fail closed: a set ``spec.networkPolicy`` with an empty ingress list is an error (the CRD
refuses it too), never a policy that admits all ingress.
"""

from __future__ import annotations

from typing import Final

from nova_operator import conditions
from nova_operator.kube.resources import NETWORK_POLICIES, SECRETS
from nova_operator.reconcilers.nova.context import PassContext, secret_value
from nova_operator.renderers import network_policy
from nova_operator.renderers import secrets as derived
from nova_operator.runtime.request import Result

CONDITION: Final = conditions.NETWORK_POLICY_READY


async def reconcile_network_policy(ctx: PassContext) -> Result:
    spec = ctx.nova.spec.network_policy
    names = (ctx.name, f"{ctx.name}-novncproxy")
    if spec is None:
        for name in names:
            await ctx.remove(NETWORK_POLICIES, name)
        ctx.set(CONDITION, True, "NetworkPolicyNotRequired", "spec.networkPolicy is not set")
        return Result()
    if not spec.ingress:
        raise ValueError("spec.networkPolicy.ingress is empty: refusing a policy that admits all ingress")
    port = ctx.state.broker_port
    if port is None:
        published = secret_value(await ctx.live(SECRETS, f"{ctx.name}-transport-url"), "transport_url")
        port = derived.broker_port(published) if published else None
    desired = network_policy.network_policies(
        ctx.nova, operator_namespace=ctx.options.operator_namespace, broker_port=port
    )
    for policy in desired.values():
        await ctx.ensure(policy, ref=NETWORK_POLICIES)
    for name in names:
        if name not in desired:
            await ctx.remove(NETWORK_POLICIES, name)
    ctx.set(
        CONDITION, True, "NetworkPolicyReady", f"NetworkPolicies {', '.join(sorted(desired))} are applied"
    )
    return Result()
