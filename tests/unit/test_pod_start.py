"""``decisions.pod_start``: which pod of a workload cannot start, and how a waiting step names it."""

from __future__ import annotations

from typing import Any

import pytest

from nova_operator.decisions import pod_start

SECRET = "hunter2-do-not-show"


def pod(
    name: str,
    *containers: tuple[str, str | None, str],
    init: tuple[tuple[str, str | None, str], ...] = (),
    phase: str = "Pending",
    deleting: bool = False,
) -> dict[str, Any]:
    """A pod whose containers are (name, waiting reason or None for running, image)."""

    def statuses(items: tuple[tuple[str, str | None, str], ...]) -> list[dict[str, Any]]:
        return [
            {
                "name": c,
                "image": image,
                "state": (
                    {"waiting": {"reason": reason, "message": f"couldn't find key password: {SECRET}"}}
                    if reason
                    else {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
                ),
            }
            for c, reason, image in items
        ]

    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status: dict[str, Any] = {"phase": phase, "containerStatuses": statuses(containers)}
    if init:
        status["initContainerStatuses"] = statuses(init)
    return {"metadata": meta, "status": status}


@pytest.mark.parametrize("reason", sorted(pod_start.STUCK_REASONS))
def test_each_reason_the_kubelet_gives_up_with_names_the_pod_reason_and_image(reason: str) -> None:
    pods = [pod("nova-db-expand-x7k2p", ("c", reason, "nova:2026.1"))]
    message = pod_start.annotate("Expand phase running", pods)
    assert message == (
        f"Expand phase running: pod nova-db-expand-x7k2p cannot start: {reason} (image nova:2026.1)"
    )


@pytest.mark.parametrize("reason", ["ContainerCreating", "PodInitializing", None])
def test_a_pod_on_its_way_is_not_named(reason: str | None) -> None:
    assert pod_start.annotate("db_sync job is running", [pod("p", ("c", reason, "nova:1"))]) == (
        "db_sync job is running"
    )


def test_no_pods_leave_the_message_as_it_was() -> None:
    assert pod_start.annotate("waiting", []) == "waiting"
    assert pod_start.first_stuck([]) is None


def test_the_kubelets_message_never_reaches_the_text() -> None:
    stuck = pod("p", ("c", "CreateContainerConfigError", "nova:1"))
    message = pod_start.annotate("waiting", [stuck])
    assert SECRET not in message
    assert "password" not in message
    assert message == "waiting: pod p cannot start: CreateContainerConfigError (image nova:1)"


def test_the_first_pod_by_name_is_named_whatever_the_order_given() -> None:
    pods = [pod("b", ("c", "ErrImagePull", "x:1")), pod("a", ("c", "CrashLoopBackOff", "x:2"))]
    assert pod_start.first_stuck(pods) == pod_start.Stuck("a", "c", "CrashLoopBackOff", "x:2")
    assert pod_start.first_stuck(list(reversed(pods))) == pod_start.Stuck("a", "c", "CrashLoopBackOff", "x:2")


def test_a_healthy_pod_before_a_stuck_one_does_not_hide_it() -> None:
    pods = [pod("a", ("c", None, "x:1")), pod("b", ("c", "ImagePullBackOff", "x:1"))]
    assert str(pod_start.first_stuck(pods)) == "pod b cannot start: ImagePullBackOff (image x:1)"


def test_an_init_container_is_named_before_the_main_ones() -> None:
    stuck = pod("p", ("main", "ErrImagePull", "x:1"), init=(("wait", "InvalidImageName", "bad image"),))
    assert pod_start.first_stuck([stuck]) == pod_start.Stuck("p", "wait", "InvalidImageName", "bad image")


def test_a_second_container_that_cannot_start_is_found() -> None:
    stuck = pod("p", ("a", None, "x:1"), ("b", "CreateContainerError", "y:1"))
    assert pod_start.stuck_containers(stuck) == (("b", "CreateContainerError", "y:1"),)


def test_finished_or_deleted_pods_are_not_named() -> None:
    assert pod_start.first_stuck([pod("p", ("c", "ErrImagePull", "x"), phase="Failed")]) is None
    assert pod_start.first_stuck([pod("p", ("c", "ErrImagePull", "x"), phase="Succeeded")]) is None
    assert pod_start.first_stuck([pod("p", ("c", "ErrImagePull", "x"), deleting=True)]) is None


def test_a_pod_without_status_or_image_is_read_without_failing() -> None:
    assert pod_start.stuck_containers({"metadata": {"name": "p"}}) == ()
    container = {"name": "c", "state": {"waiting": {"reason": "ErrImagePull"}}}
    bare = {"metadata": {"name": "p"}, "status": {"containerStatuses": [container]}}
    assert pod_start.annotate("w", [bare]) == "w: pod p cannot start: ErrImagePull"


def test_a_long_image_reference_is_cut() -> None:
    image = "registry.example/" + "x" * 400
    stuck = pod_start.first_stuck([pod("p", ("c", "ErrImagePull", image))])
    assert stuck is not None
    assert len(stuck.image) == 200
    assert image.startswith(stuck.image)


def test_the_text_is_the_same_on_every_read_of_the_same_state() -> None:
    pods = [pod("p", ("c", "ImagePullBackOff", "x:1"))]
    assert pod_start.annotate("m", pods) == pod_start.annotate("m", [dict(p) for p in pods])
