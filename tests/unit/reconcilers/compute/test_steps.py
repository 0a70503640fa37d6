"""Drift guard: the NovaCompute pipeline, its conditions, the Ready list and the metric map agree."""

from __future__ import annotations

from nova_operator import conditions
from nova_operator.reconcilers.compute.controller import nova_changed, sibling_changed
from nova_operator.reconcilers.compute.daemon_set import rolled_out
from nova_operator.reconcilers.compute.steps import NOVACOMPUTE_STEPS, STEP_CONDITIONS, TEARDOWN_STEPS
from tests.unit.reconcilers.step_names import misnamed


def test_the_seven_steps_run_in_the_spec_order_each_owning_one_ready_input() -> None:
    assert [(s.name, s.condition) for s in NOVACOMPUTE_STEPS] == [
        ("NovaRef", "NovaReady"),
        ("Nodes", "NodesReady"),
        ("PoolConfig", "ConfigReady"),
        ("DaemonSet", "DaemonSetReady"),
        ("ComputeVPA", "VPAReady"),
        ("Aggregates", "AggregatesReady"),
        ("Services", "ServicesReady"),
    ]
    assert sorted(STEP_CONDITIONS.values()) == sorted(conditions.NOVACOMPUTE_READY_INPUTS)
    assert [s.name for s in TEARDOWN_STEPS] == ["NovaRef", "Aggregates"]


def test_each_step_is_reconcile_step_in_the_module_of_its_name() -> None:
    assert misnamed(NOVACOMPUTE_STEPS, {}) == []


def test_daemonset_readiness() -> None:
    def ds(gen: int, observed: int, desired: int, updated: int, ready: int) -> dict[str, object]:
        return {
            "metadata": {"generation": gen},
            "status": {
                "observedGeneration": observed,
                "desiredNumberScheduled": desired,
                "updatedNumberScheduled": updated,
                "numberReady": ready,
            },
        }

    assert rolled_out(ds(2, 2, 3, 3, 3))
    assert rolled_out(ds(2, 2, 0, 0, 0))
    assert not rolled_out(ds(2, 1, 3, 3, 3))
    assert not rolled_out(ds(2, 2, 3, 2, 2))
    assert not rolled_out(ds(2, 2, 3, 3, 2))


def test_sibling_and_nova_watch_filters() -> None:
    base = {
        "metadata": {"generation": 1},
        "status": {"nodes": [{"name": "n", "phase": "Active", "zone": "z", "instances": 1}]},
    }
    counts = {
        "metadata": {"generation": 1},
        "status": {
            "nodes": [{"name": "n", "phase": "Active", "zone": "z", "instances": 5}],
            "numberReady": 3,
        },
    }
    moved = {
        "metadata": {"generation": 1},
        "status": {"nodes": [{"name": "n", "phase": "Draining", "zone": "z"}]},
    }
    deleting = {"metadata": {"generation": 1, "deletionTimestamp": "t"}, "status": base["status"]}
    assert not sibling_changed.update(base, counts)
    assert sibling_changed.update(base, moved)
    assert sibling_changed.update(base, deleting)
    ready = {"type": "Ready", "status": "False", "reason": "WaitingForDatabase", "message": "a"}
    nova = {"metadata": {"generation": 1}, "status": {"installedRelease": "2025.2", "conditions": [ready]}}

    def with_conditions(*conds: dict[str, str]) -> dict[str, object]:
        return {**nova, "status": {**nova["status"], "conditions": list(conds)}}

    # the Nova's other status writes (a reason or message, another condition) do not wake its pools
    assert not nova_changed.update(
        nova, with_conditions({**ready, "reason": "DBSyncInProgress", "message": "b"})
    )
    assert not nova_changed.update(nova, with_conditions(ready, {"type": "DatabaseReady", "status": "True"}))
    assert nova_changed.update(nova, {**nova, "status": {**nova["status"], "installedRelease": "2026.1"}})
    # its Ready turning True (or back) does: the pool's compute API calls wait on it
    assert nova_changed.update(nova, with_conditions({**ready, "status": "True", "reason": "Ready"}))
    assert nova_changed.update(with_conditions({**ready, "status": "True"}), nova)
