"""A Nova pass's budget (issue 36) on the real API server: no step begins after it is spent, no
group; the rest in the next pass.

``NovaReconciler.reconcile`` runs over a Nova stored by kube-apiserver (read, finalizer and status
written there), with stand-in steps that only advance the pass's clock.
"""

from __future__ import annotations

import pytest

from nova_operator.kube import Kube
from nova_operator.kube.resources import NOVAS
from nova_operator.pipeline import LEFT_OVER, Step
from nova_operator.reconcilers.nova import reconciler as nova_reconciler
from nova_operator.reconcilers.nova.context import NovaOptions, PassContext
from nova_operator.reconcilers.nova.reconciler import FINALIZER, NovaReconciler
from nova_operator.runtime.request import Request, Result
from tests.integration.nova.passes import Emitted, stored_nova
from tests.integration.nova.requests import Recorder


class Ticks:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_a_nova_pass_begins_no_step_and_no_group_once_its_budget_is_spent(
    admin: Kube, namespace: str, monkeypatch: pytest.MonkeyPatch
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
    await stored_nova(admin, namespace)
    ours = Recorder.of(admin)
    options = NovaOptions(pass_budget=30.0, monotonic=ticks, stale_services=False)
    rec = NovaReconciler(ours, {}, events=Emitted(), options=options)
    nova = Request(namespace, "nova")
    assert await rec.reconcile(nova) == LEFT_OVER
    assert ran == ["A", "B"]  # C would have begun at 35 s
    ran.clear()
    monkeypatch.setattr(nova_reconciler, "NOVA_STEPS", (step("A", 1), step("B", 30)))
    assert await rec.reconcile(nova) == LEFT_OVER
    assert ran == ["A", "B"]  # the group would have begun at 31 s
    ran.clear()
    unlimited = NovaReconciler(
        ours, {}, events=Emitted(), options=NovaOptions(pass_budget=None, monotonic=ticks)
    )
    assert await unlimited.reconcile(nova) == Result()
    assert ran == ["A", "B", "G"]
    stored = await admin.get(NOVAS, "nova", namespace)  # the passes were written to the server
    assert FINALIZER in stored["metadata"]["finalizers"]
    assert [c["type"] for c in stored["status"]["conditions"]] == ["Ready"]  # the steps set none
