"""A pool's pods as hints: which events wake which pool, and when a Pending node is looked at again."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from nova_operator.kube.types import Object
from nova_operator.reconcilers.compute import pool_pods
from nova_operator.renderers import compute_pool
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.request import Request

NOW = datetime(2026, 12, 6, 16, 0, 0, tzinfo=UTC)


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(
    node: str = "n1",
    *,
    pool: str = "pool-a",
    ready: bool = True,
    since: datetime = NOW,
    phase: str = "Running",
    labels: dict[str, str] | None = None,
) -> Object:
    conds = [{"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": _stamp(since)}]
    return {
        "metadata": {
            "name": f"{pool}-{node}",
            "namespace": "ns",
            "labels": labels or compute_pool.labels(pool),
        },
        "spec": {"nodeName": node},
        "status": {"phase": phase, "conditions": conds},
    }


def pool_obj(name: str, entries: list[tuple[str, str]]) -> Object:
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "status": {"nodes": [{"name": n, "phase": ph} for n, ph in entries]},
    }


def cache_of(*pools: Object) -> Cache:
    cache = Cache()
    for p in pools:
        cache.upsert(p)
    return cache


def test_only_a_pool_pod_turning_ready_or_going_is_an_event() -> None:
    ev = pool_pods.EVENTS
    assert ev.update(pod(ready=False), pod(ready=True))
    assert not ev.update(pod(ready=True), pod(ready=True))  # a status write that changes nothing here
    assert not ev.update(pod(ready=True), pod(ready=False))
    assert ev.update(pod(phase="Running"), pod(phase="Succeeded", ready=False))
    assert ev.create(pod(ready=True))
    assert not ev.create(pod(ready=False))
    assert ev.delete(pod())
    nova_labels = {"app.kubernetes.io/managed-by": "nova-operator", "app.kubernetes.io/instance": "x"}
    nova_pod = pod(labels=nova_labels)
    assert not ev.update(pod(ready=False, labels=nova_pod["metadata"]["labels"]), nova_pod)
    assert not ev.delete(nova_pod)


def test_a_ready_pod_wakes_its_pool_only_for_a_pending_node_and_a_gone_pod_only_for_a_releasing_one() -> None:
    cache = cache_of(pool_obj("pool-a", [("n1", "Pending"), ("n2", "Active"), ("n3", "Releasing")]))
    wake = pool_pods.waking(cache)
    assert list(wake(pod("n1"))) == [Request("ns", "pool-a")]
    assert list(wake(pod("n2"))) == []  # Active: nothing waits on its pod
    assert list(wake(pod("n3", ready=False, phase="Succeeded"))) == [Request("ns", "pool-a")]
    assert list(wake(pod("n1", ready=False, phase="Failed"))) == []  # a Pending node's pod finishing
    assert list(wake(pod("n9"))) == []  # a node the pool does not hold
    assert list(wake(pod("n1", pool="pool-b"))) == []  # a pool the cache does not know


def test_a_ready_pod_wakes_its_pool_for_an_active_node_whose_service_it_last_saw_down() -> None:
    pool = pool_obj("pool-a", [("n1", "Active"), ("n2", "Active"), ("n3", "Active")])
    pool["status"]["nodes"][0]["serviceState"] = "down"
    pool["status"]["nodes"][1]["serviceState"] = "up"
    wake = pool_pods.waking(cache_of(pool))
    assert list(wake(pod("n1"))) == [Request("ns", "pool-a")]  # its nova-compute is back: it reports soon
    assert list(wake(pod("n2"))) == []  # up: a converged node's pod wakes nobody
    assert list(wake(pod("n3"))) == []  # no service state seen
    assert list(wake(pod("n1", ready=False, phase="Failed"))) == []  # only Ready counts for it
    assert pool_pods.returning(pool["status"]["nodes"]) == ["n1"]
    draining = {"name": "n4", "phase": "Draining", "serviceState": "down"}
    assert pool_pods.returning([draining]) == []  # a leaving node's service is not waited on


def test_a_deleted_pod_counts_as_gone_not_ready() -> None:
    deleting = pod("n3")
    deleting["metadata"]["deletionTimestamp"] = _stamp(NOW)
    assert not pool_pods.is_ready(deleting)
    cache = cache_of(pool_obj("pool-a", [("n3", "Releasing")]))
    assert list(pool_pods.waking(cache)(deleting)) == [Request("ns", "pool-a")]


def _at(seconds: float) -> list[Object]:
    return [pod("n1", since=NOW - timedelta(seconds=seconds))]


def test_recheck_is_a_quarter_of_the_age_since_ready_until_that_reaches_the_pending_poll() -> None:
    waiting = ["n1"]
    ages = (0, 1, 4, 8, 16, 20, 30, 45, 100, 119, 120, 300)
    got = {age: pool_pods.recheck_after(_at(age), waiting, NOW, 30.0) for age in ages}
    assert got == {
        0: 1.0,
        1: 1.0,
        4: 1.0,
        8: 2.0,
        16: 4.0,  # a service registering 17-20 s after Ready is seen by 20 s, not at 30 s
        20: 5.0,
        30: 7.5,  # still looking past the first Pending poll
        45: 11.25,
        100: 25.0,
        119: 29.75,
        120: None,  # the gap would be the poll's: the poll covers it
        300: None,
    }


def test_recheck_gaps_grow_by_a_quarter_so_a_registration_is_seen_at_most_a_quarter_late() -> None:
    age, looks = 0.0, []
    while (gap := pool_pods.recheck_after(_at(age), ["n1"], NOW, 30.0)) is not None:
        age += gap
        looks.append(age)
    assert len(looks) < 30  # a bounded number of extra passes per join
    assert looks[-1] >= 120.0
    for before, after in itertools.pairwise(looks):  # (+1: the stamp's whole seconds)
        assert after - before <= max(pool_pods.MIN_RECHECK, (before + 1) * pool_pods.RECHECK_SHARE)


def test_recheck_only_for_waiting_nodes_with_a_ready_pod() -> None:
    pods: list[Any] = [
        pod("n1", since=NOW - timedelta(seconds=8)),
        pod("n2", since=NOW - timedelta(seconds=3)),
        pod("n3", ready=False),
    ]
    assert pool_pods.recheck_after(pods, ["n1"], NOW, 30.0) == 2.0
    assert pool_pods.recheck_after(pods, ["n1", "n2"], NOW, 30.0) == 1.0  # the soonest
    assert pool_pods.recheck_after(pods, ["n3"], NOW, 30.0) is None  # not Ready: nothing started
    assert pool_pods.recheck_after(pods, [], NOW, 30.0) is None
    ahead = [pod("n1", since=NOW + timedelta(seconds=2))]  # the kubelet's clock a little ahead
    assert pool_pods.recheck_after(ahead, ["n1"], NOW, 30.0) == 1.0
    no_stamp = pod("n1")
    del no_stamp["status"]["conditions"][0]["lastTransitionTime"]
    assert pool_pods.recheck_after([no_stamp], ["n1"], NOW, 30.0) is None


def _nova(status: str, since: datetime) -> Object:
    ready = {"type": "Ready", "status": status, "lastTransitionTime": _stamp(since)}
    return {"status": {"conditions": [ready]}}


def test_a_pod_ready_before_its_nova_counts_from_the_novas_ready() -> None:
    long_ago = _at(100)  # Ready while the conductor was not serving yet: nova-compute could not register
    assert pool_pods.recheck_after(long_ago, ["n1"], NOW, 30.0) == 25.0
    nova_ready = NOW - timedelta(seconds=8)
    assert pool_pods.recheck_after(long_ago, ["n1"], NOW, 30.0, nova_ready) == 2.0
    assert pool_pods.recheck_after(_at(600), ["n1"], NOW, 30.0, nova_ready) == 2.0  # past the poll: again
    # a pod Ready after the Nova counts from its own Ready
    assert pool_pods.recheck_after(_at(4), ["n1"], NOW, 30.0, NOW - timedelta(seconds=300)) == 1.0
    assert pool_pods.recheck_after(_at(100), ["n1"], NOW, 30.0, NOW - timedelta(seconds=300)) == 25.0


def test_the_novas_ready_time_is_its_ready_conditions_transition_while_true() -> None:
    at = NOW - timedelta(seconds=8)
    assert pool_pods.nova_ready_since(_nova("True", at)) == at
    assert pool_pods.nova_ready_since(_nova("False", at)) is None
    assert pool_pods.nova_ready_since({"status": {}}) is None
    assert pool_pods.nova_ready_since(None) is None
