"""The ConfigMap ``spec.policy.configMapRef`` names is held in the cache (``policy_reads``).

A namespace holds the Nova's policy ConfigMap and others no Nova names. Once the Nova is Ready the
policy ConfigMaps cache holds the named one whole and the others as references (no data), and a
converged pass sends no request at all. An edit of the named ConfigMap alone wakes the Nova and the
API Deployment mounts a policy ConfigMap with the new rule (with the Jobs held: no db-sync is needed
for it); the Nova then names another ConfigMap: the pass reads it with one GET, later passes from
the cache, and the first one is narrowed to a reference.
"""

from __future__ import annotations

import pytest
import yaml

from nova_operator.kube import Kube
from nova_operator.kube.resources import CONFIGMAPS, DEPLOYMENTS, NOVAS
from nova_operator.kube.types import Object
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.request import Request
from tests.integration.nova.inputs import (
    create_inputs,
    grown,
    is_ready,
    nova_body,
    requests_by_verb,
    settled,
)

from .conftest import Operator, Simulator, wait_for  # type: ignore[import-not-found]

pytestmark = pytest.mark.integration

CREATE = "os_compute_api:servers:create"
UNNAMED = 5


def config_map(name: str, text: str) -> Object:
    meta = {"name": name}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"policy.yaml": text}}


async def api_policy(admin: Kube, ns: str) -> dict[str, str]:
    """The policy file in the policy ConfigMap the API Deployment mounts."""
    api = await admin.get(DEPLOYMENTS, "nova", ns)
    volumes = api["spec"]["template"]["spec"]["volumes"]
    name = next(v for v in volumes if v["name"] == "policy")["configMap"]["name"]
    rules: dict[str, str] = yaml.safe_load((await admin.get(CONFIGMAPS, name, ns))["data"]["policy.yaml"])
    return rules


async def test_the_named_policy_config_map_is_cached_so_a_converged_pass_sends_no_request(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    for i in range(UNNAMED):
        await admin.create(CONFIGMAPS, config_map(f"unnamed-{i}", f'"{CREATE}": "role:r{i}"'), ns)
    await admin.create(CONFIGMAPS, config_map("policy-a", f'"{CREATE}": "role:admin"'), ns)
    await admin.create(CONFIGMAPS, config_map("policy-b", f'"{CREATE}": "role:member"'), ns)
    await create_inputs(admin, ns)
    body = nova_body()
    body["spec"]["policy"] = {"configMapRef": {"name": "policy-a"}}
    await admin.create(NOVAS, body, ns)
    await wait_for(lambda: admin.get(NOVAS, "nova", ns), is_ready, within=60)
    simulator.hold_jobs = True
    await settled(operator)

    cache: Cache = operator.controller.reconciler.referenced[CONFIGMAPS]  # type: ignore[attr-defined]
    assert not cache.withheld(Request(ns, "policy-a"))
    assert cache.get("policy-a", ns)["data"]["policy.yaml"] == f'"{CREATE}": "role:admin"'
    for name in (*(f"unnamed-{i}" for i in range(UNNAMED)), "policy-b"):
        assert cache.withheld(Request(ns, name)), name  # listed and watched, held without data
        assert "data" not in cache.get(name, ns), name
    assert await api_policy(admin, ns) == {CREATE: "role:admin"}

    before = requests_by_verb(operator.metrics)
    for _ in range(3):
        await operator.force_pass("nova")
    assert grown(before, requests_by_verb(operator.metrics)) == {}, "a converged pass sent requests"

    # An edit of the named ConfigMap alone wakes the Nova (no forced pass) and takes effect.
    await admin.patch(CONFIGMAPS, "policy-a", {"data": {"policy.yaml": f'"{CREATE}": "rule:admin_api"'}}, ns)
    await wait_for(lambda: api_policy(admin, ns), lambda rules: rules == {CREATE: "rule:admin_api"}, 30)
    await settled(operator)
    assert ("get", "configmaps") not in grown(before, requests_by_verb(operator.metrics))

    # The Nova names the other one: one GET, then the cache; the first is narrowed again.
    await admin.patch(NOVAS, "nova", {"spec": {"policy": {"configMapRef": {"name": "policy-b"}}}}, ns)
    await wait_for(lambda: api_policy(admin, ns), lambda rules: rules == {CREATE: "role:member"}, 30)
    await settled(operator)
    gets = grown(before, requests_by_verb(operator.metrics)).get(("get", "configmaps"), 0.0)
    assert gets == 1.0, f"the newly named ConfigMap was read {gets} times"
    assert not cache.withheld(Request(ns, "policy-b"))
    assert cache.withheld(Request(ns, "policy-a"))

    after = requests_by_verb(operator.metrics)
    await operator.force_pass("nova")
    assert grown(after, requests_by_verb(operator.metrics)) == {}, "a converged pass sent requests"
