"""``PodLogs``: each container instance of the operator's pods is followed once (a restart again),
its lines land in one file after the pod's name, and the changes worth printing are said once."""

from __future__ import annotations

import pathlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from simcluster.client.kube import Kube, KubeError
from simcluster.realtier.pod_logs import PodLogs


def _pod(
    name: str, *, node: str = "", state: str = "", ready: bool = False, restarts: int = 0
) -> dict[str, Any]:
    status: dict[str, Any] = {"name": "manager", "ready": ready, "restartCount": restarts}
    if state:
        status["state"] = {state: {}}
    if restarts:
        status["lastState"] = {"terminated": {"reason": "OOMKilled", "exitCode": 137}}
    return {
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": {"nodeName": node} if node else {},
        "status": {"containerStatuses": [status] if state else []},
    }


class FakeKube(Kube):
    def __init__(self) -> None:
        self.pods: list[dict[str, Any]] = []
        self.streams: list[str] = []
        self.queries: list[str] = []
        self.lock = threading.Lock()

    def get(self, path: str) -> dict[str, Any]:
        self.queries.append(path)
        return {"items": self.pods}

    def lines(self, path: str) -> Iterator[str]:
        with self.lock:
            self.streams.append(path)
            count = len(self.streams)
        if "gone" in path:
            raise KubeError(404, "pods gone not found")
        yield f"line one of stream {count}"
        yield "line two"


def _wait_for(check: Any) -> None:
    deadline = time.monotonic() + 10
    while not check():
        assert time.monotonic() < deadline, "not within 10 s"
        time.sleep(0.01)


def test_each_container_instance_is_followed_once_into_one_file(tmp_path: pathlib.Path) -> None:
    kube = FakeKube()
    logs = PodLogs(kube, "nova-system", "app=x", "manager", tmp_path / "operator.log")
    kube.pods = [_pod("op-a")]  # not scheduled: nothing to follow yet
    assert logs.poll() == []
    assert kube.streams == []
    assert "labelSelector=app%3Dx" in kube.queries[-1]
    kube.pods = [_pod("op-a", node="compute-0", state="waiting")]
    assert logs.poll() == ["operator pod op-a scheduled on compute-0"]
    assert kube.streams == []  # no container has run yet
    kube.pods = [_pod("op-a", node="compute-0", state="running", ready=True)]
    assert logs.poll() == ["operator pod op-a Ready on compute-0"]
    assert logs.poll() == []  # said once, followed once
    _wait_for(lambda: "line two" in logs.output())
    (stream,) = kube.streams
    assert stream.startswith("/api/v1/namespaces/nova-system/pods/op-a/log?")
    assert "container=manager" in stream
    assert "follow=true" in stream
    assert logs.output().splitlines() == ["op-a line one of stream 1", "op-a line two"]
    assert logs.alive  # the kubelet restarts a pod that ends: never the end of make run


def test_a_restart_is_said_with_its_reason_and_its_new_container_followed(tmp_path: pathlib.Path) -> None:
    kube = FakeKube()
    logs = PodLogs(kube, "ns", "app=x", "manager", tmp_path / "operator.log")
    kube.pods = [_pod("op-a", node="n1", state="running", ready=True)]
    logs.poll()
    _wait_for(lambda: len(kube.streams) == 1)
    kube.pods = [_pod("op-a", node="n1", state="running", ready=False, restarts=1)]
    assert logs.poll() == ["operator pod op-a restarted (1): OOMKilled, exit code 137"]
    _wait_for(lambda: len(kube.streams) == 2)
    _wait_for(lambda: "stream 2" in logs.output())


def test_a_stream_that_fails_is_written_down(tmp_path: pathlib.Path) -> None:
    kube = FakeKube()
    logs = PodLogs(kube, "ns", "app=x", "manager", tmp_path / "operator.log")
    kube.pods = [_pod("gone", node="n1", state="terminated")]
    logs.poll()
    _wait_for(lambda: "stream ended" in logs.output())
    assert "gone (its log stream ended" in logs.output()
