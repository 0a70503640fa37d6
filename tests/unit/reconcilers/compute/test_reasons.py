"""Each NovaCompute reason of novacompute-crd.md §14 no other test produced, by the step that owns it."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from nova_operator import conditions
from nova_operator.kube import errors
from nova_operator.kube.types import Object
from nova_operator.reconcilers.compute.daemon_set import reconcile_daemon_set
from nova_operator.reconcilers.compute.nova_ref import reconcile_nova_ref
from nova_operator.reconcilers.compute.pool_config import reconcile_pool_config
from nova_operator.reconcilers.compute.services import reconcile_services
from nova_operator.renderers import compute_pool
from tests.unit.reconcilers.compute.fakes import (
    FailingKube,
    FakeCompute,
    FakeKube,
    daemonset_pass,
    make_pass,
    nova,
    service,
)


def reason(p: Any, cond_type: str) -> tuple[str, str, str]:
    c = p.condition(cond_type)
    assert c is not None, cond_type
    return str(c["status"]), str(c["reason"]), str(c["message"])


# -- NovaReady ---------------------------------------------------------------------------------------


async def test_a_failed_read_of_the_nova_is_nova_error_and_raises() -> None:
    p, _ = make_pass([], compute=FakeCompute(), kube=FailingKube(fail_get="novas"))
    with pytest.raises(errors.KubeError):
        await reconcile_nova_ref(p)
    status, why, message = reason(p, conditions.NOVA_REF_READY)
    assert (status, why) == ("False", "NovaError")
    assert message.startswith("reading Nova ns/nova: ")


async def test_a_nova_that_does_not_parse_is_nova_error_unless_only_a_step_of_its_own_is_concerned() -> None:
    broken = nova()
    broken["spec"]["dbArchive"] = {"schedule": "every night"}  # a rule only the model checks
    broken["status"] = {
        "installedRelease": "2025.2",
        "computeConfigSecretRef": {"name": "nova-compute-config"},
    }
    data = {"password": base64.b64encode(b"pw").decode()}
    objects = {("novas", "nova"): broken, ("secrets", "nova-service-user"): {"data": data}}
    p, _ = make_pass([], compute=FakeCompute(), kube=FakeKube(objects=objects))
    assert (await reconcile_nova_ref(p)).requeue_after is None  # the Nova's archive is not the pool's
    assert reason(p, conditions.NOVA_REF_READY)[0] == "True"
    broken["spec"]["openStackRelease"] = "someday"  # no step consumes it alone: the Nova does not parse
    p, _ = make_pass([], compute=FakeCompute(), kube=FakeKube(objects=objects))
    with pytest.raises(ValueError):  # noqa: PT011 - pydantic's ValidationError
        await reconcile_nova_ref(p)
    status, why, message = reason(p, conditions.NOVA_REF_READY)
    assert (status, why) == ("False", "NovaError")
    assert "does not parse" in message


# -- ConfigReady -------------------------------------------------------------------------------------


def contract(**data: str) -> Object:
    return {
        "metadata": {"name": "nova-compute-config"},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


@pytest.mark.parametrize(
    ("objects", "want", "fragment"),
    [
        ({}, "WaitingForComputeConfig", "does not exist"),
        (
            {
                ("secrets", "nova-compute-config"): contract(
                    **{"nova-compute.conf": "[DEFAULT]\n", "transport_url": "u"}
                )
            },
            "ComputeConfigIncomplete",
            "lacks password",
        ),
    ],
)
async def test_a_missing_or_incomplete_contract_waits_15s(
    objects: dict[tuple[str, str], Object], want: str, fragment: str
) -> None:
    p, _ = make_pass([], compute=FakeCompute(), kube=FakeKube(objects=objects))
    p.contract_secret = "nova-compute-config"
    assert (await reconcile_pool_config(p)).requeue_after == 15
    status, why, message = reason(p, conditions.CONFIG_READY)
    assert (status, why) == ("False", want)
    assert fragment in message
    assert p.config_map == ""


# -- DaemonSetReady ----------------------------------------------------------------------------------


async def test_a_rollout_under_way_is_daemonset_progressing_and_not_a_wait() -> None:
    kube = FailingKube()
    kube.answer_status = {
        "observedGeneration": 2,
        "desiredNumberScheduled": 3,
        "updatedNumberScheduled": 3,
        "numberReady": 1,
    }
    p = daemonset_pass(kube)
    assert (await reconcile_daemon_set(p)).requeue_after is None
    status, why, message = reason(p, conditions.DAEMONSET_READY)
    assert (status, why) == ("False", "DaemonSetProgressing")
    assert "1 of 3" in message
    assert [b["metadata"]["name"] for b in kube.applied] == [compute_pool.daemonset_name("pool")]
    assert (p.status["desiredNumberScheduled"], p.status["numberReady"]) == (3, 1)


async def test_a_refused_daemonset_is_daemonset_error_and_raises() -> None:
    kube = FailingKube()
    kube.apply_error = errors.KubeError("DaemonSet.apps is invalid: spec.template: too long", status=422)
    p = daemonset_pass(kube)
    with pytest.raises(errors.KubeError):
        await reconcile_daemon_set(p)
    status, why, message = reason(p, conditions.DAEMONSET_READY)
    assert (status, why) == ("False", "DaemonSetError")
    assert "is invalid" in message


async def test_a_daemonset_of_another_owner_is_child_owned_by_another_and_left_alone() -> None:
    """Issue 26: the pool's DaemonSet name held by someone else is neither applied over nor adopted."""
    theirs = {"metadata": {"name": "pool-nova-compute", "namespace": "ns", "labels": {"app": "mine"}}}
    kube = FailingKube(objects={("daemonsets", "pool-nova-compute"): theirs})
    p = daemonset_pass(kube)
    assert (await reconcile_daemon_set(p)).requeue_after == 60.0
    status, why, message = reason(p, conditions.DAEMONSET_READY)
    assert (status, why) == ("False", "ChildOwnedByAnother")
    assert message.startswith("DaemonSet ns/pool-nova-compute exists and is not this NovaCompute's")
    assert kube.applied == []
    # the pool's own orphan (its labels, no controller) is adopted
    labels = compute_pool.labels("pool")
    orphan = {"metadata": {"name": "pool-nova-compute", "namespace": "ns", "labels": labels}}
    kube = FailingKube(objects={("daemonsets", "pool-nova-compute"): orphan})
    p = daemonset_pass(kube)
    await reconcile_daemon_set(p)
    assert [b["metadata"]["ownerReferences"][0]["uid"] for b in kube.applied] == ["u1"]


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
