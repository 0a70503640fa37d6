"""A NovaCompute pass's budget (issue 36): from ``--pass-budget``, on the settings' clock, for a
pool stored on the real API server and a reconciler on the real client."""

from __future__ import annotations

import math

import pytest

from nova_operator.pipeline import NullObserver
from nova_operator.reconcilers.compute.context import ComputeSettings
from nova_operator.reconcilers.compute.reconciler import NovaComputeReconciler
from tests.integration.novacompute.passes import Emitted, Stage

pytestmark = pytest.mark.integration


def reconciler(stage: Stage, settings: ComputeSettings) -> NovaComputeReconciler:
    return NovaComputeReconciler(
        stage.kube,
        Emitted(),
        pools=lambda ns, nova: [],
        observer=NullObserver(),
        settings=settings,
    )


async def test_each_pass_gets_the_budget_from_its_start(stage: Stage) -> None:
    pool = await stage.pool()
    now = [50.0]
    rec = reconciler(stage, ComputeSettings(pass_budget=12.0, monotonic=lambda: now[0]))
    assert rec._pass(pool).budget.ends == 62.0
    now[0] = 80.0
    later = rec._pass(pool).budget
    assert later.ends == 92.0
    assert not later.spent()
    now[0] = 92.0
    assert later.spent()
    assert reconciler(stage, ComputeSettings(pass_budget=None))._pass(pool).budget.ends == math.inf
    assert ComputeSettings().pass_budget == 30.0
    assert stage.kube.sent == []  # building a pass sends nothing
