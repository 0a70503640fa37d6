"""Routing a rule only the model checks to the step that consumes the field."""

from __future__ import annotations

import copy
import pathlib
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from nova_operator.decisions import spec_routes
from nova_operator.models.nova import Nova
from nova_operator.reconcilers.nova import spec_rules
from nova_operator.reconcilers.nova.steps import NOVA_GROUP, NOVA_STEPS

SAMPLE = pathlib.Path(__file__).resolve().parents[4] / "config" / "samples" / "nova_minimal.yaml"


def body(**spec: Any) -> dict[str, Any]:
    doc = yaml.safe_load(SAMPLE.read_text())
    doc["metadata"]["uid"] = "u-1"
    doc["spec"].update(copy.deepcopy(spec))
    return dict(doc)


def error_of(obj: dict[str, Any]) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        Nova.model_validate(obj)
    return info.value


def test_each_failing_field_blocks_only_its_consumers_and_is_left_out_of_the_spec() -> None:
    obj = body(
        dbArchive={"schedule": "every night", "maxRows": 5},
        scheduler={"deployment": {"replicas": 2, "nodeSelector": {"bad key!": "x"}}},
    )
    routed = spec_routes.route(obj, error_of(obj))
    assert routed is not None
    assert set(routed.blocked) == {"DBArchive", "Scheduler"}
    assert "spec.dbArchive.schedule" in routed.blocked["DBArchive"]
    assert "spec.scheduler.deployment.nodeSelector" in routed.blocked["Scheduler"]
    assert "bad key!" in routed.blocked["Scheduler"]
    # the rest of the spec is kept as written
    assert routed.nova.spec.db_archive is not None
    assert routed.nova.spec.db_archive.schedule is None
    assert routed.nova.spec.db_archive.max_rows == 5
    assert routed.nova.spec.scheduler.deployment is not None
    assert routed.nova.spec.scheduler.deployment.replicas == 2
    assert obj["spec"]["dbArchive"]["schedule"] == "every night"  # the input is not changed


def test_the_jobs_and_api_blocks_feed_the_database_and_archive_steps_too() -> None:
    obj = body(jobs={"nodeSelector": {"-x": "y"}})
    routed = spec_routes.route(obj, error_of(obj))
    assert routed is not None
    assert set(routed.blocked) == {"Database", "DBArchive"}
    obj = body(api={"deployment": {"replicas": 1, "nodeSelector": {"a/": "y"}}})
    routed = spec_routes.route(obj, error_of(obj))
    assert routed is not None
    assert set(routed.blocked) == {"Deployment", "Database", "DBArchive"}


def test_an_error_no_step_consumes_is_not_routed() -> None:
    obj = body(openStackRelease="not-a-release", dbArchive={"schedule": "every night"})
    assert spec_routes.route(obj, error_of(obj)) is None


def test_guard_replaces_only_the_blocked_steps() -> None:
    steps = spec_rules.guard(NOVA_STEPS, {"Scheduler": "m"})
    assert [s.name for s in steps] == [s.name for s in NOVA_STEPS]
    changed = [s.name for s, o in zip(steps, NOVA_STEPS, strict=True) if s.run is not o.run]
    assert changed == ["Scheduler"]
    assert spec_rules.guard(NOVA_GROUP, {"Scheduler": "m"}) == NOVA_GROUP
