"""What the pod-level fields of issue 38 render on the Nova's pods: pull secrets and policy (item 2)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from nova_operator.models.nova import Nova
from nova_operator.renderers import compute_pool as cp

Render = Callable[[Nova], dict[str, Any]]
Load = Callable[[str], Nova]


def _with(nova: Nova, **image: Any) -> Nova:
    body = nova.model_dump(by_alias=True, exclude_none=True, mode="json")
    body["spec"]["image"].update(image)
    return Nova.model_validate(body)


def _pod_specs(objects: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(key, pod spec) of every object that holds a pod template."""
    for key, obj in objects.items():
        spec = obj.get("spec") or {}
        if "jobTemplate" in spec:
            yield key, spec["jobTemplate"]["spec"]["template"]["spec"]
        elif "template" in spec:
            yield key, spec["template"]["spec"]


def test_every_pod_of_the_nova_carries_its_pull_secrets_and_policy(
    render_all: Render, load_sample: Load
) -> None:
    nova = _with(
        load_sample("full"), pullSecrets=[{"name": "regcred"}, {"name": "mirror"}], pullPolicy="IfNotPresent"
    )
    pods = dict(_pod_specs(render_all(nova)))
    assert sorted(k.partition("/")[0] for k in pods) == ["CronJob"] + ["Deployment"] * 5 + ["Job"] * 4
    for key, pod in pods.items():
        assert pod["imagePullSecrets"] == [{"name": "regcred"}, {"name": "mirror"}], key
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            assert container["imagePullPolicy"] == "IfNotPresent", key


def test_without_the_fields_no_pod_of_the_nova_names_a_secret_or_a_policy(
    render_all: Render, load_sample: Load
) -> None:
    for sample in ("minimal", "full"):
        for key, pod in _pod_specs(render_all(load_sample(sample))):
            assert "imagePullSecrets" not in pod, key
            assert all("imagePullPolicy" not in c for c in pod["containers"]), key


def test_the_host_discovery_job_takes_the_novas_secrets_and_policy(load_sample: Load) -> None:
    nova = _with(load_sample("minimal"), pullSecrets=[{"name": "regcred"}], pullPolicy="Never")
    policy = cp.pull_policy(
        nova.spec.image.reference, policy=nova.spec.image.pull_policy, operator_default="Always"
    )
    job = cp.discover_hosts_job(
        nova, image=nova.spec.image.reference, config_map="nova-config-1", pull_policy=policy
    )
    pod = job["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["containers"][0]["imagePullPolicy"] == "Never"
    plain = cp.discover_hosts_job(
        load_sample("minimal"), image="ghcr.io/c5c3/nova:2025.2", config_map="c", pull_policy="Always"
    )
    assert "imagePullSecrets" not in plain["spec"]["template"]["spec"]
