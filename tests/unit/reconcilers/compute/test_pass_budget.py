"""A NovaCompute pass's budget (issue 36): from ``--pass-budget``, on the settings' clock."""

from __future__ import annotations

import math

from nova_operator.pipeline import NullObserver
from nova_operator.reconcilers.compute.context import ComputeSettings
from nova_operator.reconcilers.compute.reconciler import NovaComputeReconciler
from tests.unit.reconcilers.compute.fakes import FakeEvents, FakeKube


def pool() -> dict[str, object]:
    return {
        "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
        "kind": "NovaCompute",
        "metadata": {"name": "pool", "namespace": "ns", "uid": "u1", "generation": 1},
        "spec": {"novaRef": {"name": "nova"}, "nodeSelector": {"pool": "a"}},
    }


def reconciler(settings: ComputeSettings) -> NovaComputeReconciler:
    return NovaComputeReconciler(
        FakeKube(),  # type: ignore[arg-type]
        FakeEvents(),  # type: ignore[arg-type]
        pools=lambda ns, nova: [],
        observer=NullObserver(),
        settings=settings,
    )


def test_each_pass_gets_the_budget_from_its_start() -> None:
    now = [50.0]
    rec = reconciler(ComputeSettings(pass_budget=12.0, monotonic=lambda: now[0]))
    assert rec._pass(pool()).budget.ends == 62.0
    now[0] = 80.0
    later = rec._pass(pool()).budget
    assert later.ends == 92.0
    assert not later.spent()
    now[0] = 92.0
    assert later.spent()
    assert reconciler(ComputeSettings(pass_budget=None))._pass(pool()).budget.ends == math.inf
    assert ComputeSettings().pass_budget == 30.0
