"""A pool's own nova-compute pods as hints for its Services step (issue 41: joins and the release).

The spec has a joining node noticed by the 30 s Pending poll and a released pod by the 10 s
Releasing poll: nothing tells the operator when nova-compute registers its service, nor when the
DaemonSet's pod has left a Releasing node. The shared Pod informer (``stuck_pods``) sees both ends
of that: a pool's pod turning Ready on a Pending node (nova-compute has started: its service
record follows within seconds) and its pod going from a Releasing node (what the release waits
for). ``EVENTS`` admits just those two, and ``waking`` maps them to the pool that holds the node in
that phase; every other pod event wakes nobody here.

Ready is not proof of registration: nova-compute (no probes, §9.3) is Ready once its container
runs, and registers its service after loading its driver and reaching the conductor (the
simulated cluster models that delay; a real one under load took longer than 16 s). ``recheck_after``
therefore has the pass look again while a Pending node without a service runs a pod that turned
Ready: after a quarter of the pod's age since Ready (at least 1 s: about 1, 2, 3, 4, 5, 6, 8, 10,
12, 15, 19, 24, 30 s ...), for as long as that gap is shorter than the spec's Pending poll, which
takes over from there (a pod Ready two minutes ago). A pod Ready before its Nova was (a bring-up:
the pool's DaemonSet runs once the contract is published) counts from the Nova's Ready, which
wakes the pool: nova-compute registers through the conductor, so its wait starts there. A service
that registers is so seen at most a quarter of its wait late, where doubling gaps (1, 2, 4, 8, 16 s,
then the poll) left it up to 14 s late.
``recheck`` gives that look for a pass, also one whose compute API call failed (the API not
answering yet beside a bring-up): the hint is the pod's, not the failed answer's, and a pool with
no such node keeps the spec's 30 s. What the pass decides still rests on the compute API's answer
alone.

The same holds for a service coming back (issue 41, after the real tier's hung-compute fault): a
pool holding a node Active whose service it last saw down (``serviceState: down`` on the entry,
what its ``ServicesDown`` condition lists) waits on nova-compute to report again, which it does
once the kubelet has restarted its pod. That pod turning Ready wakes the pool too, and the pass
looks again on the same schedule (``returning``), for as long as the gap is shorter than the
steady poll (60 s) that would otherwise see the service up. A pool whose services are all up has
no such node: no pod event wakes it and no pass looks again sooner.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from nova_operator import conditions, naming
from nova_operator.decisions import nodeplan
from nova_operator.kube.resources import PODS
from nova_operator.kube.types import Object
from nova_operator.reconcilers.compute.context import ComputePass
from nova_operator.renderers import compute_pool
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.predicates import Predicate
from nova_operator.runtime.request import Request, Result
from nova_operator.runtime.transform import ALL, Fields
from nova_operator.timestamps import parse_rfc3339

KEPT: Final[Fields] = {
    "spec": {"nodeName": ALL},
    "status": {"phase": ALL, "conditions": {"type": ALL, "status": ALL, "lastTransitionTime": ALL}},
}
"""What the Pod cache holds for these hints, beside ``stuck_pods.KEPT``: the node, Ready and its time."""

MIN_RECHECK: Final = 1.0
"""The first look after a pod turned Ready (the age since Ready is rounded to whole seconds)."""

RECHECK_SHARE: Final = 0.25
"""The gap to the next look, as a share of the pod's age since Ready (so at most this late)."""

_POOL_POD: Final = compute_pool.labels("")
_GONE: Final = ("Succeeded", "Failed")


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def is_pool_pod(pod: Mapping[str, Any]) -> bool:
    """A pod of some pool's DaemonSet (managed by the pools, component nova-compute)."""
    labels = _meta(pod).get("labels") or {}
    return all(
        labels.get(key) == _POOL_POD[key] for key in (naming.MANAGED_BY_LABEL, naming.COMPONENT_LABEL)
    ) and bool(labels.get(naming.INSTANCE_LABEL))


def _ready_condition(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return conditions.find((pod.get("status") or {}).get("conditions") or [], "Ready")


def is_ready(pod: Mapping[str, Any]) -> bool:
    cond = _ready_condition(pod)
    return cond is not None and cond.get("status") == "True" and not _meta(pod).get("deletionTimestamp")


def is_gone(pod: Mapping[str, Any]) -> bool:
    """Finished: the release counts a Succeeded or Failed pod as not on its node (§12.3)."""
    return (pod.get("status") or {}).get("phase") in _GONE


def node_of(pod: Mapping[str, Any]) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


EVENTS: Final = Predicate(
    create=lambda pod: is_pool_pod(pod) and is_ready(pod),
    update=lambda old, new: (
        is_pool_pod(new) and ((is_ready(new) and not is_ready(old)) or (is_gone(new) and not is_gone(old)))
    ),
    delete=is_pool_pod,
)
"""A pool pod turning Ready, finishing, or deleted (the mapper keeps only those a phase waits on)."""


def is_down(entry: Mapping[str, Any]) -> bool:
    """An Active entry whose service the pool last saw down (the nodes ``ServicesDown`` lists)."""
    return entry.get("phase") == nodeplan.ACTIVE and entry.get("serviceState") == "down"


def _waits_on_ready(entry: Mapping[str, Any]) -> bool:
    return entry.get("phase") == nodeplan.PENDING or is_down(entry)


def _waits_on_gone(entry: Mapping[str, Any]) -> bool:
    return entry.get("phase") == nodeplan.RELEASING


def waking(pools: Cache) -> Callable[[Object], Iterable[Request]]:
    """A pool pod -> its pool, if that pool holds the pod's node as Pending or as Active with its
    service down (a Ready pod: its service registers or reports again) or as Releasing (a pod gone:
    the release can go on)."""

    def mapper(pod: Object) -> Iterable[Request]:
        meta = _meta(pod)
        namespace = str(meta.get("namespace") or "")
        name = str((meta.get("labels") or {}).get(naming.INSTANCE_LABEL) or "")
        node = node_of(pod)
        pool = pools.get(name, namespace) if name and node else None
        if pool is None:
            return []
        waits = _waits_on_ready if is_ready(pod) else _waits_on_gone
        held = (pool.get("status") or {}).get("nodes") or []
        if any(e.get("name") == node and waits(e) for e in held):
            return [Request(namespace, name)]
        return []

    return mapper


def _stamp(cond: Mapping[str, Any] | None) -> datetime | None:
    stamp = cond.get("lastTransitionTime") if cond is not None else None
    return parse_rfc3339(stamp)


def _ready_since(pod: Mapping[str, Any]) -> datetime | None:
    return _stamp(_ready_condition(pod)) if is_ready(pod) else None


def nova_ready_since(nova: Mapping[str, Any] | None) -> datetime | None:
    """When the Nova last turned Ready (its conductor and API serve from then), or None: not Ready."""
    cond = conditions.find(((nova or {}).get("status") or {}).get("conditions") or [], "Ready")
    return _stamp(cond) if cond is not None and cond.get("status") == "True" else None


def recheck_after(
    pods: Sequence[Object],
    waiting: Iterable[str],
    now: datetime,
    window: float,
    nova_ready: datetime | None = None,
) -> float | None:
    """Seconds until the pass should look again for the services of ``waiting`` (Pending nodes with
    no service), or None: the soonest over their Ready pods of ``RECHECK_SHARE`` of the pod's age
    since Ready (at least ``MIN_RECHECK``), for the pods where that is shorter than ``window`` (the
    Pending poll, which covers the others). A pod Ready before its Nova (``nova_ready``) counts from
    the Nova's Ready instead: nova-compute registers through the conductor, so its wait starts
    again there."""
    nodes = set(waiting)
    best: float | None = None
    for pod in pods:
        since = _ready_since(pod)
        if since is None or node_of(pod) not in nodes:
            continue
        if nova_ready is not None:
            since = max(since, nova_ready)
        age = max((now - since).total_seconds(), 0.0)  # a Ready stamp a little ahead of our clock: now
        delay = max(age * RECHECK_SHARE, MIN_RECHECK)
        if delay >= window:
            continue
        best = delay if best is None else min(best, delay)
    return best


def recheck(p: ComputePass, waiting: Sequence[str], back: Sequence[str] = ()) -> float | None:
    """``recheck_after`` for a pass: its pool's pods from the cache, its Nova's Ready, its clock;
    ``waiting`` (Pending nodes with no service) until the Pending poll, ``back`` (Active nodes whose
    service was seen down: ``returning``) until the steady poll."""
    if not waiting and not back:
        return None
    pods = p.listed(PODS, p.namespace, compute_pool.selector_labels(p.name)) or []
    every = p.settings.intervals
    nova = nova_ready_since(p.nova)
    found = [
        again
        for nodes, window in ((waiting, every.draining), (back, every.settled))
        if nodes and (again := recheck_after(pods, nodes, p.now, window, nova)) is not None
    ]
    return min(found, default=None)


def returning(nodes: Iterable[Mapping[str, Any]]) -> list[str]:
    """The Active nodes whose service was last seen down (``is_down``)."""
    return [str(e["name"]) for e in nodes if is_down(e)]


def after_api_failure(p: ComputePass) -> Result:
    """The requeue of a failed compute API call (§19: 30 s, not an error), or the join's look again
    if sooner (``recheck`` of the ``unregistered`` nodes): their pods' Ready still says a service
    is about to register (or a down one to report again), whatever this call's failure."""
    every = p.settings.intervals
    again = recheck(p, unregistered(p), returning(p.nodes))
    return Result(requeue_after=every.draining if again is None else min(every.draining, again))


def unregistered(p: ComputePass) -> list[str]:
    """The pass's Pending nodes with no service on their entries (what a failed read leaves known)."""
    return [e["name"] for e in p.nodes if e.get("phase") == nodeplan.PENDING and not e.get("serviceID")]
