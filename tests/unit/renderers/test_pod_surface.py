"""What the pod-level fields of issue 38 render: pull settings (item 2), stops (item 4), probes (item 6)."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from pydantic import ValidationError

from nova_operator import catalog
from nova_operator.models.nova import Nova
from nova_operator.models.novacompute import NovaCompute
from nova_operator.naming import Component
from nova_operator.renderers import compute_pool as cp
from nova_operator.renderers import workload

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
    for key, pod in _pod_specs(render_all(load_sample("minimal"))):
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


DOCS = Path(__file__).resolve().parents[3] / "docs"


def test_the_stop_table_of_the_operations_page_says_what_each_catalog_gives() -> None:
    """Issue 38 item 4: the docs say what each release does, and the numbers are the catalogs'."""
    rows = re.findall(
        r"^\| (\d{4}\.[12]) \| (\d+) s [^|]*\| ([^|]+) \| (\d+) s \|$",
        (DOCS / "operations.md").read_text(),
        re.M,
    )
    assert [r[0] for r in rows] == list(catalog.supported_releases())
    for release, graceful, manager, grace in rows:
        options = catalog.load_catalog(release).sections["DEFAULT"]
        assert int(graceful) == options["graceful_shutdown_timeout"].default, release
        if "manager_shutdown_timeout" in options:
            assert manager.strip() == f"{options['manager_shutdown_timeout'].default} s", release
        else:
            assert manager.startswith("none"), release
        assert int(grace) == cp.termination_grace(_pool({}), release), release


def _pool(spec: dict[str, Any]) -> NovaCompute:
    body = {"novaRef": {"name": "nova"}, "nodeSelector": {"a": "b"}, **spec}
    return NovaCompute.model_validate({"metadata": {"name": "p", "namespace": "openstack"}, "spec": body})


def test_every_example_manifest_of_the_operations_page_is_a_valid_object() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", (DOCS / "operations.md").read_text(), re.S)
    kinds = {"Nova": Nova, "NovaCompute": NovaCompute}
    checked = 0
    for block in blocks:
        for body in yaml.safe_load_all(textwrap.dedent(block)):
            if isinstance(body, dict) and body.get("kind") in kinds:
                kinds[body["kind"]].model_validate(body)
                checked += 1
    assert checked >= 2


# --- item 6: probe timing and resources per role --------------------------------------------

ROLE_BLOCKS = {
    Component.API: "api",
    Component.METADATA: "metadata",
    Component.SCHEDULER: "scheduler",
    Component.CONDUCTOR: "conductor",
    Component.NOVNCPROXY: "consoleProxy",
}
INPUTS = workload.WorkloadInputs(config_map="nova-config-1")


def _with_block(nova: Nova, block: str, **deployment: Any) -> Nova:
    body = nova.model_dump(by_alias=True, exclude_none=True, mode="json")
    body["spec"].setdefault(block, {}).setdefault("deployment", {}).update(deployment)
    return Nova.model_validate(body)


def _container(nova: Nova, role: Component) -> dict[str, Any]:
    container: dict[str, Any] = workload.deployment(nova, role, INPUTS)["spec"]["template"]["spec"][
        "containers"
    ][0]
    return container


def test_unset_probe_timing_renders_the_operators_probes(load_sample: Load) -> None:
    nova = load_sample("minimal")
    for role, block in ROLE_BLOCKS.items():
        assert _container(_with_block(nova, block, probes={}), role) == _container(nova, role), role


def test_an_api_role_takes_each_probes_timing_field_by_field_and_keeps_its_handler(load_sample: Load) -> None:
    probes = {
        "startup": {"failureThreshold": 60},
        "liveness": {"periodSeconds": 30, "timeoutSeconds": 15},
        "readiness": {"initialDelaySeconds": 0, "successThreshold": 2},
    }
    for role, block in ((Component.API, "api"), (Component.METADATA, "metadata")):
        before = _container(load_sample("minimal"), role)
        after = _container(_with_block(load_sample("minimal"), block, probes=probes), role)
        assert after["startupProbe"] == {**before["startupProbe"], "failureThreshold": 60}
        assert after["livenessProbe"] == {
            **before["livenessProbe"],
            "periodSeconds": 30,
            "timeoutSeconds": 15,
        }
        assert after["readinessProbe"] == {
            **before["readinessProbe"],
            "initialDelaySeconds": 0,
            "successThreshold": 2,
        }
        assert after["readinessProbe"]["httpGet"] == before["readinessProbe"]["httpGet"]


def test_a_readiness_only_role_takes_its_readiness_timing(load_sample: Load) -> None:
    for role, block in ROLE_BLOCKS.items():
        if role in (Component.API, Component.METADATA):
            continue
        nova = _with_block(
            load_sample("minimal"), block, probes={"readiness": {"periodSeconds": 10, "failureThreshold": 3}}
        )
        probe = _container(nova, role)["readinessProbe"]
        assert probe["periodSeconds"] == 10, role
        assert probe["failureThreshold"] == 3, role
        assert ("exec" in probe) == (role in (Component.SCHEDULER, Component.CONDUCTOR)), role
        assert "livenessProbe" not in _container(nova, role)


def test_a_role_without_a_liveness_probe_refuses_its_timing(load_sample: Load) -> None:
    for block in ("scheduler", "conductor", "consoleProxy"):
        with pytest.raises(ValidationError, match="liveness"):
            _with_block(load_sample("minimal"), block, probes={"liveness": {"periodSeconds": 10}})


def test_each_role_takes_its_own_resources(load_sample: Load) -> None:
    wanted = {"limits": {"memory": "1Gi"}, "requests": {"cpu": "250m", "memory": "1Gi"}}
    for role, block in ROLE_BLOCKS.items():
        nova = _with_block(load_sample("minimal"), block, resources=wanted)
        assert _container(nova, role)["resources"] == wanted, role
        others = [r for r in ROLE_BLOCKS if r is not role]
        assert all(_container(nova, r)["resources"] != wanted for r in others), role


def test_overridden_deployments_pass_kubernetes_validate(load_sample: Load) -> None:
    nova = load_sample("full")
    for block in ("api", "metadata"):
        nova = _with_block(
            nova, block, probes={"liveness": {"periodSeconds": 30}, "readiness": {"successThreshold": 2}}
        )
    for block in ("scheduler", "conductor", "consoleProxy"):
        nova = _with_block(nova, block, probes={"readiness": {"timeoutSeconds": 9}})
    for role in ROLE_BLOCKS:
        kubernetes_validate.validate(workload.deployment(nova, role, INPUTS), "1.37", strict=True)
