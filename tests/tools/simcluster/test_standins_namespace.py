"""Stand-ins limited to one namespace act only there (a test's own stand-ins on a shared control plane)."""

from __future__ import annotations

from typing import Any, cast

from simcluster.client.asynckube import AsyncKube
from simcluster.standins.runner import StandIns


def _obj(namespace: str, name: str) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name, "resourceVersion": "1"}}


def _queued(standins: StandIns) -> set[tuple[str, str, str]]:
    pending = standins.queue._queue
    return {pending.get_nowait() for _ in range(pending.qsize())}


def test_a_namespaced_runner_queues_only_its_namespace() -> None:
    standins = StandIns(cast(AsyncKube, None), namespace="mine")
    store = standins.stores["rabbitmqclusters"]
    for ns in ("mine", "left-by-another-test"):
        standins._changed(store, _obj(ns, "rabbitmq"), False)
    assert _queued(standins) == {("rabbitmqclusters", "mine", "rabbitmq")}


def test_an_unlimited_runner_queues_every_namespace() -> None:
    standins = StandIns(cast(AsyncKube, None))
    store = standins.stores["rabbitmqclusters"]
    for ns in ("a", "b"):
        standins._changed(store, _obj(ns, "rabbitmq"), False)
    assert _queued(standins) == {("rabbitmqclusters", "a", "rabbitmq"), ("rabbitmqclusters", "b", "rabbitmq")}
