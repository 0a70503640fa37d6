"""Metrics: one registry per instance, pre-created series, and counts a benchmark can read."""

from __future__ import annotations

from nova_operator.metrics import READ_VERBS, WRITE_VERBS, Metrics, counting_writes


def test_each_instance_has_its_own_registry() -> None:
    a, b = Metrics(), Metrics()
    a.api_requests.labels("get", "configmaps", "200").inc()
    assert a.api_request_count() == 1
    assert b.api_request_count() == 0


def test_api_request_count_filters_by_verb_and_resource() -> None:
    m = Metrics()
    for verb, resource, code in [
        ("get", "configmaps", "200"),
        ("list", "configmaps", "200"),
        ("apply", "configmaps", "201"),
        ("apply", "deployments.apps", "409"),
        ("patch", "novas.nova.openstack.c5c3.io/status", "200"),
        ("watch", "configmaps", "200"),
    ]:
        m.api_requests.labels(verb, resource, code).inc()
    assert m.api_request_count(READ_VERBS) == 2
    assert m.api_request_count(WRITE_VERBS) == 3
    assert m.api_request_count(WRITE_VERBS, resource="configmaps") == 1
    assert m.api_request_count() == 6


def test_controller_series_exist_at_zero_from_registration() -> None:
    m = Metrics()
    m.register_controller("nova", 2)
    for result in ("success", "error", "requeue_after", "terminal_error"):
        assert (
            m.registry.get_sample_value(
                "nova_operator_controller_reconcile_total", {"controller": "nova", "result": result}
            )
            == 0
        )
    assert (
        m.registry.get_sample_value(
            "nova_operator_controller_max_concurrent_reconciles", {"controller": "nova"}
        )
        == 2
    )
    assert b"nova_operator_workqueue_depth" in m.render()


def test_count_request_feeds_the_series_and_the_write_tally_a_pass_compares() -> None:
    m = Metrics()
    with counting_writes() as tally:
        for verb in ("get", "list", "watch", "apply", "patch", "create", "update", "delete"):
            m.count_request(verb, "configmaps", "200")
        m.count_request("patch", "configmaps", "error")
    m.count_request("patch", "configmaps", "200")  # outside the scope: the series only
    assert tally.count == 6
    assert m.api_request_count(WRITE_VERBS) == 7
    assert m.api_request_count() == 10
