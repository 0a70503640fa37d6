"""The operator's own pods, as far as a waiting step names one that cannot start (``decisions.pod_start``).

One Pod informer serves both controllers: label-selected on the two managed-by values (the Nova's
workloads and Jobs, the pools' DaemonSet pods), and it keeps of each pod only its metadata and the
name, image and waiting *reason* of each container status (``KEPT``): never a spec, an environment
or the kubelet's waiting message. A pod event wakes its owner only when what ``pod_start`` reads
changed (``EVENTS``): a pod created, scheduled, started or deleted without ever being stuck wakes
nobody; the Job's or the Deployment's own status already does.

Readers find a workload's pods in the cache: a Job's and a DaemonSet's by owner UID, a Deployment's
by its selector labels (its pods belong to ReplicaSets the operator does not watch).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from nova_operator import naming
from nova_operator.decisions import pod_start
from nova_operator.kube.owners import controlled_by
from nova_operator.kube.types import Object
from nova_operator.renderers import compute_pool
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.predicates import Predicate
from nova_operator.runtime.request import Request
from nova_operator.runtime.transform import ALL, Fields

SELECTOR: Final = (
    f"{naming.MANAGED_BY_LABEL} in ({naming.MANAGED_BY},{compute_pool.labels('')[naming.MANAGED_BY_LABEL]})"
)
"""The pods both controllers create (through their Jobs, Deployments and DaemonSets), and no other."""

_CONTAINER: Final[Fields] = {"name": ALL, "image": ALL, "state": {"waiting": {"reason": ALL}}}
KEPT: Final[Fields] = {
    "status": {"phase": ALL, "initContainerStatuses": _CONTAINER, "containerStatuses": _CONTAINER}
}
"""What the Pod cache holds besides the metadata: what ``pod_start.stuck_containers`` reads."""


def _stuck(obj: Object) -> bool:
    return bool(pod_start.stuck_containers(obj))


EVENTS: Final = Predicate(
    create=_stuck,
    update=lambda old, new: pod_start.stuck_containers(old) != pod_start.stuck_containers(new),
    delete=_stuck,
)
"""A pod event wakes its owner only when it starts, changes or ends a "cannot start"."""


def of_owner(pods: Cache | None, owner: Mapping[str, Any] | None) -> list[Object]:
    """The cached pods whose owner is ``owner`` (a Job, a DaemonSet); none without a cache."""
    uid = ((owner or {}).get("metadata") or {}).get("uid")
    if pods is None or not uid:
        return []
    return pods.by_owner(str(uid))


def owned_by(pods: Iterable[Object], uid: object) -> list[Object]:
    """The pods of ``pods`` that ``uid`` controls (a DaemonSet, a Job), for readers that list by labels."""
    return [pod for pod in pods if uid and controlled_by(pod, str(uid))]


def of_deployment(pods: Cache | None, deployment: Mapping[str, Any] | None) -> list[Object]:
    """The cached pods a Deployment's selector matches (``matchLabels``), in its namespace."""
    if pods is None or not deployment:
        return []
    match = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    if not match:
        return []
    namespace = (deployment.get("metadata") or {}).get("namespace") or ""
    return pods.list(namespace, labels={str(k): str(v) for k, v in match.items()})


def by_instance(
    primary: Cache, managed_by: str, *, skip_component: str = ""
) -> Callable[[Object], Iterable[Request]]:
    """A pod -> its instance label's key in ``primary`` (the Nova or the pool), for ``managed_by`` pods
    (but those of ``skip_component``: a Job another controller waits on)."""

    def mapper(pod: Object) -> list[Request]:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        if labels.get(naming.MANAGED_BY_LABEL) != managed_by or not labels.get(naming.INSTANCE_LABEL):
            return []
        if skip_component and labels.get(naming.COMPONENT_LABEL) == skip_component:
            return []
        key = Request(meta.get("namespace") or "", str(labels[naming.INSTANCE_LABEL]))
        return [key] if key in primary else []

    return mapper
