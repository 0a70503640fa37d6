"""Each NovaCompute reason of novacompute-crd.md §14 no other test produced, by the step that owns it."""

from __future__ import annotations

from typing import Any

import pytest

from nova_operator import conditions
from nova_operator.reconcilers.compute.services import reconcile_services
from tests.unit.reconcilers.compute.fakes import (
    FailingKube,
    FakeCompute,
    make_pass,
    service,
)


def reason(p: Any, cond_type: str) -> tuple[str, str, str]:
    c = p.condition(cond_type)
    assert c is not None, cond_type
    return str(c["status"]), str(c["reason"]), str(c["message"])


# -- ServicesReady -----------------------------------------------------------------------------------


async def test_a_failed_pod_list_during_a_release_is_pod_list_error_and_raises() -> None:
    compute = FakeCompute(services={"n1": service("n1", status="disabled")})
    kube = FailingKube(fail_list=True)
    p, _ = make_pass([{"name": "n1", "phase": "Releasing"}], compute=compute, kube=kube)
    with pytest.raises(Exception, match="listing the pool's pods"):
        await reconcile_services(p)
    status, why, message = reason(p, conditions.SERVICES_READY)
    assert (status, why) == ("False", "PodListError")
    assert "forbidden" in message
    assert p.nodes == [{"name": "n1", "phase": "Releasing"}]  # the entry is kept unchanged
    assert "delete_service" not in compute.names()
