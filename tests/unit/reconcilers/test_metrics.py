"""The Nova and NovaCompute families: one set per registry, spec names, the condition a step owns."""

from __future__ import annotations

from nova_operator.metrics import Metrics
from nova_operator.reconcilers.compute.steps import STEP_CONDITIONS
from nova_operator.reconcilers.metrics import NovaMetrics, StepMetrics
from nova_operator.reconcilers.nova.steps import CONDITION_TYPES


def errors(m: NovaMetrics, step: str, condition: str) -> float | None:
    labels = {"sub_reconciler": step, "condition_type": condition}
    return m.registry.get_sample_value("nova_operator_reconcile_errors_total", labels)


def test_the_families_are_registered_once_per_registry_and_served_with_the_generic_ones() -> None:
    a, b = Metrics(), Metrics()
    assert NovaMetrics.of(a) is NovaMetrics.of(a)  # a second registration would raise (duplicate names)
    assert NovaMetrics.of(a) is not NovaMetrics.of(b)
    NovaMetrics.of(a).nova_ready.labels("nova", "openstack").set(1)
    assert b'nova_operator_nova_ready{namespace="openstack",nova="nova"} 1.0' in a.render()
    assert b"nova_operator_nova_ready{" not in b.render()


def test_both_pipelines_pre_create_their_error_series_under_the_condition_each_step_owns() -> None:
    m = NovaMetrics.of(Metrics())
    StepMetrics(m, CONDITION_TYPES.items())
    StepMetrics(m, STEP_CONDITIONS.items())
    assert errors(m, "Database", "DatabaseReady") == 0
    assert errors(m, "Services", "ServicesReady") == 0
    assert errors(m, "NovaRef", "NovaReady") == 0


def test_a_step_is_timed_and_its_failure_counted_under_the_condition_it_was_given() -> None:
    m = NovaMetrics.of(Metrics())
    observer = StepMetrics(m, [("Database", "DatabaseReady")])
    observer.observe_step("Database", "DatabaseReady", 0.2, failed=False)
    observer.observe_step("Database", "DatabaseReady", 3.0, failed=True)
    observer.observe_step("Extra", "ExtraReady", 0.1, failed=True)
    r = m.registry
    assert (
        r.get_sample_value("nova_operator_reconcile_duration_seconds_count", {"sub_reconciler": "Database"})
        == 2
    )
    bucket = {"sub_reconciler": "Database", "le": "0.25"}
    assert r.get_sample_value("nova_operator_reconcile_duration_seconds_bucket", bucket) == 1
    assert errors(m, "Database", "DatabaseReady") == 1
    assert errors(m, "Extra", "ExtraReady") == 1


def test_nova_ready_is_per_cr_and_forgotten_with_the_nova() -> None:
    m = NovaMetrics.of(Metrics())
    m.nova_ready.labels("nova", "openstack").set(1)
    m.db_sync_total.labels("nova", "openstack", "failed").inc()
    m.nova_ready.labels("other", "openstack").set(0)
    m.stale_services_deleted.labels("nova", "openstack", "nova-scheduler").inc()
    m.stale_services_deleted.labels("other", "openstack", "nova-conductor").inc()
    m.forget_nova("nova", "openstack")
    r, stale = m.registry, "nova_operator_stale_services_deleted_total"
    assert (
        r.get_sample_value(stale, {"nova": "nova", "namespace": "openstack", "binary": "nova-scheduler"})
        is None
    )
    assert (
        r.get_sample_value(stale, {"nova": "other", "namespace": "openstack", "binary": "nova-conductor"})
        == 1
    )
    assert r.get_sample_value("nova_operator_nova_ready", {"nova": "nova", "namespace": "openstack"}) is None
    failed = {"nova": "nova", "namespace": "openstack", "result": "failed"}
    assert r.get_sample_value("nova_operator_db_sync_total", failed) is None
    assert r.get_sample_value("nova_operator_nova_ready", {"nova": "other", "namespace": "openstack"}) == 0
