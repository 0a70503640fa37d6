"""The decision of the ServiceRecords step: which of a Nova's service records are stale (issue 24)."""

from __future__ import annotations

from typing import Any

import pytest

from nova_operator.decisions.service_records import (
    candidates,
    judge,
    live,
    live_hosts,
    looks_like_pod_of,
    pod_hostname,
    summary,
)
from nova_operator.models.nova import DOWN_HOSTS_SHOWN
from nova_operator.openstack import ComputeService

SCHEDULER_POD = "nova-scheduler-7d9f8c6b5d-x2x4z"
CONDUCTOR_POD = "nova-conductor-5c4b7f9d8-q8w2m"


def record(host: str, binary: str = "nova-scheduler", state: str = "down", id: str = "") -> ComputeService:
    return ComputeService(
        id=id or f"id-{binary}-{host}",
        host=host,
        status="enabled",
        state=state,
        disabled_reason="",
        binary=binary,
    )


def pod(name: str, component: str, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"app.kubernetes.io/component": component}}
    if extra.get("terminating"):
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {}, "status": {"phase": extra.get("phase", "Running")}}


@pytest.mark.parametrize(
    ("deployment", "host", "expected"),
    [
        ("nova-scheduler", SCHEDULER_POD, True),
        ("nova-conductor", CONDUCTOR_POD, True),
        ("nova", "nova-6b8d9f7c4-zt5kq", True),  # the API Deployment is {name}
        # the generated name cut to fit 63 characters runs a part of the hash into the suffix
        ("n" * 41 + "-conductor", "n" * 41 + "-conductor-5c4b7fx2x4z", True),
        # Nova "nova" must not take another Nova's pods: "nova-scheduler-b"'s scheduler, "nova-b"'s API
        ("nova-scheduler", "nova-scheduler-b-scheduler-7d9f8c6b5d-x2x4z", False),
        ("nova", "nova-b-6b8d9f7c4-zt5kq", False),
        ("nova", SCHEDULER_POD, False),  # its own scheduler is not its API
        ("nova-scheduler", "nova-scheduler", False),
        ("nova-scheduler", "ctl1", False),  # a scheduler somebody runs by hand
        ("nova-scheduler", "nova-scheduler-7d9f8c6b5d-aaaaa", False),  # vowels: never generated
        ("nova-scheduler", "nova-scheduler-7D9F8C6B5D-X2X4Z", False),
        ("nova-scheduler", "nova-scheduler-7d9f8c6b5d-x2x4z.example.org", False),
    ],
)
def test_a_record_is_only_ever_this_roles_when_its_host_is_shaped_like_its_pods(
    deployment: str, host: str, expected: bool
) -> None:
    assert looks_like_pod_of(deployment, host) is expected


def test_the_hostname_is_the_pods_name_or_its_spec_hostname_cut_as_the_kubelet_does() -> None:
    assert pod_hostname(pod(SCHEDULER_POD, "scheduler")) == SCHEDULER_POD
    assert pod_hostname({"metadata": {"name": "x"}, "spec": {"hostname": "h"}}) == "h"
    long = "a" * 62 + "-b"
    assert pod_hostname({"metadata": {"name": long}}) == "a" * 62


def test_terminating_and_finished_pods_are_not_live() -> None:
    assert live(pod("p", "scheduler"))
    assert live(pod("p", "scheduler", phase="Pending"))
    assert not live(pod("p", "scheduler", terminating=True))
    assert not live(pod("p", "scheduler", phase="Failed"))
    assert not live(pod("p", "scheduler", phase="Succeeded"))
    hosts = live_hosts(
        [
            pod(SCHEDULER_POD, "scheduler"),
            pod(CONDUCTOR_POD, "conductor", terminating=True),
            pod("nova-db-sync-abcde", "db-sync"),
            {"metadata": {"name": "unlabelled"}},
        ]
    )
    assert hosts == {"scheduler": frozenset({SCHEDULER_POD}), "db-sync": frozenset({"nova-db-sync-abcde"})}


def test_only_the_roles_binaries_with_an_id_and_a_known_state_are_candidates() -> None:
    records = [
        record(SCHEDULER_POD),
        record(CONDUCTOR_POD, "nova-conductor"),
        record("nova-metadata-6b8d9f7c4-zt5kq", "nova-metadata"),
        record("nova-6b8d9f7c4-zt5kq", "nova-osapi_compute"),
        record("nova-scheduler-7d9f8c6b5d-x2x4z", "nova-compute"),  # a pool's, whatever its host
        record("nova-conductor-5c4b7f9d8-zzzzz", "nova-conductor", state="UNKNOWN", id="x"),  # down cell
        ComputeService("", CONDUCTOR_POD, "UNKNOWN", "", "", "nova-conductor"),
        record(CONDUCTOR_POD, "nova-scheduler"),  # a conductor's hostname is not a scheduler pod's
        record("nova-novncproxy-6b8d9f7c4-zt5kq", "nova-novncproxy"),  # registers none; never touched
    ]
    assert [(r.binary, r.host) for r in candidates("nova", records)] == [
        ("nova-scheduler", SCHEDULER_POD),
        ("nova-conductor", CONDUCTOR_POD),
        ("nova-metadata", "nova-metadata-6b8d9f7c4-zt5kq"),
        ("nova-osapi_compute", "nova-6b8d9f7c4-zt5kq"),
    ]


def test_down_records_of_gone_pods_are_stale_up_ones_wait_and_live_pods_records_are_kept() -> None:
    gone_down = record("nova-scheduler-7d9f8c6b5d-zzzzz")
    gone_up = record("nova-scheduler-7d9f8c6b5d-bbbbb", state="up")
    live_down = record(SCHEDULER_POD)  # a live pod that cannot heartbeat: sick, not stale
    live_up = record(CONDUCTOR_POD, "nova-conductor", state="up")
    going_down = record("nova-conductor-5c4b7f9d8-ccccc", "nova-conductor")
    going_up = record("nova-conductor-5c4b7f9d8-ddddd", "nova-conductor", state="up")
    failed_down = record("nova-conductor-5c4b7f9d8-wwwww", "nova-conductor")
    compute = record("nova-scheduler-7d9f8c6b5d-fffff", "nova-compute")
    foreign = record("other-scheduler-7d9f8c6b5d-ggggg")
    pods = [
        pod(SCHEDULER_POD, "scheduler"),
        pod(CONDUCTOR_POD, "conductor"),
        pod("nova-conductor-5c4b7f9d8-ccccc", "conductor", terminating=True),
        pod("nova-conductor-5c4b7f9d8-ddddd", "conductor", terminating=True),
        pod("nova-conductor-5c4b7f9d8-wwwww", "conductor", phase="Failed"),
    ]
    records = [gone_down, gone_up, live_down, live_up, going_down, going_up, failed_down, compute, foreign]
    verdict = judge("nova", records, live_hosts(pods))
    assert verdict.stale == (gone_down, going_down, failed_down)
    assert verdict.waiting == (gone_up, going_up)


def test_a_pod_counts_only_for_its_own_role() -> None:
    """A scheduler record whose host is (impossibly) a live conductor pod's is still not a scheduler's."""
    shared = "nova-scheduler-7d9f8c6b5d-x2x4z"
    verdict = judge("nova", [record(shared)], live_hosts([pod(shared, "conductor")]))
    assert [r.host for r in verdict.stale] == [shared]


def test_nothing_is_stale_without_records_of_this_nova() -> None:
    verdict = judge("nova", [record("nova-x-scheduler-7d9f8c6b5d-x2x4z")], {})
    assert verdict.stale == ()
    assert verdict.waiting == ()


def test_the_summary_counts_up_and_down_per_binary_and_names_the_down_hosts() -> None:
    records = [
        record("node-2", "nova-compute", "down"),
        record("node-1", "nova-compute", "up"),
        record("node-0", "nova-compute", "down"),
        record("ctl1", "nova-scheduler", "up"),
        ComputeService("", "cell2-host", "UNKNOWN", "", "", "nova-conductor"),  # a cell that did not answer
    ]
    assert summary(records) == {
        "up": 2,
        "down": 2,
        "binaries": [
            {"binary": "nova-compute", "up": 1, "down": 2, "downHosts": ["node-0", "node-2"]},
            {"binary": "nova-scheduler", "up": 1, "down": 0},
        ],
    }
    assert summary([]) == {"up": 0, "down": 0, "binaries": []}


def test_the_summary_names_at_most_twenty_down_hosts_and_counts_them_all() -> None:
    down = [record(f"node-{n:04d}", "nova-compute", "down") for n in range(3000)]
    (compute,) = summary(down)["binaries"]
    assert compute["down"] == 3000
    assert compute["downHosts"] == [f"node-{n:04d}" for n in range(DOWN_HOSTS_SHOWN)]
    assert DOWN_HOSTS_SHOWN == 20
