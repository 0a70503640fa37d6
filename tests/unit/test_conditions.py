from __future__ import annotations

from datetime import UTC, datetime, timedelta

from nova_operator import conditions as c

T0 = datetime(2026, 11, 29, 10, 0, 0, 123456, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def test_new_condition_is_stamped_with_generation_and_time() -> None:
    conds: list[c.Condition] = []
    c.set_condition(conds, c.SECRETS_READY, True, "SecretsAvailable", "ok", generation=3, now=T0)
    assert conds == [
        {
            "type": "SecretsReady",
            "status": "True",
            "reason": "SecretsAvailable",
            "message": "ok",
            "observedGeneration": 3,
            "lastTransitionTime": "2026-11-29T10:00:00Z",
        }
    ]


def test_transition_time_moves_only_when_status_flips() -> None:
    conds: list[c.Condition] = []
    c.set_condition(conds, c.DATABASE_READY, False, "DBSyncInProgress", "running", generation=1, now=T0)
    c.set_condition(conds, c.DATABASE_READY, False, "WaitingForConfig", "other", generation=2, now=T1)
    assert conds[0]["lastTransitionTime"] == "2026-11-29T10:00:00Z"
    assert (conds[0]["reason"], conds[0]["observedGeneration"]) == ("WaitingForConfig", 2)
    c.set_condition(conds, c.DATABASE_READY, True, "DatabaseSynced", "", generation=2, now=T1)
    assert conds[0]["lastTransitionTime"] == "2026-11-29T10:05:00Z"


def test_reasserting_a_condition_leaves_it_identical() -> None:
    conds: list[c.Condition] = []
    c.set_condition(conds, c.HPA_READY, True, "HPANotRequired", "m", generation=1, now=T0)
    before = [dict(x) for x in conds]
    c.set_condition(conds, c.HPA_READY, True, "HPANotRequired", "m", generation=1, now=T1)
    assert conds == before


def test_ready_lists_every_missing_or_false_input_and_ignores_extra_config() -> None:
    conds: list[c.Condition] = []
    for t in c.NOVA_READY_INPUTS:
        c.set_condition(conds, t, True, "R", "", generation=1, now=T0)
    c.set_condition(conds, c.EXTRA_CONFIG_HEALTHY, False, "OwnedKeysOverridden", "", generation=1, now=T0)
    ready = c.set_ready(conds, c.NOVA_READY_INPUTS, generation=1, now=T0)
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "True",
        "AllReady",
        "All sub-conditions are ready",
    )

    c.remove(conds, c.HPA_READY)
    c.set_condition(conds, c.DATABASE_READY, False, "DBSyncInProgress", "", generation=1, now=T0)
    ready = c.set_ready(conds, c.NOVA_READY_INPUTS, generation=1, now=T1)
    assert (ready["status"], ready["reason"]) == ("False", "NotAllReady")
    assert ready["message"] == "Not ready: DatabaseReady, HPAReady"


def test_ready_aggregates_exactly_fifteen_nova_conditions() -> None:
    assert len(c.NOVA_READY_INPUTS) == len(set(c.NOVA_READY_INPUTS)) == 15
    assert c.EXTRA_CONFIG_HEALTHY not in c.NOVA_READY_INPUTS
