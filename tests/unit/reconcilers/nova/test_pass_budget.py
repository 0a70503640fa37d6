"""A Nova pass's budget (issue 36): no step after it is spent, no group; the rest in the next pass."""

from __future__ import annotations

import pytest

from nova_operator.kube.resources import NOVAS
from nova_operator.pipeline import LEFT_OVER, Step
from nova_operator.reconcilers.nova import reconciler as nova_reconciler
from nova_operator.reconcilers.nova.context import NovaOptions, PassContext
from nova_operator.reconcilers.nova.reconciler import NovaReconciler
from nova_operator.runtime.request import Request, Result
from tests.unit.reconcilers.fakes import FakeEvents, FakeKube
from tests.unit.reconcilers.nova.passes import NS, nova_obj


class Ticks:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_a_nova_pass_begins_no_step_and_no_group_once_its_budget_is_spent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ticks = Ticks()
    ran: list[str] = []

    def step(name: str, seconds: float) -> Step[PassContext]:
        async def run(ctx: PassContext) -> Result:
            ran.append(name)
            ticks.now += seconds
            return Result()

        return Step(name, f"{name}Ready", run)

    monkeypatch.setattr(nova_reconciler, "NOVA_STEPS", (step("A", 20), step("B", 15), step("C", 1)))
    monkeypatch.setattr(nova_reconciler, "NOVA_GROUP", (step("G", 1),))
    kube = FakeKube()
    kube.put(NOVAS, nova_obj())
    options = NovaOptions(pass_budget=30.0, monotonic=ticks, stale_services=False)
    rec = NovaReconciler(kube, {}, events=FakeEvents(), options=options)  # type: ignore[arg-type]
    assert await rec.reconcile(Request(NS, "nova")) == LEFT_OVER
    assert ran == ["A", "B"]  # C would have begun at 35 s
    ran.clear()
    monkeypatch.setattr(nova_reconciler, "NOVA_STEPS", (step("A", 1), step("B", 30)))
    assert await rec.reconcile(Request(NS, "nova")) == LEFT_OVER
    assert ran == ["A", "B"]  # the group would have begun at 31 s
    ran.clear()
    unlimited = NovaReconciler(  # type: ignore[arg-type]
        kube, {}, events=FakeEvents(), options=NovaOptions(pass_budget=None, monotonic=ticks)
    )
    assert await unlimited.reconcile(Request(NS, "nova")) == Result()
    assert ran == ["A", "B", "G"]
