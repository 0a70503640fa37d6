"""Which of the minimal Nova's workloads a change rolled: a digest of each pod template (the five
Deployments, the db-archive CronJob's, the sample pool's DaemonSet) before and after, and a wait for
the rolled ones to run new pods only, all Ready."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from simcluster import SimHandle

from tests.realnova.realcluster import (
    JSON,
    NAMESPACE,
    NOVA,
    POOL,
    is_ready,
    not_ready_summary,
    pods,
    wait_for,
)

APPS = f"/apis/apps/v1/namespaces/{NAMESPACE}"
ROLES = ("api", "metadata", "scheduler", "conductor", "novncproxy")
DEPLOYMENTS = {  # workload key -> the component label of its pods
    "deployment/nova": "api",
    "deployment/nova-metadata": "metadata",
    "deployment/nova-scheduler": "scheduler",
    "deployment/nova-conductor": "conductor",
    "deployment/nova-novncproxy": "novncproxy",
}
CRONJOB = "cronjob/nova-db-archive"
CONTROL_PLANE = frozenset({*DEPLOYMENTS, CRONJOB})


def _digest(template: Any) -> str:
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:16]


def pool_daemonset(handle: SimHandle) -> JSON:
    (ds,) = [
        d
        for d in handle.cluster.kube.get(f"{APPS}/daemonsets")["items"]
        if d["metadata"]["name"].startswith(f"{POOL}-")
    ]
    return dict(ds)


def templates(handle: SimHandle) -> dict[str, JSON]:
    """Every pod template of the minimal Nova and its pool, by ``kind/name``."""
    kube = handle.cluster.kube
    out: dict[str, JSON] = {}
    for key in DEPLOYMENTS:
        out[key] = kube.get(f"{APPS}/deployments/{key.split('/', 1)[1]}")["spec"]["template"]
    cron = kube.get(f"/apis/batch/v1/namespaces/{NAMESPACE}/cronjobs/{CRONJOB.split('/', 1)[1]}")
    out[CRONJOB] = cron["spec"]["jobTemplate"]["spec"]["template"]
    ds = pool_daemonset(handle)
    out[f"daemonset/{ds['metadata']['name']}"] = ds["spec"]["template"]
    return out


def changed(before: Mapping[str, JSON], after: Mapping[str, JSON]) -> set[str]:
    assert set(before) == set(after), (sorted(before), sorted(after))
    return {k for k in before if _digest(before[k]) != _digest(after[k])}


def annotations_changed(before: Mapping[str, JSON], after: Mapping[str, JSON], key: str) -> set[str]:
    """The template annotations of workload ``key`` whose value differs (or appeared, or went)."""
    a = before[key].get("metadata", {}).get("annotations") or {}
    b = after[key].get("metadata", {}).get("annotations") or {}
    return {k for k in set(a) | set(b) if a.get(k) != b.get(k)}


def _live(items: Iterable[JSON], component: str) -> set[str]:
    return {
        p["metadata"]["name"]
        for p in items
        if not p["metadata"].get("deletionTimestamp")
        and (p["metadata"].get("labels") or {}).get("app.kubernetes.io/instance") == NOVA
        and (p["metadata"].get("labels") or {}).get("app.kubernetes.io/component") == component
    }


def live_pods(handle: SimHandle, component: str) -> set[str]:
    return _live(pods(handle, selector=f"app.kubernetes.io/instance={NOVA}"), component)


def _names(items: list[JSON]) -> dict[str, set[str]]:
    names = {key: _live(items, component) for key, component in DEPLOYMENTS.items()}
    pool = f"{POOL}-nova-compute-"
    names["pool"] = {
        p["metadata"]["name"]
        for p in items
        if p["metadata"]["name"].startswith(pool) and not p["metadata"].get("deletionTimestamp")
    }
    return names


def pod_names(handle: SimHandle) -> dict[str, set[str]]:
    """The live pods of each Deployment and of the pool, by workload key."""
    return _names(pods(handle))


def _ready(pod: JSON) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions") or [])


def wait_rolled(
    handle: SimHandle, before: Mapping[str, set[str]], rolled: Iterable[str], *, within: float
) -> dict[str, set[str]]:
    """Until every Deployment in ``rolled`` (and the pool, with ``"pool"``) runs only pods that were
    not there ``before``, as many as it wants, all Ready, the old ones gone (not only terminating),
    and the Nova and the pool are Ready; the others keep exactly their pods. The pod names then.

    A terminating pod still serves until its process exits: a stopping nova-scheduler still takes
    RPC calls, and after a bus password rotation it cannot answer them (its new connection for the
    reply is refused), so a call made then times out (docs/operations.md, "Rotate a credential")."""
    kube = handle.cluster.kube
    rolled = set(rolled)

    def done() -> dict[str, set[str]] | None:
        items = pods(handle)  # one list per look: the names, what still exists, and readiness
        now = _names(items)
        existing = {p["metadata"]["name"]: p for p in items}
        for key, names in now.items():
            if key not in rolled:
                continue
            if not names or before[key] & set(existing) or not all(_ready(existing[n]) for n in names):
                return None
            if key != "pool":
                d = kube.get(f"{APPS}/deployments/{key.split('/', 1)[1]}")
                s = d["status"]
                if s.get("observedGeneration") != d["metadata"]["generation"]:
                    return None
                if not (
                    len(names) == s.get("updatedReplicas") == s.get("readyReplicas") == d["spec"]["replicas"]
                ):
                    return None
            elif len(names) != len(before[key]):
                return None
        if not (is_ready(handle, "novas", NOVA) and is_ready(handle, "novacomputes", POOL)):
            return None
        return now

    after = wait_for(
        done,
        within=within,
        what=f"{sorted(rolled)} rolled onto new pods, the Nova and the pool Ready",
        handle=handle,
        detail=lambda: f"nova: {not_ready_summary(handle, 'novas', NOVA)}; pods {pod_names(handle)}",
    )
    for key, names in after.items():
        if key not in rolled:
            assert names == before[key], (key, before[key], names)
    return after
