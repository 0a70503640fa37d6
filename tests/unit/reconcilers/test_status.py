"""The pure half of the status finish (``reconcilers.status``); what writes is tested on the real API
server in ``tests/integration/nova/test_pass_kit.py``."""

from __future__ import annotations

from nova_operator.reconcilers.status import keep_transition_times, status_patch


def test_a_removed_status_field_is_sent_as_null() -> None:
    assert status_patch({"a": 1, "b": 2}, {"a": 1}) == {"b": None}


def test_a_condition_that_flips_and_flips_back_within_a_pass_keeps_its_transition_time() -> None:
    old = {"type": "SecretsReady", "status": "False", "lastTransitionTime": "2025-01-01T00:00:00Z"}
    snapshot = {"conditions": [old]}
    status = {"conditions": [{**old, "lastTransitionTime": "2026-01-01T00:00:00Z", "message": "new"}]}
    keep_transition_times(status, snapshot)
    assert status["conditions"][0]["lastTransitionTime"] == "2025-01-01T00:00:00Z"
    flipped = {"conditions": [{**old, "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    keep_transition_times(flipped, snapshot)
    assert flipped["conditions"][0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
