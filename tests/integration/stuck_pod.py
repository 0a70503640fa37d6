"""A workload's pod the kubelet cannot start, made by hand on the bare control plane (not a test module).

kube-apiserver alone runs no kubelet: ``stuck_pod`` creates the pod a Job, a ReplicaSet or a
DaemonSet controller would, then writes its status subresource as the kubelet does when it gives
up, with a waiting message that quotes ``SECRET`` (what a step must never repeat).
"""

from __future__ import annotations

from collections.abc import Mapping

from nova_operator.kube import Kube
from nova_operator.kube.resources import PODS
from nova_operator.kube.types import Object

SECRET = "pod-env-s3cret-value"


async def stuck_pod(
    admin: Kube,
    ns: str,
    name: str,
    *,
    labels: Mapping[str, str],
    owner: Mapping[str, object] | None,
    reason: str,
    image: str = "ghcr.io/c5c3/nova:2026.1",
) -> Object:
    """The pod ``name`` (``owner``: the controlling object's apiVersion, kind, name and uid), waiting
    for ``reason``; returns it as the server stores it."""
    meta: dict[str, object] = {"name": name, "labels": dict(labels)}
    if owner is not None:
        meta["ownerReferences"] = [{**owner, "controller": True}]
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "main", "image": image}]},
    }
    await admin.create(PODS, body, ns)
    status = {
        "phase": "Pending",
        "containerStatuses": [
            {
                "name": "main",
                "image": image,
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {"waiting": {"reason": reason, "message": f"key password={SECRET} not found"}},
            }
        ],
    }
    return await admin.patch_status(PODS, name, {"status": status}, ns)


def owner_of(obj: Mapping[str, object]) -> dict[str, object]:
    """The owner reference fields of ``obj`` (a Job, a ReplicaSet, a DaemonSet as the server holds it)."""
    meta = obj["metadata"]
    assert isinstance(meta, Mapping)
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"], "uid": meta["uid"]}
