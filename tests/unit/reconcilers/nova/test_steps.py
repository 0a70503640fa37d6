"""Drift guard: the Nova pipeline's order, step names and conditions match the spec and the Ready list."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from nova_operator import conditions
from nova_operator.reconcilers.nova.context import PassContext
from nova_operator.reconcilers.nova.steps import (
    CONDITION_TYPES,
    NOVA_GROUP,
    NOVA_STEPS,
    WORKLOADS,
    workloads_at_once,
)
from tests.unit.reconcilers.step_names import misnamed


def test_the_thirteen_steps_run_in_order() -> None:
    assert [s.name for s in NOVA_STEPS] == [
        "NetworkPolicy",  # first (issue 13): before any pod, never skipped by a later failure
        "Secrets",
        "DBConnectionSecrets",
        "TransportURLSecret",
        "Config",
        "ComputeConfig",
        "Database",
        "Conductor",
        "Scheduler",
        "Metadata",
        "ConsoleProxy",
        "Deployment",
        "DBArchive",
    ]
    assert [s.name for s in NOVA_GROUP] == [
        "HTTPRoute",
        "MetadataHTTPRoute",
        "ConsoleHTTPRoute",
        "HealthCheck",
        "HPA",
        "ServiceRecords",  # beyond the spec (issue 24)
    ]


def test_every_step_reports_a_ready_input_and_every_ready_input_has_a_step() -> None:
    reported = {s.condition for s in (*NOVA_STEPS, *NOVA_GROUP)}
    # ServiceRecords' condition is informational: leftover records of gone pods never cost Ready
    assert reported == {*conditions.NOVA_READY_INPUTS, conditions.SERVICE_RECORDS_HEALTHY}
    assert conditions.EXTRA_CONFIG_HEALTHY not in conditions.NOVA_READY_INPUTS
    assert conditions.SERVICE_RECORDS_HEALTHY not in conditions.NOVA_READY_INPUTS


def test_the_secret_producing_steps_share_secrets_ready() -> None:
    shared = [s.name for s in NOVA_STEPS if s.condition == conditions.SECRETS_READY]
    assert shared == ["Secrets", "DBConnectionSecrets", "TransportURLSecret", "Config"]


def test_each_step_is_counted_under_the_condition_it_owns() -> None:
    assert {s.name: s.condition for s in (*NOVA_STEPS, *NOVA_GROUP)} == CONDITION_TYPES
    assert CONDITION_TYPES["Database"] == "DatabaseReady"


def test_only_the_five_workloads_share_a_batch_and_run_at_once_only_outside_an_upgrade() -> None:
    batched = [s.name for s in NOVA_STEPS if s.batch]
    assert batched == ["Conductor", "Scheduler", "Metadata", "ConsoleProxy", "Deployment"]
    assert {s.batch for s in NOVA_STEPS if s.batch} == {WORKLOADS}

    class Status:
        def __init__(self, status: dict[str, Any]) -> None:
            self.status = status

    assert workloads_at_once(Status({}), WORKLOADS)  # type: ignore[arg-type]
    for phase in ("Expanding", "Migrating", "RollingUpdate", "Contracting"):
        assert not workloads_at_once(Status({"upgradePhase": phase}), WORKLOADS)  # type: ignore[arg-type]
    assert not workloads_at_once(Status({}), "other")  # type: ignore[arg-type]


def test_a_committed_fork_brings_back_its_condition_and_the_status_fields_it_changed() -> None:
    raw = {"metadata": {"name": "nova", "namespace": "ns", "resourceVersion": "1"}}
    ctx = PassContext(
        kube=None,  # type: ignore[arg-type]
        obj=raw,
        nova=None,  # type: ignore[arg-type]
        status={"conditions": [], "stale": 1, "kept": 2},
        now=lambda: datetime(2026, 1, 1, tzinfo=UTC),
        events=None,  # type: ignore[arg-type]
        caches={},
        metrics=None,  # type: ignore[arg-type]
    )
    fork = ctx.fork()
    fork.set(conditions.DEPLOYMENT_READY, True, "DeploymentReady", "ok")
    fork.set(conditions.CONDUCTOR_READY, True, "ConductorReady", "not this step's")
    fork.status["endpoint"] = "http://nova.ns.svc.cluster.local:8774"
    del fork.status["stale"]
    ctx.status["kept"] = 3  # set meanwhile by a step committed before: the fork did not change it
    ctx.adopt_step(fork, conditions.DEPLOYMENT_READY)
    assert [c["type"] for c in ctx.status["conditions"]] == [conditions.DEPLOYMENT_READY]
    assert ctx.status["endpoint"] == "http://nova.ns.svc.cluster.local:8774"
    assert "stale" not in ctx.status
    assert ctx.status["kept"] == 3


def test_a_fork_has_the_crs_metadata_to_itself_and_shares_the_rest_read_only() -> None:
    """A member's claim patch replaces its fork's resourceVersion and annotations; the parent sees them
    only through ``adopt_condition``. The spec is not copied per fork (that copy was 11 % of a pass)."""
    spec = {"openStackRelease": "2025.2"}
    raw = {
        "metadata": {"name": "nova", "namespace": "ns", "resourceVersion": "1", "annotations": {"a": "1"}},
        "spec": spec,
    }
    ctx = PassContext(
        kube=None,  # type: ignore[arg-type]
        obj=raw,
        nova=None,  # type: ignore[arg-type]
        status={"conditions": []},
        now=lambda: datetime(2026, 1, 1, tzinfo=UTC),
        events=None,  # type: ignore[arg-type]
        caches={},
        metrics=None,  # type: ignore[arg-type]
    )
    fork = ctx.fork()
    assert fork.obj["spec"] is spec
    meta = fork.obj["metadata"]
    meta["resourceVersion"] = "2"  # as record_terminal_claims leaves a fork after its patch
    meta["annotations"] = {"a": "1", "claim": "job-uid"}
    assert raw["metadata"] == {
        "name": "nova",
        "namespace": "ns",
        "resourceVersion": "1",
        "annotations": {"a": "1"},
    }
    fork.set(conditions.DB_ARCHIVE_READY, True, "DBArchiveReady", "ok")
    ctx.adopt_condition(fork, conditions.DB_ARCHIVE_READY)
    assert raw["metadata"]["resourceVersion"] == "2"
    assert raw["metadata"]["annotations"] == {"a": "1", "claim": "job-uid"}


def test_each_step_is_reconcile_step_in_the_module_of_its_name_or_its_family() -> None:
    families = {
        "workloads": frozenset({"Conductor", "Scheduler", "Metadata", "ConsoleProxy"}),
        "http_route": frozenset({"MetadataHTTPRoute", "ConsoleHTTPRoute"}),
    }
    assert misnamed((*NOVA_STEPS, *NOVA_GROUP), families) == []
