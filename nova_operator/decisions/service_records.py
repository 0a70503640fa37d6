"""Which service records of a Nova's control plane are stale: the pure decision of the ServiceRecords step.

Every scheduler and conductor pod (and, in the database, every API and metadata pod) registers a
service record under its hostname, the pod's name, so each rollout or scale-down leaves the
records of the pods that went. A record is **stale** when all of these hold:

- its binary is one a role of this Nova registers (``naming.SERVICE_BINARIES``): never
  ``nova-compute`` (the pools own those) nor anything else;
- its host is shaped like a pod name of that role's Deployment ``{deployment}-<hash>-<suffix>``
  (``looks_like_pod_of``): a record registered by anything else (a scheduler someone runs by
  hand, another Nova's pod in a shared cell database) is never touched;
- no live pod of that role has that hostname: absent, finished (Succeeded/Failed) and terminating
  pods are not live;
- Nova reports it ``down`` (no heartbeat for ``service_down_time``, 60 s by default).

A record that meets the first three but is still ``up`` is **waiting**: its process may still be
stopping, or its last heartbeat is younger than ``service_down_time``; it is judged again later.
A record in a cell that did not answer (status ``UNKNOWN``, no id) is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from nova_operator import naming
from nova_operator.models.nova import DOWN_HOSTS_SHOWN
from nova_operator.openstack.client import ComputeService

HOSTNAME_MAX: Final = 63
"""The kubelet cuts a pod's hostname to 63 characters (and drops a trailing ``-`` or ``.``)."""

_SAFE: Final = "bcdfghjklmnpqrstvwxz2456789"
"""The alphabet of a ReplicaSet's pod-template hash and of a generated name's random suffix."""
_POD_TAIL: Final = re.compile(rf"[{_SAFE}]+(-[{_SAFE}]+)?")
"""What follows ``{deployment}-`` in a pod's name: ``<hash>-<suffix>``, or, when the API server cut
the generated name's base to fit 63 characters, a part of the hash run into the suffix."""


@dataclass(frozen=True, slots=True)
class Verdict:
    stale: tuple[ComputeService, ...]
    """Down records of pods that are gone: to delete."""
    waiting: tuple[ComputeService, ...]
    """Records of pods that are gone or going, still reported up: to judge again later."""


def looks_like_pod_of(deployment: str, host: str) -> bool:
    """Whether ``host`` can be the hostname of a pod of Deployment ``deployment``."""
    prefix = f"{deployment}-"
    return host.startswith(prefix) and _POD_TAIL.fullmatch(host[len(prefix) :]) is not None


def pod_hostname(pod: Mapping[str, Any]) -> str:
    """The hostname a pod's processes see: ``spec.hostname`` or the pod's name, cut as the kubelet does."""
    spec = pod.get("spec") or {}
    name = str(spec.get("hostname") or (pod.get("metadata") or {}).get("name") or "")
    if len(name) > HOSTNAME_MAX:
        name = name[:HOSTNAME_MAX].rstrip("-.")
    return name


def live(pod: Mapping[str, Any]) -> bool:
    """A pod whose processes may still heartbeat: not terminating, not finished."""
    meta = pod.get("metadata") or {}
    phase = (pod.get("status") or {}).get("phase")
    return not meta.get("deletionTimestamp") and phase not in ("Succeeded", "Failed")


def live_hosts(pods: Iterable[Mapping[str, Any]]) -> dict[str, frozenset[str]]:
    """Component (``app.kubernetes.io/component``) -> hostnames of its live pods."""
    out: dict[str, set[str]] = {}
    for pod in pods:
        component = ((pod.get("metadata") or {}).get("labels") or {}).get(naming.COMPONENT_LABEL)
        if component and live(pod):
            out.setdefault(str(component), set()).add(pod_hostname(pod))
    return {k: frozenset(v) for k, v in out.items()}


def candidates(nova: str, records: Iterable[ComputeService]) -> list[ComputeService]:
    """The records that may be stale: a role's binary, a host shaped like that role's pod, an id."""
    out = []
    for record in records:
        component = naming.SERVICE_BINARIES.get(record.binary)
        if component is None or not record.id or record.state not in ("up", "down"):
            continue
        if looks_like_pod_of(naming.deployment_name(nova, component), record.host):
            out.append(record)
    return out


def judge(nova: str, records: Iterable[ComputeService], hosts: Mapping[str, frozenset[str]]) -> Verdict:
    """Split this Nova's candidate records into stale and waiting; live pods' records are in neither.

    ``hosts`` comes from ``live_hosts`` over the Nova's pods, listed *after* ``records`` were read, so
    a pod that was alive when Nova called its record down is in it unless it has gone since.
    """
    stale: list[ComputeService] = []
    waiting: list[ComputeService] = []
    for record in candidates(nova, records):
        component = naming.SERVICE_BINARIES[record.binary]
        if record.host in hosts.get(str(component), frozenset()):
            continue
        (stale if record.state == "down" else waiting).append(record)
    return Verdict(tuple(stale), tuple(waiting))


def summary(records: Iterable[ComputeService]) -> dict[str, Any]:
    """Nova's own view of its services, for ``status.services``: how many records it lists up and
    down (in total, and per binary, sorted by name) and, per binary, the hosts of the down ones
    (sorted, ``DOWN_HOSTS_SHOWN`` at most: a tenant's nova-api decides how many records it
    lists, the status's size must not grow with them). A record of a cell that did not answer (state neither
    ``up`` nor ``down``) is counted in neither."""
    up: dict[str, int] = {}
    down: dict[str, list[str]] = {}
    for record in records:
        if record.state == "up":
            up[record.binary] = up.get(record.binary, 0) + 1
        elif record.state == "down":
            down.setdefault(record.binary, []).append(record.host)
    binaries = []
    for binary in sorted({*up, *down}):
        hosts = sorted(down.get(binary, ()))
        entry: dict[str, Any] = {"binary": binary, "up": up.get(binary, 0), "down": len(hosts)}
        if hosts:
            entry["downHosts"] = hosts[:DOWN_HOSTS_SHOWN]
        binaries.append(entry)
    return {
        "up": sum(up.values()),
        "down": sum(len(h) for h in down.values()),
        "binaries": binaries,
    }
