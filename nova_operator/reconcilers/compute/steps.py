"""The NovaCompute pipeline as data (novacompute-crd.md §5.1), and its step metrics (reconciler.md §14.1).

    NovaRef -> Nodes -> PoolConfig -> DaemonSet -> ComputeVPA -> Aggregates -> Services

The first step that asks for a requeue or raises ends the pass. The drain lives in the last
step, so any earlier stop pauses it for that pass.
"""

from __future__ import annotations

from typing import Final

from nova_operator import conditions
from nova_operator.metrics import Metrics
from nova_operator.pipeline import Step
from nova_operator.reconcilers.compute.aggregates import reconcile_aggregates
from nova_operator.reconcilers.compute.context import ComputePass
from nova_operator.reconcilers.compute.daemonset import reconcile_daemonset
from nova_operator.reconcilers.compute.nodes import reconcile_nodes
from nova_operator.reconcilers.compute.novaref import reconcile_nova_ref
from nova_operator.reconcilers.compute.pool_config import reconcile_pool_config
from nova_operator.reconcilers.compute.services import reconcile_services
from nova_operator.reconcilers.compute.vpa import reconcile_vpa

NOVA_REF = Step[ComputePass]("NovaRef", conditions.NOVA_REF_READY, reconcile_nova_ref)
AGGREGATES = Step[ComputePass]("Aggregates", conditions.AGGREGATES_READY, reconcile_aggregates)

NOVACOMPUTE_STEPS: Final[tuple[Step[ComputePass], ...]] = (
    NOVA_REF,
    Step("Nodes", conditions.NODES_READY, reconcile_nodes),
    Step("PoolConfig", conditions.CONFIG_READY, reconcile_pool_config),
    Step("DaemonSet", conditions.DAEMONSET_READY, reconcile_daemonset),
    Step("ComputeVPA", conditions.VPA_READY, reconcile_vpa),
    AGGREGATES,
    Step("Services", conditions.SERVICES_READY, reconcile_services),
)

TEARDOWN_STEPS: Final[tuple[Step[ComputePass], ...]] = (NOVA_REF, AGGREGATES)
"""A deleting pool that holds no node: nothing that could recreate swept children (§16)."""

STEP_CONDITIONS: Final[dict[str, str]] = {s.name: s.condition for s in NOVACOMPUTE_STEPS}


class StepMetrics:
    """``nova_operator_reconcile_duration_seconds`` and ``_errors_total`` for the NovaCompute steps."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        for name, cond in STEP_CONDITIONS.items():  # pre-created at 0 so rates and alerts work at once
            metrics.step_errors.labels(name, cond)

    def observe_step(self, step: str, condition: str, seconds: float, *, failed: bool) -> None:
        self._metrics.step_duration.labels(step).observe(seconds)
        if failed:
            self._metrics.step_errors.labels(step, STEP_CONDITIONS.get(step, "UNKNOWN")).inc()
