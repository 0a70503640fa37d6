"""The HPA step (``HPAReady``, §7.6) on the real API server: the API's HorizontalPodAutoscaler while
``spec.autoscaling`` is set, owned by the Nova; a change of the block reaches it; without the block
it is deleted, and one that is not the Nova's is left alone."""

from __future__ import annotations

from typing import Any

from nova_operator.kube import Kube
from nova_operator.kube.errors import NotFound
from nova_operator.kube.resources import HPAS, NOVAS
from nova_operator.reconcilers.nova import hpa
from tests.integration.nova.passes import make_ctx, stored_nova
from tests.integration.nova.reasons_kit import reason
from tests.integration.nova.requests import Recorder

AUTOSCALING = {"minReplicas": 2, "maxReplicas": 4, "targetCPUUtilization": 70}


async def _hpa(admin: Kube, ns: str) -> Any:
    try:
        return await admin.get(HPAS, "nova", ns)
    except NotFound:
        return None


async def test_autoscaling_applies_the_apis_hpa_and_a_change_reaches_it(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await stored_nova(admin, namespace, autoscaling=AUTOSCALING)
    ctx = make_ctx(ours, nova)
    await hpa.reconcile_hpa(ctx)
    assert reason(ctx, "HPAReady") == ("True", "HPAReady", "HorizontalPodAutoscaler nova is applied")
    live = await _hpa(admin, namespace)
    assert live["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "nova"}
    assert (live["spec"]["minReplicas"], live["spec"]["maxReplicas"]) == (2, 4)
    (metric,) = live["spec"]["metrics"]
    assert metric["resource"]["name"] == "cpu"
    assert metric["resource"]["target"]["averageUtilization"] == 70
    owner = live["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Nova", nova["metadata"]["uid"], True)

    changed = {**AUTOSCALING, "maxReplicas": 6}
    nova = await admin.patch(NOVAS, "nova", {"spec": {"autoscaling": changed}}, namespace)
    await hpa.reconcile_hpa(make_ctx(ours, nova))
    assert (await _hpa(admin, namespace))["spec"]["maxReplicas"] == 6


async def test_without_autoscaling_the_novas_hpa_is_deleted_and_anothers_stays(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await stored_nova(admin, namespace, autoscaling=AUTOSCALING)
    await hpa.reconcile_hpa(make_ctx(ours, nova))
    nova = await admin.patch(NOVAS, "nova", {"spec": {"autoscaling": None}}, namespace)
    ctx = make_ctx(ours, nova)
    await hpa.reconcile_hpa(ctx)
    assert reason(ctx, "HPAReady") == ("True", "HPANotRequired", "spec.autoscaling is not set")
    assert await _hpa(admin, namespace) is None

    # an HPA of that name someone else made (no owner reference): the step neither adopts nor deletes it
    theirs = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "nova"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1,
            "maxReplicas": 2,
        },
    }
    await admin.create(HPAS, theirs, namespace)
    await hpa.reconcile_hpa(make_ctx(ours, nova))
    assert (await _hpa(admin, namespace))["spec"]["scaleTargetRef"]["name"] == "web"
