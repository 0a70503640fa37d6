"""``bench real``'s reading of the namespace: which stages one look shows, where the time went, the hogs."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from bench import hogs, real
from bench.__main__ import main
from simcluster.client.kube import KubeError


def _ready(ctype: str = "Ready", status: str = "True") -> dict[str, Any]:
    return {"status": {"conditions": [{"type": ctype, "status": status, "reason": "R"}]}}


def _pod(name: str, *, running: bool, ready: bool, job: str | None = None) -> dict[str, Any]:
    labels = {"batch.kubernetes.io/job-name": job} if job else {}
    state = {"running": {}} if running else {"waiting": {"reason": "ContainerCreating"}}
    return {
        "metadata": {"name": name, "labels": labels, "ownerReferences": [{"kind": "ReplicaSet"}]},
        "status": {
            "containerStatuses": [{"state": state}],
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_a_look_names_each_stage_it_shows_and_none_it_does_not() -> None:
    snap = real.Snapshot(
        nova=_ready("DatabaseReady"),
        pool=None,
        databases=[_ready(), _ready(), _ready()],
        jobs={"nova-db-sync": _ready("Complete")},
        deployments={
            "nova-scheduler": {"spec": {"replicas": 1}, "status": {"availableReplicas": 1}},
            "nova": {"spec": {"replicas": 3}, "status": {"availableReplicas": 2}},
        },
        pods=[
            _pod("nova-scheduler-5d8f7c9b4-abcde", running=True, ready=True),
            _pod("nova-7c9b4d8f5-fghij", running=True, ready=False),
            _pod("nova-db-sync-xyz12", running=False, ready=False, job="nova-db-sync"),
        ],
        answered=["nova"],
    )
    found = real.seen(snap)
    assert "MariaDB objects Ready" in found
    assert {"db-sync Job created", "db-sync Job complete", "db-sync done"} <= set(found)
    assert {"nova-scheduler pod running", "nova-scheduler pod Ready", "nova pod running"} <= set(found)
    assert "nova pod Ready" not in found
    assert "nova-db-sync pod running" not in found  # still creating its container
    assert "nova pod answers HTTP" in found
    assert {"Deployment nova created", "Deployment nova-scheduler available"} <= set(found)
    assert "Deployment nova available" not in found  # 2 of 3 replicas
    assert "Nova Ready" not in found
    assert not any(s.startswith("pool") for s in found)


def test_the_novas_last_waits_are_stages_with_their_reasons() -> None:
    nova = {
        "status": {
            "conditions": [
                {"type": "NovaAPIReady", "status": "False", "reason": "HealthCheckTimeout"},
                {"type": "ConductorReady", "status": "False", "reason": "WaitingForConductor"},
            ]
        }
    }
    found = real.seen(real.Snapshot(nova=nova, pool=None))
    assert found == ["Nova NovaAPIReady False HealthCheckTimeout"]


def test_two_of_three_databases_ready_is_not_the_stage() -> None:
    snap = real.Snapshot(nova=None, pool=None, databases=[_ready(), _ready(), _ready(status="False")])
    assert "MariaDB objects Ready" not in real.seen(snap)


def test_a_pool_condition_is_a_stage_with_its_reason() -> None:
    pool = {
        "status": {
            "conditions": [
                {"type": "NovaReady", "status": "False", "reason": "WaitingForInstalledRelease"},
                {"type": "Ready", "status": "True", "reason": "Ready"},
            ]
        }
    }
    found = real.seen(real.Snapshot(nova=None, pool=pool))
    assert found == ["pool NovaReady False WaitingForInstalledRelease", "pool Ready"]


def test_a_pod_belongs_to_its_job_its_daemonset_or_its_deployment() -> None:
    job = _pod("nova-db-sync-q2w3e", running=True, ready=False, job="nova-db-sync")
    deployment = _pod("nova-metadata-5d8f7c9b4-abcde", running=True, ready=False)
    daemon = _pod("rack7-nova-compute-8jwpb", running=True, ready=False)
    daemon["metadata"]["ownerReferences"] = [{"kind": "DaemonSet"}]
    assert [real._pod_owner(p) for p in (job, deployment, daemon)] == [
        "nova-db-sync",
        "nova-metadata",
        "rack7-nova-compute",
    ]


def test_the_gaps_are_the_differences_of_stages_both_seen() -> None:
    stages = {
        "MariaDB objects Ready": 5.0,
        "db-sync Job created": 5.5,
        "nova-db-sync pod running": 7.0,
        "db-sync Job complete": 30.0,
        "db-sync done": 30.4,
        "Deployment nova created": 31.0,
        "nova pod running": 33.0,
        "nova pod answers HTTP": 41.0,
        "nova pod Ready": 50.0,
        "Deployment nova available": 52.0,
        "Deployment nova-scheduler available": 45.0,
        "Nova Ready": 54.5,
    }
    gaps = dict(real.gaps(stages))
    assert gaps["MariaDB objects Ready -> db-sync Job created"] == 0.5
    assert gaps["db-sync pod running -> Job complete"] == 23.0
    assert gaps["nova: answers HTTP -> pod Ready"] == 9.0
    assert gaps["nova: pod Ready -> available"] == 2.0
    assert gaps["last Deployment available -> Nova Ready"] == 2.5
    assert not any(label.startswith("nova-metadata") for label in gaps)  # nothing seen of it


def test_hogs_run_for_the_block_and_are_reaped_after_it() -> None:
    with hogs.running(2) as running:
        assert len(running) == 2
        assert all(h.poll() is None for h in running)
    assert all(h.returncode is not None for h in running)
    assert (os.cpu_count() or 2) == hogs.DEFAULT
    assert hogs.load_average() >= 0.0


@pytest.mark.parametrize(("argv", "count"), [([], 0), (["--hogs"], hogs.DEFAULT), (["--hogs", "3"], 3)])
def test_bench_real_takes_hogs_none_one_per_core_or_a_count(
    argv: list[str], count: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[int] = []

    def fake_run(out: Any, timeout: float, hog_count: int) -> dict[str, Any]:
        asked.append(hog_count)
        raise SystemExit(0)

    monkeypatch.setattr(real, "run", fake_run)
    with pytest.raises(SystemExit):
        main(["real", *argv])
    assert asked == [count]


def test_the_create_waits_for_the_operators_controllers(tmp_path: Any) -> None:
    log = tmp_path / "operator.log"
    log.write_text('{"msg": "became leader"}\n')
    with pytest.raises(SystemExit, match="did not start its controllers"):
        real._wait_for_controllers(log, time.monotonic() + 0.3)
    log.write_text('{"msg": "became leader"}\n{"msg": "starting controllers", "controllers": ["nova"]}\n')
    real._wait_for_controllers(log, time.monotonic() + 0.3)  # returns at once


class _Kube:
    """Answers GETs from a dict of path -> object (a missing path raises, as a 404 does)."""

    def __init__(self, objects: dict[str, dict[str, Any]]) -> None:
        self.objects = objects

    def get(self, path: str) -> dict[str, Any]:
        return self.objects[path]


def test_the_create_waits_for_mariadb_ready_and_the_broker_available() -> None:
    mariadb, rabbit = (path for path, _ in real.DEPENDENCIES)
    kube = _Kube({mariadb: _ready(), rabbit: _ready("AllReplicasReady")})
    with pytest.raises(SystemExit, match="dependencies are not Ready"):
        real._wait_for_dependencies(kube, time.monotonic() + 0.3)
    kube.objects[rabbit] = _ready("ClusterAvailable")
    real._wait_for_dependencies(kube, time.monotonic() + 0.3)


def test_an_error_stage_keeps_its_message_and_other_stages_none() -> None:
    pool = {
        "status": {
            "conditions": [
                {
                    "type": "ServicesReady",
                    "status": "False",
                    "reason": "ComputeAPIError",
                    "message": "GET x: 503",
                },
                {
                    "type": "AggregatesReady",
                    "status": "False",
                    "reason": "WaitingForServices",
                    "message": "w",
                },
                {"type": "DaemonSetReady", "status": "True", "reason": "DaemonSetReady", "message": "ok"},
            ]
        }
    }
    nova = {
        "status": {"conditions": [{"type": "NovaAPIReady", "status": "False", "reason": "KeystoneError"}]}
    }
    found = real.error_messages(real.Snapshot(nova=nova, pool=pool))
    assert found == {
        "pool ServicesReady False ComputeAPIError": "GET x: 503",
        "Nova NovaAPIReady False KeystoneError": "",
    }
    assert "pool ServicesReady False ComputeAPIError" in real.seen(real.Snapshot(nova=nova, pool=pool))


def test_restarts_name_only_the_pods_whose_containers_restarted() -> None:
    def pod(name: str, *counts: int) -> dict[str, Any]:
        return {
            "metadata": {"name": name},
            "status": {"containerStatuses": [{"restartCount": c} for c in counts]},
        }

    assert real.restarts([pod("a", 0, 0), pod("b", 1, 2), {"metadata": {"name": "c"}, "status": {}}]) == {
        "b": 3
    }


def test_each_discovery_jobs_creation_and_end_are_stages() -> None:
    def job(made: str, *ended: str) -> dict[str, Any]:
        conditions = [{"type": e, "status": "True", "reason": "R"} for e in ended]
        return {"metadata": {"creationTimestamp": made}, "status": {"conditions": conditions}}

    name = f"{real.NOVA}-discover-hosts"
    first = real.seen(real.Snapshot(nova=None, pool=None, jobs={name: job("T1", "Complete")}))
    assert "discover-hosts Job created T1" in first
    assert "discover-hosts Job created T1: complete" in first
    assert not any("failed" in s for s in first)
    second = real.seen(real.Snapshot(nova=None, pool=None, jobs={name: job("T2")}))
    assert "discover-hosts Job created T2" in second
    assert not any(s.startswith("discover-hosts") for s in real.seen(real.Snapshot(nova=None, pool=None)))


def test_every_containers_log_is_kept_in_a_file_of_its_own(tmp_path: Any) -> None:
    where = tmp_path / "bench-real-logs"
    where.mkdir()
    (where / "from-an-earlier-run_x.log").write_text("old\n")
    pods = [
        {
            "metadata": {"name": "nova-7f"},
            "spec": {"containers": [{"name": "nova-api"}, {"name": "sidecar"}]},
        },
        {"metadata": {"name": "rack7-abc"}, "spec": {"containers": [{"name": "nova-compute"}]}},
    ]
    logs = {("nova-7f", "nova-api"): "a 500 in 60012 msecs\ndone\n", ("nova-7f", "sidecar"): ""}
    asked: list[tuple[str, str]] = []

    def read(pod: dict[str, Any], container: str) -> str:
        key = (pod["metadata"]["name"], container)
        asked.append(key)
        if key not in logs:
            raise KubeError(400, "container is waiting to start")
        return logs[key]

    assert real.keep_logs(read, pods, where) == where
    assert sorted(p.name for p in where.iterdir()) == [
        "nova-7f_nova-api.log",
        "nova-7f_sidecar.log",
        "rack7-abc_nova-compute.log",
    ]
    assert (where / "nova-7f_nova-api.log").read_text() == "a 500 in 60012 msecs\ndone\n"
    assert "container is waiting to start" in (where / "rack7-abc_nova-compute.log").read_text()
    assert asked == [("nova-7f", "nova-api"), ("nova-7f", "sidecar"), ("rack7-abc", "nova-compute")]
