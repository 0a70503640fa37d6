"""Issue 26 item 8 on the real API server: values the operator writes fit the limits that check them.

On e59040d both writes here were refused on every pass: the ``config-base`` label of a pool
named with 63 characters was 70 characters long (the pool's ConfigMap was never created), and a
condition message over the CRD's 32,768 characters made the API server refuse the whole status
write (``Ready`` never appeared).
"""

from __future__ import annotations

import pytest
from pydantic import field_validator

from nova_operator import naming
from nova_operator.kube import errors
from nova_operator.kube.resources import CONFIGMAPS, NOVACOMPUTES
from nova_operator.models.meta import CONDITION_MESSAGE_MAX
from nova_operator.models.novacompute import NovaCompute, NovaComputeSpec
from nova_operator.reconcilers.compute import reconciler
from nova_operator.renderers import compute_pool

from .conftest import Env

pytestmark = pytest.mark.integration

LONG_NAME = "pool-" + "r" * 57 + "7"  # 63 characters: the most the CRD admits
HUGE = 41_598  # the message length measured in the issue


async def test_a_pool_with_a_63_character_name_gets_its_config_map(env: Env) -> None:
    assert len(LONG_NAME) == 63
    await env.nova()
    await env.node("n1", pool="a", zone="az1")
    await env.pool(LONG_NAME)

    async def rendered() -> bool:
        c = await env.condition("ConfigReady", LONG_NAME)
        return c is not None and c["status"] == "True"

    try:
        await env.until(rendered)
    except TimeoutError:
        raise AssertionError(await env.condition("ConfigReady", LONG_NAME)) from None
    label = compute_pool.config_base_label(LONG_NAME)
    assert len(label) <= naming.LABEL_VALUE_MAX
    listed = await env.admin.list(CONFIGMAPS, env.ns, label_selector=f"{naming.CONFIG_BASE_LABEL}={label}")
    names = [cm["metadata"]["name"] for cm in listed["items"]]
    assert len(names) == 1  # the prune's selector finds the pool's ConfigMap by the fitted label
    assert names[0].startswith(f"{LONG_NAME}-config-")


class _HugeMessageSpec(NovaComputeSpec):
    @field_validator("node_selector")
    @classmethod
    def _refuse_verbosely(cls, value: dict[str, str]) -> dict[str, str]:
        if value.get("pool") == "verbose":
            raise ValueError("v" * HUGE)
        return value


class _HugeMessagePool(NovaCompute):
    spec: _HugeMessageSpec


async def test_a_condition_message_over_the_crd_limit_is_truncated_and_the_status_written(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reconciler, "NovaCompute", _HugeMessagePool)
    await env.nova()
    await env.pool(selector="verbose")

    async def refused() -> bool:
        c = await env.condition("ConfigReady")
        return c is not None and c["reason"] == "ConfigError"

    try:
        await env.until(refused)
    except TimeoutError:
        raise AssertionError((await env.cr()).get("status")) from None
    cond = await env.condition("ConfigReady")
    assert cond is not None
    assert len(cond["message"]) == CONDITION_MESSAGE_MAX
    assert cond["message"].endswith(" characters in all]")
    ready = await env.condition("Ready")
    assert ready is not None
    assert ready["status"] == "False"

    # The bound is the API server's: one character more is refused.
    cr = await env.cr()
    too_long = {"status": {"conditions": [{**cond, "message": "v" * (CONDITION_MESSAGE_MAX + 1)}]}}
    with pytest.raises(errors.Invalid) as refusal:
        await env.admin.patch(NOVACOMPUTES, cr["metadata"]["name"], too_long, env.ns, subresource="status")
    assert "32768" in str(refusal.value)
