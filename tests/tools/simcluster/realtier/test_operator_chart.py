"""The chart values ``make run REAL_NODES=1`` and ``REAL_NODES=mixed`` install the operator with:
rendered by the chart itself (``helm template``), they put the built image on the real nodes with
the chart's own settings untouched, and the operator understands every flag they add."""

from __future__ import annotations

import shlex
from typing import Any

import pytest
import yaml
from realnode.dns import REAL_NODE_LABEL
from simcluster.platform.installtools import by_kind, helm_template
from simcluster.platform.operator import LEADER_GAUGE
from simcluster.realtier.operator_chart import chart_values, joined, leader_metrics, toleration
from simcluster.realtier.real_compute import DEDICATED

from nova_operator.cli import parse_settings

REF = "realnode.local/nova-operator:0123456789ab"
BRIDGE = "http://10.225.0.1:40123"


def _render(values: dict[str, Any], tmp_path: Any) -> dict[str, Any]:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    (deployment,) = by_kind(
        helm_template("nova-operator", "nova-system", "--values", str(path)), "Deployment"
    )
    return deployment


def test_the_values_set_the_image_the_nodes_and_the_flags_and_nothing_else(tmp_path: Any) -> None:
    values = chart_values(REF, BRIDGE, ["--workers=4"])
    assert set(values) == {"image", "nodeSelector", "tolerations", "novaApiUrl", "extraArgs"}
    pod = _render(values, tmp_path)["spec"]["template"]["spec"]
    defaults = _render({}, tmp_path)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    (default_container,) = defaults["containers"]
    assert container["image"] == REF
    assert container["imagePullPolicy"] == "IfNotPresent"  # imported, never pulled
    # on the real nodes only (the stand-in's nodes cannot run an image), past the pool's taint
    assert pod["nodeSelector"] == {REAL_NODE_LABEL: "true"}
    key, _, rest = DEDICATED.partition("=")
    assert pod["tolerations"] == [
        {"key": key, "operator": "Equal", "value": rest.split(":")[0], "effect": "NoSchedule"}
    ]
    # the chart's own: ServiceAccount, probes, security contexts, memory limit, replicas
    for field in ("livenessProbe", "readinessProbe", "securityContext", "resources", "volumeMounts"):
        assert container[field] == default_container[field], field
    assert pod["securityContext"] == defaults["securityContext"]
    assert pod["serviceAccountName"] == defaults["serviceAccountName"] == "nova-operator"
    assert container["resources"]["limits"]["memory"] == "512Mi"
    added = container["args"][len(default_container["args"]) :]
    assert container["args"][: len(default_container["args"])] == default_container["args"]
    assert added == [f"--nova-api-url={BRIDGE}", "--default-image-pull-policy=IfNotPresent", "--workers=4"]


def test_the_operator_understands_the_flags_and_the_callers_win(tmp_path: Any) -> None:
    values = chart_values(REF, BRIDGE, ["--default-image-pull-policy", "Always", "--log-level", "debug"])
    args = _render(values, tmp_path)["spec"]["template"]["spec"]["containers"][0]["args"]
    # $(POD_IP) is the kubelet's to expand: any address will do here
    settings = parse_settings([shlex.split(a.replace("$(POD_IP)", "10.0.0.9"))[0] for a in args])
    assert settings.default_image_pull_policy == "Always"
    assert settings.openstack.nova_api_url == BRIDGE
    assert settings.leader_election.enabled  # the chart's two replicas elect a leader
    assert settings.log.level == "debug"
    plain = chart_values(REF, BRIDGE)
    assert parse_settings(plain["extraArgs"]).default_image_pull_policy == "IfNotPresent"


def test_flags_and_their_values_become_one_item_each() -> None:
    assert joined(["--a", "1", "--b=2", "--c", "--d", "x=y"]) == ["--a=1", "--b=2", "--c", "--d=x=y"]
    with pytest.raises(ValueError, match="without its flag"):
        joined(["debug"])
    with pytest.raises(ValueError, match="without its flag"):
        joined(["--a=1", "2"])


def test_a_reference_without_a_tag_is_refused() -> None:
    with pytest.raises(ValueError, match="tag"):
        chart_values("localhost:5000/nova-operator", BRIDGE)
    with pytest.raises(ValueError, match="tag"):
        chart_values("nova-operator", BRIDGE)


def test_a_toleration_is_read_from_the_taint() -> None:
    assert toleration("a.b/c=d:NoExecute") == {
        "key": "a.b/c",
        "operator": "Equal",
        "value": "d",
        "effect": "NoExecute",
    }


@pytest.mark.parametrize(
    "flags", [["--leader-elect=false"], ["--no-leader-elect"], ["--leader-elect", "false"]]
)
def test_no_lease_asked_runs_one_replica_without_a_lease(tmp_path: Any, flags: list[str]) -> None:
    values = chart_values(REF, BRIDGE, ["--workers=2", *flags])
    deployment = _render(values, tmp_path)
    assert deployment["spec"]["replicas"] == 1  # two replicas without a Lease would both reconcile
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    settings = parse_settings([shlex.split(a.replace("$(POD_IP)", "10.0.0.9"))[0] for a in args])
    assert not settings.leader_election.enabled
    assert settings.queue.workers == 2
    # the last word wins, as on the command line
    again = chart_values(REF, BRIDGE, [*flags, "--leader-elect=true"])
    assert "leaderElection" not in again
    assert "replicaCount" not in again
    assert _render(again, tmp_path)["spec"]["replicas"] == 2


def test_in_the_all_real_tier_the_charts_defaults_place_the_pods_and_name_the_compute_api(
    tmp_path: Any,
) -> None:
    values = chart_values(REF, None, ["--workers=4"])
    assert set(values) == {"image", "extraArgs"}
    pod = _render(values, tmp_path)["spec"]["template"]["spec"]
    defaults = _render({}, tmp_path)["spec"]["template"]["spec"]
    # no pin to a kind of node and no toleration: the untainted control nodes take them, as anywhere
    for field in ("nodeSelector", "tolerations", "affinity"):
        assert pod.get(field) == defaults.get(field), field
    (container,) = pod["containers"]
    assert container["image"] == REF
    assert not any(arg.startswith("--nova-api-url") for arg in container["args"])
    assert container["args"][-2:] == ["--default-image-pull-policy=IfNotPresent", "--workers=4"]


class _MetricsKube:
    """Two operator pods behind the pod proxy, one of them leading; one more not running."""

    def __init__(self, leader: str | None) -> None:
        self.leader = leader
        self.asked: list[str] = []

    def get(self, path: str) -> dict[str, Any]:
        assert path.startswith("/api/v1/namespaces/nova-system/pods?labelSelector=")
        return {
            "items": [
                {"metadata": {"name": "op-a"}, "status": {"phase": "Running"}},
                {"metadata": {"name": "op-b"}, "status": {"phase": "Running"}},
                {"metadata": {"name": "op-c"}, "status": {"phase": "Pending"}},
            ]
        }

    def lines(self, path: str) -> list[str]:
        self.asked.append(path)
        pod = path.split("/pods/")[1].split(":")[0]
        status = 1 if pod == self.leader else 0
        return [f"{LEADER_GAUGE} {status}.0", f'nova_operator_pod{{name="{pod}"}} 1.0']


def test_the_operators_metrics_are_the_leading_pods_through_the_pod_proxy() -> None:
    kube = _MetricsKube("op-b")
    text = leader_metrics(kube)
    assert 'name="op-b"' in text
    assert kube.asked[-1] == "/api/v1/namespaces/nova-system/pods/op-b:8080/proxy/metrics"
    assert all("op-c" not in path for path in kube.asked)  # not running: not asked
    with pytest.raises(LookupError):
        leader_metrics(_MetricsKube(None))
