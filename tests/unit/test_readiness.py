from __future__ import annotations

from typing import Any

import pytest

from nova_operator.decisions import readiness as r


def deployment(
    *,
    replicas: int | None = 2,
    gen: int = 2,
    observed: int = 2,
    ready: int = 2,
    updated: int = 2,
    total: int = 2,
    available: str = "True",
    image: str = "img:1",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "metadata": {"generation": gen},
        "spec": spec,
        "status": {
            "observedGeneration": observed,
            "readyReplicas": ready,
            "updatedReplicas": updated,
            "replicas": total,
            "conditions": [{"type": "Available", "status": available}],
        },
    }


def test_available_is_surge_tolerant_but_rolled_out_is_not() -> None:
    surging = deployment(ready=2, updated=1, total=3)
    assert r.deployment_available(surging)
    assert not r.deployment_rolled_out(surging)
    assert r.deployment_rolled_out(deployment())


@pytest.mark.parametrize(
    "kwargs",
    [{"observed": 1}, {"ready": 1}, {"available": "False"}],
    ids=["stale-generation", "too-few-ready", "not-available"],
)
def test_not_available(kwargs: dict[str, Any]) -> None:
    assert not r.deployment_available(deployment(**kwargs))


def test_unset_replicas_count_as_one() -> None:
    d = deployment(replicas=None, ready=1, updated=1, total=1)
    assert r.desired_replicas(d) == 1
    assert r.deployment_available(d)
    assert r.deployment_rolled_out(d)


def test_first_container_image() -> None:
    assert r.first_container_image(deployment(image="nova:2026.2")) == "nova:2026.2"
    assert r.first_container_image({}) == ""


def _job(*conds: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "metadata": {"creationTimestamp": "2026-11-29T10:00:00Z"},
        "status": {"conditions": [{"type": t, "status": s, "lastTransitionTime": ts} for t, s, ts in conds]},
    }


def test_job_states_and_failed_wins() -> None:
    assert r.job_state(_job()) is r.JobState.RUNNING
    assert r.job_state(_job(("SuccessCriteriaMet", "True", "x"))) is r.JobState.RUNNING
    assert r.job_state(_job(("Complete", "True", "2026-11-29T10:01:00Z"))) is r.JobState.COMPLETE
    both = _job(("Complete", "True", "2026-11-29T10:01:00Z"), ("Failed", "True", "2026-11-29T10:02:00Z"))
    assert r.job_state(both) is r.JobState.FAILED
    assert r.job_duration_seconds(both) == 120.0
    assert r.job_duration_seconds(_job()) is None
    skewed = _job(("Complete", "True", "2026-11-29T09:59:00Z"))
    assert r.job_duration_seconds(skewed) == 0.0


def test_route_accepted_needs_a_current_accepting_parent() -> None:
    def route(status: str, observed: int) -> dict[str, Any]:
        cond = {"type": "Accepted", "status": status, "observedGeneration": observed}
        return {"metadata": {"generation": 2}, "status": {"parents": [{"conditions": [cond]}]}}

    assert r.route_accepted(route("True", 2))
    assert not r.route_accepted(route("True", 1))
    assert not r.route_accepted(route("False", 2))
    assert not r.route_accepted({"metadata": {"generation": 1}})


def test_custom_resource_ready() -> None:
    assert r.custom_resource_ready({"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    assert not r.custom_resource_ready({"status": {}})


def _with_status(base: dict[str, Any], **status: Any) -> dict[str, Any]:
    return {**base, "status": {**base["status"], **status}}


def test_deployment_view_ignores_what_kcm_rewrites_but_readiness_does_not_read() -> None:
    base = deployment(ready=1, updated=2, total=2, available="False")
    noise = _with_status(
        base,
        availableReplicas=1,
        unavailableReplicas=1,
        conditions=[
            {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable", "message": "x"},
        ],
    )
    assert r.deployment_view(noise) == r.deployment_view(base)
    for changed in (
        _with_status(base, readyReplicas=2),
        _with_status(base, updatedReplicas=1),
        _with_status(base, replicas=3),
        _with_status(base, observedGeneration=1),
        _with_status(base, conditions=[{"type": "Available", "status": "True"}]),
    ):
        assert r.deployment_view(changed) != r.deployment_view(base)


def test_equal_deployment_views_mean_equal_readiness() -> None:
    """The view holds every status input of both readiness tests (same metadata and spec)."""
    variants = [
        deployment(ready=ready, updated=updated, total=total, observed=observed, available=available)
        for ready in (0, 1, 2)
        for updated in (1, 2)
        for total in (2, 3)
        for observed in (1, 2)
        for available in ("True", "False")
    ]
    for a in variants:
        for b in variants:
            if r.deployment_view(a) == r.deployment_view(b):
                assert r.deployment_available(a) == r.deployment_available(b)
                assert r.deployment_rolled_out(a) == r.deployment_rolled_out(b)


def test_conditions_view_moves_with_a_job_turning_terminal_only() -> None:
    running = {"status": {"active": 1, "conditions": []}}
    progressing = {"status": {"active": 1, "ready": 1, "startTime": "t", "conditions": []}}
    criteria = {"status": {"conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]}}
    complete = {
        "status": {
            "succeeded": 1,
            "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True"},
                {"type": "Complete", "status": "True", "lastTransitionTime": "t"},
            ],
        }
    }
    assert r.conditions_view(running) == r.conditions_view(progressing)
    assert r.conditions_view(criteria) != r.conditions_view(complete)
    assert r.job_state(criteria) is r.JobState.RUNNING
    assert r.job_state(complete) is r.JobState.COMPLETE


def test_route_view_moves_with_acceptance_and_its_generation() -> None:
    def route(status: str, observed: int) -> dict[str, Any]:
        cond = {
            "type": "Accepted",
            "status": status,
            "observedGeneration": observed,
            "lastTransitionTime": "t",
        }
        return {
            "metadata": {"generation": 2},
            "status": {"parents": [{"parentRef": {"name": "gw"}, "conditions": [cond]}]},
        }

    assert r.route_view(route("True", 2)) != r.route_view(route("False", 2))
    assert r.route_view(route("True", 1)) != r.route_view(route("True", 2))
    assert r.route_accepted(route("True", 2))
    assert not r.route_accepted(route("True", 1))
    assert r.cronjob_view({"status": {"active": [{"name": "run-1"}]}}) != r.cronjob_view({"status": {}})
