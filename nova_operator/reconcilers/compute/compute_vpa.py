"""Step ComputeVPA (condition VPAReady): always ``VPANotRequired`` here.

Scope decision (spec README, "VerticalPodAutoscaler: out of scope"): the NovaCompute kind
of this operator has no ``spec.verticalAutoscaling``, so no pool can opt in. §10 says a pool
that does not opt in reports ``VPAReady=True`` with reason ``VPANotRequired``; keeping the
step (rather than dropping VPAReady from Ready) keeps the seven-condition Ready aggregate,
the step list and the ``sub_reconciler="ComputeVPA"`` metric series identical to upstream,
so dashboards and a later VPA implementation need no change.
"""

from __future__ import annotations

from nova_operator import conditions
from nova_operator.reconcilers.compute.context import ComputePass
from nova_operator.runtime.request import Result

COND = conditions.VPA_READY
MESSAGE = "no VerticalPodAutoscaler is requested: this operator does not offer spec.verticalAutoscaling"


async def reconcile_compute_vpa(p: ComputePass) -> Result:
    p.set(COND, True, "VPANotRequired", MESSAGE)
    return Result()
