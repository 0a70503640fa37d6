"""``bench pools``' arithmetic on synthetic logs: percentiles of joins, requests per pass and per
minute from an audit log and a compute request log, the drain's last disable and delete."""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from bench import audit, poolfigures, pools, report
from bench.__main__ import main
from bench.poolfigures import ComputeCall

OPERATOR = "system:serviceaccount:nova-system:nova-operator"
T0 = 1_800_000_000.0  # a fixed epoch second: nothing here reads the clock


def audit_line(at: float, verb: str, resource: str, *, user: str = OPERATOR, code: int = 200) -> str:
    stamp = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return json.dumps(
        {
            "stage": "ResponseComplete",
            "verb": verb,
            "user": {"username": user},
            "objectRef": {"resource": resource, "namespace": "bench-000", "name": "x"},
            "responseStatus": {"code": code},
            "requestReceivedTimestamp": stamp,
        }
    )


def audit_log(tmp_path: pathlib.Path, lines: list[str]) -> audit.AuditLog:
    path = tmp_path / "audit.log"
    path.write_text("\n".join(lines) + "\n")
    log = audit.AuditLog(path)
    log.refresh()
    return log


def call(at: float, method: str, path: str, code: int = 200, *, disables: bool = False) -> ComputeCall:
    return ComputeCall(T0 + at, "nova", method, path, code, disables)


def test_median_and_p95_of_joins_are_nearest_rank_and_missing_joins_are_counted() -> None:
    latencies = [float(s) for s in range(1, 21)]  # 1 .. 20 s
    found = poolfigures.joins(latencies, attempted=22)
    assert found["count"] == 20
    assert found["median"] == 10.0  # nearest rank: the 10th of 20
    assert found["p95"] == 19.0  # the 19th of 20
    assert found["max"] == 20.0
    assert found["missing"] == 2
    empty = poolfigures.joins([], attempted=3)
    assert empty["median"] is None
    assert empty["p95"] is None
    assert empty["missing"] == 3


def test_routes_fold_ids_so_calls_count_by_what_they_were() -> None:
    uuid = "3f1c7a52-6d0e-4c1b-9b7e-0d6f4b1e2a90"
    calls = [
        call(1, "GET", "/v2.1/os-services"),
        call(2, "PUT", f"/v2.1/os-services/{uuid}", disables=True),
        call(3, "POST", "/v2.1/os-aggregates/17/action"),
        ComputeCall(T0 + 4, "keystone", "POST", "/v3/auth/tokens", 201),
        call(5, "GET", "/v2.1/os-hypervisors/detail"),
        call(6, "GET", "/v2.1/os-hypervisors/detail"),
    ]
    assert [c.route for c in calls[:3]] == [
        "GET /v2.1/os-services",
        "PUT /v2.1/os-services/{id}",
        "POST /v2.1/os-aggregates/{id}/action",
    ]
    assert poolfigures.by_route(calls)["GET /v2.1/os-hypervisors/detail"] == 2
    assert poolfigures.lists_by_kind(calls) == {"hypervisors": 2, "services": 1}


def test_a_window_counts_requests_per_pass_and_per_minute_leases_and_others_aside(
    tmp_path: pathlib.Path,
) -> None:
    log = audit_log(
        tmp_path,
        [
            audit_line(T0 + 1, "list", "nodes"),
            audit_line(T0 + 2, "list", "nodes"),
            audit_line(T0 + 3, "patch", "novacomputes/status"),
            audit_line(T0 + 4, "update", "leases"),  # leader election: apart
            audit_line(T0 + 5, "list", "pods", user="system:admin"),  # not the operator
            audit_line(T0 + 40, "list", "nodes"),  # after the window
        ],
    )
    calls = [
        ComputeCall(T0 + 1, "keystone", "POST", "/v3/auth/tokens", 201),
        call(1.5, "GET", "/v2.1/os-services"),
        call(2, "GET", "/v2.1/os-aggregates"),
        ComputeCall(T0 + 11, "keystone", "POST", "/v3/auth/tokens", 201),
        call(11.5, "GET", "/v2.1/os-services"),
        call(12, "GET", "/v2.1/os-aggregates"),
        call(31, "GET", "/v2.1/os-services"),  # after the window
    ]
    w = poolfigures.window(log, calls, T0, T0 + 30, passes=2)
    assert w["kube"]["total"] == 3
    assert w["kube"]["per_pass"] == 1.5
    assert w["kube"]["per_minute"] == 6.0  # 3 in 30 s
    assert w["kube"]["by_verb_resource"] == {"list nodes": 2, "patch novacomputes/status": 1}
    assert w["compute"]["total"] == 6
    assert w["compute"]["per_pass"] == 3.0
    assert w["compute"]["per_minute"] == 12.0
    assert w["compute"]["lists_per_pass"] == {"aggregates": 1.0, "services": 1.0}
    idle = poolfigures.window(log, calls, T0, T0 + 30, passes=0)
    assert idle["kube"]["per_pass"] is None  # no pass: no ratio, not a division by zero


def test_the_drain_ends_at_the_last_disable_and_the_last_successful_delete() -> None:
    services = {"node-a": "aaaa", "node-b": "bbbb"}
    calls = [
        call(-5, "PUT", "/v2.1/os-services/aaaa", disables=True),  # before the drain: ignored
        call(2, "PUT", "/v2.1/os-services/aaaa", disables=True),
        call(3, "PUT", "/v2.1/os-services/bbbb", disables=False),  # an enable is not a disable
        call(4, "PUT", "/v2.1/os-services/bbbb", disables=True),
        call(5, "PUT", "/v2.1/os-services/cccc", disables=True),  # not a drained node
        call(6, "DELETE", "/v2.1/os-services/aaaa", code=409),  # refused: not deleted yet
        call(9, "DELETE", "/v2.1/os-services/aaaa", code=204),
    ]
    found = poolfigures.drain(calls, services, T0)
    assert found["all_disabled"] == 4.0
    assert found["disabled"] == 2
    assert found["all_deleted"] is None  # node-b's service was never deleted
    assert found["deleted"] == 1
    calls.append(call(12, "DELETE", "/v2.1/os-services/bbbb", code=204))
    assert poolfigures.drain(calls, services, T0)["all_deleted"] == 12.0


def test_ready_times_and_the_ratio_to_the_floor() -> None:
    ready = poolfigures.ready_times({"pool-00": T0 + 10, "pool-01": T0 + 30}, T0, expected=2)
    assert (ready["first"], ready["median"], ready["last"]) == (10.0, 20.0, 30.0)
    assert poolfigures.versus_floor(ready["last"], 12.0) == 2.5
    partial = poolfigures.ready_times({"pool-00": T0 + 10}, T0, expected=2)
    assert partial["last"] is None
    assert partial["missing"] == 1
    assert poolfigures.versus_floor(None, 12.0) is None


@dataclass
class FakeCall:
    """What ``simcluster.standins.openstack.Call`` carries that the bench reads."""

    api: str
    method: str
    path: str
    body: Any
    status: int
    at: float


def test_fake_calls_move_onto_the_wall_clock_and_keep_whether_they_disable() -> None:
    got = ComputeCall.of(FakeCall("nova", "PUT", "/v2.1/os-services/x", {"status": "disabled"}, 200, 5.0), T0)
    assert got.at == T0 + 5.0
    assert got.disables
    assert not ComputeCall.of(FakeCall("nova", "PUT", "/v2.1/os-services/x", None, 200, 5.0), T0).disables


def test_drained_nodes_spread_over_the_pools_and_keep_half_of_each() -> None:
    nodes = {"pool-00": [f"a{i}" for i in range(4)], "pool-01": [f"b{i}" for i in range(4)]}
    assert pools.drained_nodes(nodes, 3) == ["a3", "b3", "a2"]
    assert pools.drained_nodes(nodes, 50) == ["a3", "b3", "a2", "b2"]  # at most half of each pool


def test_the_pools_table_prints_every_row_of_a_result_even_a_partial_one() -> None:
    text = report.pools_table({"pools": 2, "nodes_per_pool": 10, "nodes": 20, "ready": {"last": 31.5}})
    assert "| all pools Ready: last (s) | 31.5 |" in text
    assert "| drain: every service deleted (s) | - |" in text


def test_joins_are_back_to_back_unless_a_gap_is_asked_and_none_waits_before_the_first() -> None:
    assert [pools.gap_before(k, 0.0) for k in range(3)] == [0.0, 0.0, 0.0]
    assert [pools.gap_before(k, 35.0) for k in range(3)] == [0.0, 35.0, 35.0]
    assert pools.gap_before(2, -1.0) == 0.0


@pytest.mark.parametrize(("argv", "gap"), [([], 0.0), (["--join-gap", "35"], 35.0)])
def test_the_join_gap_reaches_the_run_and_its_table(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], gap: float
) -> None:
    asked: list[pools.PoolsOptions] = []

    def fake_run(opts: pools.PoolsOptions) -> dict[str, Any]:
        asked.append(opts)
        raise SystemExit(0)

    monkeypatch.setattr(pools, "run", fake_run)
    with pytest.raises(SystemExit):
        main(["pools", "--pools", "2", "--nodes", "3", *argv])
    assert [o.join_gap for o in asked] == [gap]
    text = report.pools_table({"join": {"gap_seconds": gap, "p95": 4.0}})
    assert f"| wait between joins (s) | {report._fmt(gap)} |" in text
