"""The DaemonSet step on the real API server: what the applied DaemonSet carries (grace period, pull
policy), its rollout (and a pod of it that cannot start), a refusal and a DaemonSet of another owner
(novacompute-crd.md §9). Every
DaemonSet is written by server-side apply to kube-apiserver and read back from it."""

from __future__ import annotations

from typing import Any

import pytest

from nova_operator import cli, conditions, controllers
from nova_operator.kube import errors
from nova_operator.kube.resources import DAEMONSETS, NOVAS, PODS
from nova_operator.kube.types import Object
from nova_operator.models.novacompute import NovaComputeImageSpec
from nova_operator.reconcilers.compute.context import ComputePass
from nova_operator.reconcilers.compute.daemon_set import reconcile_daemon_set
from nova_operator.renderers import compute_pool
from nova_operator.runtime.cache import Cache
from tests.integration.novacompute.passes import CONTRACT, Stage
from tests.integration.stuck_pod import SECRET, owner_of, stuck_pod

pytestmark = pytest.mark.integration
DS = compute_pool.daemonset_name("pool")


async def daemonset_pass(stage: Stage, *, installed: str = "2025.2", cr: Object | None = None) -> ComputePass:
    """A pass at the DaemonSet step: NovaRef and PoolConfig resolved for a pool holding one Active node."""
    if cr is None:
        nova = await stage.nova(release=installed)
        cr = await stage.pool(nodes=[{"name": "n1", "phase": "Active"}])
    else:
        nova = await stage.admin.get(NOVAS, "nova", stage.ns)
    p, _ = stage.pass_over(cr, nova=nova)
    p.image, p.config_map = "ghcr.io/c5c3/nova:2025.2", "pool-config-abc"
    p.contract_secret, p.contract_hash = CONTRACT, "f" * 64
    return p


async def live(stage: Stage) -> Object:
    return await stage.admin.get(DAEMONSETS, DS, stage.ns)


def pod_spec(ds: Object) -> Any:
    return ds["spec"]["template"]["spec"]


def reason(p: ComputePass) -> tuple[str, str, str]:
    c = p.condition(conditions.DAEMONSET_READY)
    assert c is not None
    return str(c["status"]), str(c["reason"]), str(c["message"])


@pytest.mark.parametrize(("installed", "grace"), [("2025.2", 80), ("2026.1", 200), ("2026.2", 200)])
async def test_the_grace_period_follows_the_novas_installed_release(
    stage: Stage, installed: str, grace: int
) -> None:
    """Issue 38 item 4: nova-compute stops within its installed release's own bound."""
    p = await daemonset_pass(stage, installed=installed)
    await reconcile_daemon_set(p)
    assert pod_spec(await live(stage))["terminationGracePeriodSeconds"] == grace


def pull_policies(ds: Object) -> set[str]:
    pod = pod_spec(ds)
    return {c["imagePullPolicy"] for c in [*pod.get("initContainers", []), *pod["containers"]]}


@pytest.mark.parametrize(
    ("argv", "image", "want"),
    [
        ([], "ghcr.io/c5c3/nova:2025.2", "Always"),  # the derived rule: a tag is pulled every time
        ([], "ghcr.io/c5c3/nova@sha256:" + "a" * 64, "IfNotPresent"),  # a digest pins the content
        (["--default-image-pull-policy=IfNotPresent"], "ghcr.io/c5c3/nova:2025.2", "IfNotPresent"),
        (["--default-image-pull-policy", "Never"], "ghcr.io/c5c3/nova@sha256:" + "a" * 64, "Never"),
    ],
)
async def test_the_flag_sets_the_pull_policy_of_the_pools_containers(
    stage: Stage, argv: list[str], image: str, want: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--default-image-pull-policy reaches every container of the pool's DaemonSet (§9.7)."""
    monkeypatch.delenv("NOVA_OPERATOR_DEFAULT_IMAGE_PULL_POLICY", raising=False)
    p = await daemonset_pass(stage)
    p.settings = controllers.compute_settings(cli.parse_settings(argv))  # what the operator runs with
    p.image = image
    await reconcile_daemon_set(p)
    (applied,) = stage.kube.applied
    assert pull_policies(applied) == {want}
    assert pull_policies(await live(stage)) == {want}


async def test_the_pools_own_pull_policy_beats_the_flag_and_its_secrets_reach_the_pod(
    stage: Stage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38 item 2: spec.image.pullPolicy > --default-image-pull-policy > the derived rule."""
    monkeypatch.delenv("NOVA_OPERATOR_DEFAULT_IMAGE_PULL_POLICY", raising=False)
    image = {"pullPolicy": "IfNotPresent", "pullSecrets": [{"name": "reg"}]}
    await stage.nova()
    p = await daemonset_pass(stage, cr=await stage.pool(image=image))
    assert p.pool.spec.image == NovaComputeImageSpec.model_validate(image)
    p.settings = controllers.compute_settings(cli.parse_settings(["--default-image-pull-policy=Always"]))
    await reconcile_daemon_set(p)
    ds = await live(stage)
    assert pull_policies(ds) == {"IfNotPresent"}
    assert pod_spec(ds)["imagePullSecrets"] == [{"name": "reg"}]


async def test_a_rollout_under_way_is_daemonset_progressing_and_not_a_wait(stage: Stage) -> None:
    p = await daemonset_pass(stage)
    assert (await reconcile_daemon_set(p)).requeue_after is None
    assert reason(p)[:2] == ("False", "DaemonSetProgressing")  # not observed yet
    ds = await live(stage)
    rollout = {"desiredNumberScheduled": 3, "updatedNumberScheduled": 3, "numberReady": 1}
    rollout |= {"currentNumberScheduled": 3, "numberMisscheduled": 0}
    await stage.status(DAEMONSETS, DS, {"observedGeneration": ds["metadata"]["generation"], **rollout})
    p = await daemonset_pass(stage, cr=p.cr)
    assert (await reconcile_daemon_set(p)).requeue_after is None
    status, why, message = reason(p)
    assert (status, why) == ("False", "DaemonSetProgressing")
    assert "1 of 3" in message
    assert [b["metadata"]["name"] for b in stage.kube.applied] == [DS]  # the second pass found it carried
    assert (p.status["desiredNumberScheduled"], p.status["numberReady"]) == (3, 1)


async def test_a_refused_daemonset_is_daemonset_error_and_raises(stage: Stage) -> None:
    p = await daemonset_pass(stage)
    p.image = ""  # kube-apiserver refuses a container without an image
    with pytest.raises(errors.KubeError) as refused:
        await reconcile_daemon_set(p)
    assert refused.value.status == 422
    status, why, message = reason(p)
    assert (status, why) == ("False", "DaemonSetError")
    assert "is invalid" in message


async def test_a_daemonset_of_another_owner_is_child_owned_by_another_and_left_alone(stage: Stage) -> None:
    """Issue 26: the pool's DaemonSet name held by someone else is neither applied over nor adopted."""
    labels = {"app": "mine"}
    theirs = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": DS, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }
    await stage.put(DAEMONSETS, theirs)
    p = await daemonset_pass(stage)
    assert (await reconcile_daemon_set(p)).requeue_after == 60.0
    status, why, message = reason(p)
    assert (status, why) == ("False", "ChildOwnedByAnother")
    assert message.startswith(f"DaemonSet {stage.ns}/{DS} exists and is not this NovaCompute's")
    assert stage.kube.applied == []
    assert (await live(stage))["metadata"]["labels"] == labels  # untouched
    # the pool's own orphan (its labels, no controller) is adopted: one the pool wrote and lost its
    # owner reference (a DaemonSet's selector is immutable, so only the pool's own can be taken over)
    await stage.admin.delete(DAEMONSETS, DS, stage.ns)
    await reconcile_daemon_set(await daemonset_pass(stage, cr=p.cr))
    await stage.admin.patch(DAEMONSETS, DS, {"metadata": {"ownerReferences": None}}, stage.ns)
    assert "ownerReferences" not in (await live(stage))["metadata"]
    await reconcile_daemon_set(await daemonset_pass(stage, cr=p.cr))
    assert [r["uid"] for r in (await live(stage))["metadata"]["ownerReferences"]] == [p.cr["metadata"]["uid"]]


async def test_a_pool_pod_that_cannot_start_is_named_while_the_rollout_waits(stage: Stage) -> None:
    """Issue 37 item 5: DaemonSetProgressing names the pool's pod the kubelet gave up on, not another's."""
    p = await daemonset_pass(stage)
    await reconcile_daemon_set(p)
    ds = await live(stage)
    labels = ds["spec"]["template"]["metadata"]["labels"]
    await stuck_pod(
        stage.admin,
        stage.ns,
        f"{DS}-7kq2w",
        labels=labels,
        owner=owner_of(ds),
        reason="CrashLoopBackOff",
        image="ghcr.io/c5c3/nova:2025.2",
    )
    other = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": DS, "uid": "an-earlier-daemonset"}
    await stuck_pod(stage.admin, stage.ns, f"{DS}-0aaaa", labels=labels, owner=other, reason="ErrImagePull")
    pods = Cache(str(PODS))
    for obj in (await stage.admin.list(PODS, stage.ns))["items"]:
        pods.upsert(obj)
    p = await daemonset_pass(stage, cr=p.cr)
    p.listed = lambda ref, ns, selector: pods.list(ns, selector) if ref == PODS else None
    assert (await reconcile_daemon_set(p)).requeue_after is None
    status, why, message = reason(p)
    assert (status, why) == ("False", "DaemonSetProgressing")
    assert message == (
        "Waiting for the nova-compute DaemonSet: 0 of 0 nodes run a ready pod: "
        f"pod {DS}-7kq2w cannot start: CrashLoopBackOff (image ghcr.io/c5c3/nova:2025.2)"
    )
    assert SECRET not in message
