"""Issue 13 item 6: a NovaCompute the CRD admits but the model refuses gets a condition, one
Warning event per distinct problem, and its deletion completes.

The CRD now carries every rule of the model it can (label keys and values included), so the
test stands in a model with one extra rule (a node-selector value the model alone refuses):
what is under test is the controller's answer to a model refusal, on the real API server. On
3c18ab1 the pass raised a TerminalError: no condition, no event, and a deleted pool stayed
Terminating because its finalizer was never removed.
"""

from __future__ import annotations

import pytest
from pydantic import field_validator

from nova_operator.kube.resources import NOVACOMPUTES
from nova_operator.models.novacompute import NovaCompute, NovaComputeSpec
from nova_operator.reconcilers.compute import reconciler

from .conftest import Env  # type: ignore[import-not-found]

pytestmark = pytest.mark.integration

REFUSED = "model-only"


class _StricterSpec(NovaComputeSpec):
    @field_validator("node_selector")
    @classmethod
    def _model_only(cls, value: dict[str, str]) -> dict[str, str]:
        keys = sorted(k for k, v in value.items() if v == REFUSED)
        if keys:
            raise ValueError(f"a rule only the model checks refuses the selector keys {keys}")
        return value


class _StricterPool(NovaCompute):
    spec: _StricterSpec


@pytest.fixture(autouse=True)
def stricter_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reconciler, "NovaCompute", _StricterPool)


async def test_a_model_refusal_is_a_condition_an_event_and_deletion_completes(env: Env) -> None:
    await env.nova()
    await env.pool(selector=REFUSED)

    async def refused() -> bool:
        c = await env.condition("ConfigReady")
        return c is not None and c["reason"] == "ConfigError"

    await env.until(refused)
    cond = await env.condition("ConfigReady")
    assert cond is not None
    assert cond["status"] == "False"
    assert "spec.nodeSelector" in cond["message"]
    assert "only the model checks" in cond["message"]
    ready = await env.condition("Ready")
    assert ready is not None
    assert ready["status"] == "False"
    await env.settle(1.0)
    warnings = [e for e in await env.events("InvalidSpec") if e["type"] == "Warning"]
    assert len(warnings) == 1, warnings
    assert warnings[0].get("count", 1) == 1  # once per distinct problem, not per wake-up

    # a second, different problem is a second event
    await env.admin.patch(
        NOVACOMPUTES, "pool", {"spec": {"nodeSelector": {"pool": REFUSED, "zone": REFUSED}}}, env.ns
    )

    async def two_events() -> bool:
        return len(await env.events("InvalidSpec")) >= 2 or any(
            e.get("count", 1) >= 2 for e in await env.events("InvalidSpec")
        )

    try:
        await env.until(two_events)
    except TimeoutError:
        raise AssertionError((await env.condition("ConfigReady"), await env.events("InvalidSpec"))) from None

    await env.admin.delete(NOVACOMPUTES, "pool", env.ns)

    async def gone() -> bool:
        return await env.get(NOVACOMPUTES, "pool") is None

    await env.until(gone, within=30)
