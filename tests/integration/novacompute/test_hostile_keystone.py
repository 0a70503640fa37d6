"""Two pools whose Keystone trickles its answer do not stop a third pool (issue 26, item 1).

Both workers of the NovaCompute controller take the two slow pools first. A Keystone that sends
one header byte every 0.5 s never trips a per-read timeout; only a total deadline frees the
workers. With it, each slow pass ends after the 2 s request deadline of this tier with
``ComputeAPIError``, and the third pool, whose Keystone answers, is reconciled in between.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from simcluster.hazards.hostile import HeaderTrickle

from .conftest import Env

pytestmark = pytest.mark.integration


@pytest.fixture
async def slow_keystone() -> AsyncIterator[HeaderTrickle]:
    server = await HeaderTrickle().start()
    try:
        yield server
    finally:
        await server.stop()


async def test_pools_whose_keystone_trickles_do_not_starve_another_pool(
    env: Env, slow_keystone: HeaderTrickle
) -> None:
    await env.nova("slow-a", keystone_url=slow_keystone.url)
    await env.nova("slow-b", keystone_url=slow_keystone.url)
    await env.nova()
    await env.pool("slow-a", selector="a", nova="slow-a")
    await env.pool("slow-b", selector="b", nova="slow-b")

    async def both_workers_held() -> bool:
        return slow_keystone.connections >= 2

    await env.until(both_workers_held)
    await env.pool("good", selector="c")

    async def good_aggregates() -> bool:
        cond = await env.condition("AggregatesReady", "good")
        return cond is not None and cond["reason"] == "AggregatesEnsured"

    await env.until(good_aggregates)
    assert env.fake.calls("POST", "/v3/auth/tokens")  # the good pool's Keystone was asked

    for pool in ("slow-a", "slow-b"):
        cond = await env.until(lambda pool=pool: env.condition("AggregatesReady", pool))
        assert (cond["status"], cond["reason"]) == ("False", "ComputeAPIError")
        assert cond["message"] == "POST /v3/auth/tokens: timed out after 2 s (no complete answer)"

    # the operator hung up; it did not wait for ever. The server notices only when a byte it writes
    # after the close is refused (one every TRICKLE_PERIOD), a second or so after the condition.
    async def hung_up() -> bool:
        return slow_keystone.closed_by_client >= 2

    await env.until(hung_up, within=10.0)
