"""Drift guard: the Nova pipeline's order, step names and conditions match the spec and the Ready list."""

from __future__ import annotations

from nova_operator import conditions
from nova_operator.reconcilers import NOVA_GROUP, NOVA_STEPS
from nova_operator.reconcilers.nova_steps import condition_type


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
    ]


def test_every_step_reports_a_ready_input_and_every_ready_input_has_a_step() -> None:
    reported = {s.condition for s in (*NOVA_STEPS, *NOVA_GROUP)}
    assert reported == set(conditions.NOVA_READY_INPUTS)
    assert conditions.EXTRA_CONFIG_HEALTHY not in conditions.NOVA_READY_INPUTS


def test_the_secret_producing_steps_share_secrets_ready() -> None:
    shared = [s.name for s in NOVA_STEPS if s.condition == conditions.SECRETS_READY]
    assert shared == ["Secrets", "DBConnectionSecrets", "TransportURLSecret", "Config"]


def test_an_unmapped_step_name_is_unknown_in_the_metrics() -> None:
    assert condition_type("Database") == "DatabaseReady"
    assert condition_type("Bogus") == "UNKNOWN"
