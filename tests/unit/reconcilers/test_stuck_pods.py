"""``reconcilers.stuck_pods``: what the Pod cache keeps, which pod events wake an owner, and whose pods a
step reads."""

from __future__ import annotations

from typing import Any

from nova_operator import naming
from nova_operator.kube.types import Object
from nova_operator.reconcilers import stuck_pods
from nova_operator.reconcilers.compute.controller import pod_pools
from nova_operator.renderers import compute_pool
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.request import Request
from nova_operator.runtime.transform import Transform

SECRET = "s3cr3t-value"


def pod(
    name: str,
    reason: str | None = None,
    *,
    labels: dict[str, str] | None = None,
    owner_uid: str = "job-uid",
    rv: str = "1",
) -> Object:
    state: dict[str, Any] = (
        {"waiting": {"reason": reason, "message": f"secret key password={SECRET} not found"}}
        if reason
        else {"running": {}}
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "resourceVersion": rv,
            "labels": labels if labels is not None else naming.labels("nova", "db-sync"),
            "ownerReferences": [{"kind": "Job", "name": "j", "uid": owner_uid, "controller": True}],
        },
        "spec": {"containers": [{"name": "c", "env": [{"name": "PASSWORD", "value": SECRET}]}]},
        "status": {
            "phase": "Pending",
            "containerStatuses": [{"name": "c", "image": "nova:2026.1", "ready": False, "state": state}],
        },
    }


def cache_of(*objs: Object, name: str = "pods") -> Cache:
    cache = Cache(name)
    for obj in objs:
        cache.upsert(obj)
    return cache


def test_the_cache_keeps_the_waiting_reason_and_image_but_no_message_spec_or_env() -> None:
    transform = Transform()
    transform.keep(stuck_pods.KEPT)
    kept = transform(pod("p", "CreateContainerConfigError"))
    assert SECRET not in repr(kept)
    assert "spec" not in kept
    status = kept["status"]["containerStatuses"][0]
    assert status == {
        "name": "c",
        "image": "nova:2026.1",
        "state": {"waiting": {"reason": "CreateContainerConfigError"}},
    }
    assert kept["metadata"]["name"] == "p"


def test_the_selector_names_both_controllers_pods_and_no_other() -> None:
    assert stuck_pods.SELECTOR == "app.kubernetes.io/managed-by in (nova-operator,novacompute-operator)"


def test_a_pod_event_wakes_only_when_it_starts_changes_or_ends_a_cannot_start() -> None:
    events = stuck_pods.EVENTS
    assert not events.create(pod("p"))
    assert events.create(pod("p", "ErrImagePull"))
    assert not events.update(pod("p", rv="1"), pod("p", rv="2"))  # running, still running
    assert events.update(pod("p", rv="1"), pod("p", "ErrImagePull", rv="2"))
    assert events.update(pod("p", "ErrImagePull", rv="1"), pod("p", "ImagePullBackOff", rv="2"))
    assert not events.update(pod("p", "ImagePullBackOff", rv="1"), pod("p", "ImagePullBackOff", rv="2"))
    assert events.update(pod("p", "ImagePullBackOff", rv="1"), pod("p", rv="2"))
    assert events.delete(pod("p", "CrashLoopBackOff"))
    assert not events.delete(pod("p"))


def test_a_nova_pod_wakes_its_nova_and_a_pool_pod_or_an_unknown_one_does_not() -> None:
    novas = cache_of({"metadata": {"name": "nova", "namespace": "ns"}}, name="novas")
    mapper = stuck_pods.by_instance(novas, naming.MANAGED_BY, skip_component=compute_pool.DISCOVER_HOSTS)
    assert list(mapper(pod("p", "ErrImagePull"))) == [Request("ns", "nova")]
    assert list(mapper(pod("p", labels=naming.labels("other", "db-sync")))) == []  # no such Nova
    assert list(mapper(pod("p", labels=compute_pool.labels("nova")))) == []  # the pool's
    assert list(mapper(pod("p", labels=naming.labels("nova", compute_pool.DISCOVER_HOSTS)))) == []


def test_a_pool_pod_wakes_its_pool_and_a_discovery_pod_the_pools_waiting_on_it() -> None:
    pools = cache_of(
        {"metadata": {"name": "pool-a", "namespace": "ns"}, "spec": {"novaRef": {"name": "nova"}}},
        name="pools",
    )
    waiting = {"metadata": {"name": "pool-b", "namespace": "ns"}, "status": {"nodes": [{"phase": "Pending"}]}}
    mapper = pod_pools(pools, lambda ns, nova: [waiting] if (ns, nova) == ("ns", "nova") else [])
    assert list(mapper(pod("p", labels=compute_pool.labels("pool-a")))) == [Request("ns", "pool-a")]
    assert list(mapper(pod("p", labels=naming.labels("nova", compute_pool.DISCOVER_HOSTS)))) == [
        Request("ns", "pool-b")
    ]
    assert list(mapper(pod("p", labels=compute_pool.labels("gone")))) == []


def test_a_jobs_pods_are_its_own_and_a_deployments_those_its_selector_matches() -> None:
    api_labels = {**naming.labels("nova", "api")}
    cache = cache_of(
        pod("mine", owner_uid="u1"),
        pod("other", owner_uid="u2"),
        pod("api-1", labels=api_labels, owner_uid="rs"),
    )
    job = {"metadata": {"name": "j", "namespace": "ns", "uid": "u1"}}
    assert [p["metadata"]["name"] for p in stuck_pods.of_owner(cache, job)] == ["mine"]
    assert stuck_pods.of_owner(None, job) == []
    assert stuck_pods.of_owner(cache, None) == []
    deployment = {
        "metadata": {"name": "nova", "namespace": "ns"},
        "spec": {"selector": {"matchLabels": naming.selector_labels("nova", "api")}},
    }
    assert [p["metadata"]["name"] for p in stuck_pods.of_deployment(cache, deployment)] == ["api-1"]
    assert stuck_pods.of_deployment(cache, {"metadata": {"name": "x"}, "spec": {}}) == []
    assert [p["metadata"]["name"] for p in stuck_pods.owned_by(cache.list("ns"), "u2")] == ["other"]
    assert stuck_pods.owned_by(cache.list("ns"), None) == []
