"""The kubelet stand-in's pod phase and conditions."""

from __future__ import annotations

import pytest
from simcluster.realtier.kubelet.status import Record, conditions, phase, render


def running(name: str = "c", ready: bool = True) -> Record:
    return Record(name, "img", state={"running": {"startedAt": "t"}}, ready=ready, started=True)


def exited(code: int, name: str = "c") -> Record:
    return Record(name, "img", state={"terminated": {"exitCode": code}})


def crashlooping(code: int = 1) -> Record:
    return Record(
        "c",
        "img",
        state={"waiting": {"reason": "CrashLoopBackOff"}},
        last_state={"terminated": {"exitCode": code}},
    )


@pytest.mark.parametrize(
    ("policy", "init", "main", "want"),
    [
        ("Always", [], [Record("c", "img")], "Pending"),
        ("Always", [], [running()], "Running"),
        ("Always", [], [crashlooping()], "Running"),
        ("Always", [exited(1, "i")], [Record("c", "img")], "Pending"),
        ("Never", [exited(1, "i")], [Record("c", "img")], "Failed"),
        ("Never", [exited(0, "i")], [exited(0)], "Succeeded"),
        ("Never", [], [exited(0), exited(2, "d")], "Failed"),
        ("OnFailure", [], [exited(0)], "Succeeded"),
        ("OnFailure", [], [crashlooping()], "Running"),
        ("Always", [running("i")], [Record("c", "img")], "Pending"),
    ],
)
def test_phase(policy: str, init: list[Record], main: list[Record], want: str) -> None:
    assert phase(policy, init, main) == want


def test_terminal_phase_of_a_deleted_pod() -> None:
    assert phase("Always", [], [exited(137)], terminal=True) == "Failed"
    assert phase("Always", [], [exited(0)], terminal=True) == "Succeeded"


def test_conditions_name_the_unready_containers_and_keep_transition_times() -> None:
    first = conditions("Running", [], [running("a"), running("b", ready=False)], True, [], "t1")
    by_type = {c["type"]: c for c in first}
    assert by_type["Ready"]["status"] == "False"
    assert by_type["Ready"]["message"] == "containers with unready status: [b]"
    assert by_type["Initialized"]["status"] == "True"
    again = conditions("Running", [], [running("a"), running("b", ready=False)], True, first, "t2")
    assert {c["type"]: c["lastTransitionTime"] for c in again} == {c["type"]: "t1" for c in first}
    ready = {c["type"]: c for c in conditions("Running", [], [running("a"), running("b")], True, again, "t3")}
    assert ready["Ready"] == {
        "type": "Ready",
        "status": "True",
        "lastTransitionTime": "t3",
        "lastProbeTime": None,
    }


def test_render_reports_ips_and_containers() -> None:
    pod = {"spec": {"restartPolicy": "Always", "containers": [{"name": "c"}]}, "status": {}}
    status = render(
        pod,
        [],
        [running()],
        sandbox_ready=True,
        host_ip="10.0.0.1",
        pod_ip="10.244.0.5",
        start_time="t0",
        now="t1",
    )
    assert status["phase"] == "Running"
    assert status["podIP"] == "10.244.0.5"
    assert status["podIPs"] == [{"ip": "10.244.0.5"}]
    assert status["hostIP"] == "10.0.0.1"
    assert status["startTime"] == "t0"
    assert status["containerStatuses"][0]["ready"] is True


def test_a_failed_init_container_leaves_the_pod_uninitialized() -> None:
    by_type = {
        c["type"]: c for c in conditions("Failed", [exited(7, "i")], [Record("c", "img")], True, [], "t")
    }
    assert by_type["Initialized"]["status"] == "False"
    assert by_type["Initialized"]["message"] == "containers with incomplete status: [i]"
    assert by_type["Ready"]["reason"] == "PodFailed"
