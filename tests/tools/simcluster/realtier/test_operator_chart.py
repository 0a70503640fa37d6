"""The chart values ``make run`` and the real-Nova tier install the operator with: rendered by the
chart itself (``helm template``), they put the built image on the real nodes with the chart's own
settings untouched, and the operator understands every flag they add."""

from __future__ import annotations

import shlex
from typing import Any

import pytest
import yaml
from simcluster.platform.installtools import by_kind, helm_template
from simcluster.platform.operator import LEADER_GAUGE
from simcluster.realtier.operator_chart import chart_values, joined, leader_metrics

from nova_operator.cli import parse_settings

REF = "realnode.local/nova-operator:0123456789ab"


def _render(values: dict[str, Any], tmp_path: Any) -> dict[str, Any]:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    (deployment,) = by_kind(
        helm_template("nova-operator", "nova-system", "--values", str(path)), "Deployment"
    )
    return deployment


def test_the_values_set_the_image_and_the_flags_and_nothing_else(tmp_path: Any) -> None:
    values = chart_values(REF, ["--workers=4"])
    assert set(values) == {"image", "extraArgs"}
    pod = _render(values, tmp_path)["spec"]["template"]["spec"]
    defaults = _render({}, tmp_path)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    (default_container,) = defaults["containers"]
    assert container["image"] == REF
    assert container["imagePullPolicy"] == "IfNotPresent"  # imported, never pulled
    # the chart's own: placement, ServiceAccount, probes, security contexts, memory limit, replicas
    for field in ("nodeSelector", "tolerations", "affinity"):
        assert pod.get(field) == defaults.get(field), field
    for field in ("livenessProbe", "readinessProbe", "securityContext", "resources", "volumeMounts"):
        assert container[field] == default_container[field], field
    assert pod["securityContext"] == defaults["securityContext"]
    assert pod["serviceAccountName"] == defaults["serviceAccountName"] == "nova-operator"
    assert container["resources"]["limits"]["memory"] == "512Mi"
    added = container["args"][len(default_container["args"]) :]
    assert container["args"][: len(default_container["args"])] == default_container["args"]
    # the compute API by its Service's name, as the operator's default: no --nova-api-url
    assert added == ["--default-image-pull-policy=IfNotPresent", "--workers=4"]


def test_the_operator_understands_the_flags_and_the_callers_win(tmp_path: Any) -> None:
    values = chart_values(REF, ["--default-image-pull-policy", "Always", "--log-level", "debug"])
    args = _render(values, tmp_path)["spec"]["template"]["spec"]["containers"][0]["args"]
    # $(POD_IP) is the kubelet's to expand: any address will do here
    settings = parse_settings([shlex.split(a.replace("$(POD_IP)", "10.0.0.9"))[0] for a in args])
    assert settings.default_image_pull_policy == "Always"
    assert settings.leader_election.enabled  # the chart's two replicas elect a leader
    assert settings.log.level == "debug"
    plain = chart_values(REF)
    assert parse_settings(plain["extraArgs"]).default_image_pull_policy == "IfNotPresent"


def test_flags_and_their_values_become_one_item_each() -> None:
    assert joined(["--a", "1", "--b=2", "--c", "--d", "x=y"]) == ["--a=1", "--b=2", "--c", "--d=x=y"]
    with pytest.raises(ValueError, match="without its flag"):
        joined(["debug"])
    with pytest.raises(ValueError, match="without its flag"):
        joined(["--a=1", "2"])


def test_a_reference_without_a_tag_is_refused() -> None:
    with pytest.raises(ValueError, match="tag"):
        chart_values("localhost:5000/nova-operator")
    with pytest.raises(ValueError, match="tag"):
        chart_values("nova-operator")


@pytest.mark.parametrize(
    "flags", [["--leader-elect=false"], ["--no-leader-elect"], ["--leader-elect", "false"]]
)
def test_no_lease_asked_runs_one_replica_without_a_lease(tmp_path: Any, flags: list[str]) -> None:
    values = chart_values(REF, ["--workers=2", *flags])
    deployment = _render(values, tmp_path)
    assert deployment["spec"]["replicas"] == 1  # two replicas without a Lease would both reconcile
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    settings = parse_settings([shlex.split(a.replace("$(POD_IP)", "10.0.0.9"))[0] for a in args])
    assert not settings.leader_election.enabled
    assert settings.queue.workers == 2
    # the last word wins, as on the command line
    again = chart_values(REF, [*flags, "--leader-elect=true"])
    assert "leaderElection" not in again
    assert "replicaCount" not in again
    assert _render(again, tmp_path)["spec"]["replicas"] == 2


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
