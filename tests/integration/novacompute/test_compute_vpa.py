"""The ComputeVPA step over a pool stored on the real API server (novacompute-crd.md §10)."""

from __future__ import annotations

import pytest

from nova_operator.kube.resources import NOVACOMPUTES
from nova_operator.reconcilers.compute.compute_vpa import reconcile_compute_vpa
from tests.integration.novacompute.passes import Stage

pytestmark = pytest.mark.integration


async def test_vpa_is_not_required_since_no_pool_can_opt_in(stage: Stage) -> None:
    cr = await stage.pool()
    cr = await stage.admin.patch(NOVACOMPUTES, "pool", {"spec": {"nodeSelector": {"pool": "b"}}}, stage.ns)
    p, _ = stage.pass_over(cr)
    assert (await reconcile_compute_vpa(p)).requeue_after is None
    c = p.condition("VPAReady")
    assert c is not None
    assert (c["status"], c["reason"]) == ("True", "VPANotRequired")
    assert c["observedGeneration"] == cr["metadata"]["generation"] == 2  # the server's, after one edit
    assert stage.kube.sent == []  # nothing to read or write
