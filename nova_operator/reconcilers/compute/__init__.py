"""The NovaCompute controller: one module per step, the pipeline as data, the pass and the factory.

Register ``controller_factory`` in ``nova_operator.controllers``.
"""

from nova_operator.reconcilers.compute.context import ComputePass, ComputeSettings
from nova_operator.reconcilers.compute.controller import controller_factory, factory_with
from nova_operator.reconcilers.compute.reconciler import NovaComputeReconciler
from nova_operator.reconcilers.compute.steps import NOVACOMPUTE_STEPS, STEP_CONDITIONS

__all__ = [
    "NOVACOMPUTE_STEPS",
    "STEP_CONDITIONS",
    "ComputePass",
    "ComputeSettings",
    "NovaComputeReconciler",
    "controller_factory",
    "factory_with",
]
