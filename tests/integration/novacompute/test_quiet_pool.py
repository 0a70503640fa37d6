"""A pass over a converged pool sends the API server nothing (issue 15; issue 41, item 2).

What a converged pass needs (the pool, its Nova, the contract Secret, the DaemonSet, the pool's
ConfigMaps, and the Nodes once the optional Node informer has synced) comes from the informer
caches. Counted by the operator's Kube seam, which sees every request it sends.
"""

from __future__ import annotations

import pytest

from nova_operator.kube.resources import DAEMONSETS
from nova_operator.metrics import Metrics
from tests.integration.novacompute.inputs import ready

from .conftest import Env

pytestmark = pytest.mark.integration

Counts = dict[tuple[str, str], float]


def requests_by_verb(metrics: Metrics) -> Counts:
    """Every request the operator sent so far, by (verb, resource), whatever the answer."""
    return metrics.api_request_counts()


async def test_a_converged_pool_pass_sends_no_request(env: Env) -> None:
    await env.nova()
    n1 = await env.node("n1", pool="a", zone="az1")
    n2 = await env.node("n2", pool="a", zone="az2")
    await env.pool()
    await env.until(lambda: env.get(DAEMONSETS, "pool-nova-compute"))
    env.fake.add_compute(n1)
    env.fake.add_compute(n2)
    await env.daemonset_rolled_out(count=2)
    await env.until(lambda: ready(env))
    await env.settle(1.0)

    before, passes = requests_by_verb(env.metrics), env.step_count("Nodes")
    await env.settle(3.0)  # the pool keeps polling its services (the test's intervals are short)
    after, ran = requests_by_verb(env.metrics), env.step_count("Nodes") - passes
    grown = {k: v - before.get(k, 0.0) for k, v in after.items() if v != before.get(k, 0.0)}

    assert ran >= 2, "no pass ran while the pool sat converged"
    assert grown == {}, f"a converged pool pass sent requests: {grown}"
    assert await ready(env)
