"""--default-image-pull-policy reaches every container of the pool's DaemonSet (novacompute spec §9.7)."""

from __future__ import annotations

from typing import Any

import pytest

from nova_operator import cli, controllers
from nova_operator.reconcilers.compute.daemon_set import reconcile_daemon_set
from tests.unit.reconcilers.compute.fakes import FailingKube, daemonset_pass


def pull_policies(daemonset: dict[str, Any]) -> set[str]:
    pod = daemonset["spec"]["template"]["spec"]
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
    argv: list[str], image: str, want: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NOVA_OPERATOR_DEFAULT_IMAGE_PULL_POLICY", raising=False)
    kube = FailingKube()
    p = daemonset_pass(kube)
    p.settings = controllers.compute_settings(cli.parse_settings(argv))  # what the operator runs with
    p.image = image
    await reconcile_daemon_set(p)
    (applied,) = kube.applied
    assert pull_policies(applied) == {want}


async def test_the_pools_own_pull_policy_beats_the_flag_and_its_secrets_reach_the_pod(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 38 item 2: spec.image.pullPolicy > --default-image-pull-policy > the derived rule."""
    from nova_operator.models.novacompute import NovaComputeImageSpec

    monkeypatch.delenv("NOVA_OPERATOR_DEFAULT_IMAGE_PULL_POLICY", raising=False)
    kube = FailingKube()
    p = daemonset_pass(kube)
    p.settings = controllers.compute_settings(cli.parse_settings(["--default-image-pull-policy=Always"]))
    image = NovaComputeImageSpec.model_validate(
        {"pullPolicy": "IfNotPresent", "pullSecrets": [{"name": "reg"}]}
    )
    p.pool = p.pool.model_copy(update={"spec": p.pool.spec.model_copy(update={"image": image})})
    await reconcile_daemon_set(p)
    (applied,) = kube.applied
    assert pull_policies(applied) == {"IfNotPresent"}
    assert applied["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "reg"}]
