"""Group member ``HPA`` (``HPAReady``), §7.6: the API's HorizontalPodAutoscaler while autoscaling is set."""

from __future__ import annotations

from typing import Final

from nova_operator import conditions
from nova_operator.kube.resources import HPAS
from nova_operator.reconcilers.nova.context import PassContext
from nova_operator.renderers import hpa
from nova_operator.runtime.request import Result

CONDITION: Final = conditions.HPA_READY


async def reconcile_hpa(ctx: PassContext) -> Result:
    desired = hpa.hpa(ctx.nova)
    if desired is None:
        await ctx.remove(HPAS, ctx.name)
        ctx.set(CONDITION, True, "HPANotRequired", "spec.autoscaling is not set")
        return Result()
    await ctx.ensure(desired, ref=HPAS)
    ctx.set(CONDITION, True, "HPAReady", f"HorizontalPodAutoscaler {ctx.name} is applied")
    return Result()
