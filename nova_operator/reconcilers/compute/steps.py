"""The NovaCompute pipeline as data (novacompute-crd.md §5.1), (reconciler.md §14.1 names its step metrics).

    NovaRef -> Nodes -> PoolConfig -> DaemonSet -> ComputeVPA -> Aggregates -> Services

The first step that asks for a requeue or raises ends the pass, and so does the pass's budget
(``pipeline.Budget``) before a step after the first. The drain lives in the last step, so any
earlier stop pauses it for that pass.
"""

from __future__ import annotations

from typing import Final

from nova_operator import conditions
from nova_operator.pipeline import Step
from nova_operator.reconcilers.compute.aggregates import reconcile_aggregates
from nova_operator.reconcilers.compute.compute_vpa import reconcile_compute_vpa
from nova_operator.reconcilers.compute.context import ComputePass
from nova_operator.reconcilers.compute.daemon_set import reconcile_daemon_set
from nova_operator.reconcilers.compute.nodes import reconcile_nodes
from nova_operator.reconcilers.compute.nova_ref import reconcile_nova_ref
from nova_operator.reconcilers.compute.pool_config import reconcile_pool_config
from nova_operator.reconcilers.compute.services import reconcile_services

NOVA_REF = Step[ComputePass]("NovaRef", conditions.NOVA_REF_READY, reconcile_nova_ref)
AGGREGATES = Step[ComputePass]("Aggregates", conditions.AGGREGATES_READY, reconcile_aggregates)

NOVACOMPUTE_STEPS: Final[tuple[Step[ComputePass], ...]] = (
    NOVA_REF,
    Step("Nodes", conditions.NODES_READY, reconcile_nodes),
    Step("PoolConfig", conditions.CONFIG_READY, reconcile_pool_config),
    Step("DaemonSet", conditions.DAEMONSET_READY, reconcile_daemon_set),
    Step("ComputeVPA", conditions.VPA_READY, reconcile_compute_vpa),
    AGGREGATES,
    Step("Services", conditions.SERVICES_READY, reconcile_services),
)

TEARDOWN_STEPS: Final[tuple[Step[ComputePass], ...]] = (NOVA_REF, AGGREGATES)
"""A deleting pool that holds no node: nothing that could recreate swept children (§16)."""

STEP_CONDITIONS: Final[dict[str, str]] = {s.name: s.condition for s in NOVACOMPUTE_STEPS}
