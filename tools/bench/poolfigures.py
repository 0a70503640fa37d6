"""``bench pools``' arithmetic: from the raw data of one run (times, the API server's audit log, the
fake compute API's request log, /metrics) to the figures. Pure: no cluster, no clock.

Every time is in seconds since the epoch (the fake's monotonic times are moved onto the wall clock
by the caller, ``ComputeCall.of``). Definitions:

* ``ready``: each pool first seen Ready (for its generation), from the creation of the first pool.
* ``join``: a spare node labelled into a pool, until the pool's ledger shows it Active with its
  service up and the pool's AggregatesReady True; its spread over the joins.
* ``per_pass``: the operator's requests in a window over the NovaCompute passes counted in it by
  ``nova_operator_controller_reconcile_total{controller="novacompute"}`` (Kubernetes: Leases
  aside; compute: Keystone and Nova both).
* ``per_minute``: requests in an idle window, per minute.
* ``drain``: the pool label removed from D nodes at once, until the last of their services had its
  disable (a PUT with status disabled) and its delete (a DELETE answered 2xx), by the fake's log.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from simcluster.platform.controlplane import OPERATOR_USER

from bench import audit
from bench.figures import pct, spread

_ID = re.compile(r"^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}|\d+)$")
LIST_KINDS = {
    "GET /v2.1/os-services": "services",
    "GET /v2.1/os-hypervisors": "hypervisors",
    "GET /v2.1/os-hypervisors/detail": "hypervisors",
    "GET /v2.1/os-aggregates": "aggregates",
    "GET /v2.1/servers": "servers",
    "GET /v2.1/servers/detail": "servers",
}


@dataclass(frozen=True)
class ComputeCall:
    """One request the fake Keystone or compute API answered."""

    at: float  # seconds since the epoch
    api: str  # "keystone" or "nova"
    method: str
    path: str
    code: int
    disables: bool = False  # a service update whose body asks for status=disabled

    @property
    def route(self) -> str:
        """``METHOD /path`` with ids (UUIDs, numbers) as ``{id}``: what the call was, not on what."""
        parts = [("{id}" if _ID.match(p) else p) for p in self.path.split("/")]
        return f"{self.method} {'/'.join(parts)}"

    @staticmethod
    def of(call: Any, offset: float) -> ComputeCall:
        """A ``simcluster.standins.openstack.Call`` (monotonic ``at``) on the wall clock (plus ``offset``)."""
        body = call.body
        disables = isinstance(body, dict) and body.get("status") == "disabled"
        return ComputeCall(call.at + offset, call.api, call.method, call.path, call.status, disables)


def between(calls: Iterable[ComputeCall], start: float, end: float) -> list[ComputeCall]:
    return [c for c in calls if start <= c.at < end]


def by_route(calls: Iterable[ComputeCall]) -> dict[str, int]:
    """``METHOD /path`` -> count, the most frequent first."""
    return dict(Counter(c.route for c in calls).most_common())


def lists_by_kind(calls: Iterable[ComputeCall]) -> dict[str, int]:
    """Compute API list requests (every page counted) by the kind listed."""
    out: Counter[str] = Counter()
    for c in calls:
        kind = LIST_KINDS.get(c.route)
        if kind:
            out[kind] += 1
    return dict(sorted(out.items()))


def ratio(count: float, over: float, digits: int = 2) -> float | None:
    return None if over <= 0 else round(count / over, digits)


def per_minute(count: int, seconds: float) -> float | None:
    return ratio(count, seconds / 60.0)


def kube_requests(log: audit.AuditLog, start: float, end: float) -> list[audit.Request]:
    """The operator's requests in ``[start, end)``, Lease renewals aside."""
    return audit.without_leases(log.between(start, end, OPERATOR_USER))


def window(
    log: audit.AuditLog,
    calls: Sequence[ComputeCall],
    start: float,
    end: float,
    passes: float,
) -> dict[str, Any]:
    """A window's requests: totals, per NovaCompute pass (when any) and per minute, by route."""
    kube = kube_requests(log, start, end)
    compute = between(calls, start, end)
    seconds = max(0.0, end - start)
    return {
        "seconds": round(seconds, 2),
        "passes": passes,
        "kube": {
            "total": len(kube),
            "per_pass": ratio(len(kube), passes),
            "per_minute": per_minute(len(kube), seconds),
            "by_verb_resource": dict(audit.by_verb_and_resource(kube).most_common()),
        },
        "compute": {
            "total": len(compute),
            "per_pass": ratio(len(compute), passes),
            "per_minute": per_minute(len(compute), seconds),
            "lists_per_pass": {k: ratio(v, passes) for k, v in lists_by_kind(compute).items()},
            "by_route": by_route(compute),
        },
    }


def ready_times(ready_at: Mapping[str, float], t0: float, expected: int) -> dict[str, Any]:
    times = sorted(t - t0 for t in ready_at.values())
    return {
        "count": len(times),
        "missing": expected - len(times),
        "first": round(times[0], 2) if times else None,
        "median": round(statistics.median(times), 2) if times else None,
        "last": round(times[-1], 2) if len(times) == expected and times else None,
    }


def joins(latencies: Sequence[float], attempted: int) -> dict[str, Any]:
    """The spread of the joins that finished; ``missing`` those that did not within the wait."""
    s = spread(latencies)
    return {**s, "median": s["p50"], "missing": attempted - len(latencies)}


def drain(calls: Iterable[ComputeCall], services: Mapping[str, str], t0: float) -> dict[str, Any]:
    """``services``: host -> service id (the fake's UUID) of every drained node. Seconds from ``t0``
    to the last disable and to the last delete (None while any is missing)."""
    ids = {sid: host for host, sid in services.items()}
    disabled: dict[str, float] = {}
    deleted: dict[str, float] = {}
    for c in sorted(calls, key=lambda c: c.at):
        if c.at < t0 or not c.path.startswith("/v2.1/os-services/"):
            continue
        host = ids.get(c.path.rsplit("/", 1)[1])
        if host is None or not 200 <= c.code < 300:
            continue
        if c.method == "PUT" and c.disables:
            disabled.setdefault(host, c.at - t0)
        elif c.method == "DELETE":
            deleted.setdefault(host, c.at - t0)
    n = len(services)

    def last(found: Mapping[str, float]) -> float | None:
        return round(max(found.values()), 2) if found and len(found) == n else None

    return {
        "nodes": n,
        "all_disabled": last(disabled),
        "all_deleted": last(deleted),
        "disabled": len(disabled),
        "deleted": len(deleted),
        "disable_p50": round(pct(list(disabled.values()), 0.5) or 0.0, 2) if disabled else None,
        "delete_p50": round(pct(list(deleted.values()), 0.5) or 0.0, 2) if deleted else None,
    }


def versus_floor(ready_last: float | None, floor_seconds: float | None) -> float | None:
    if ready_last is None or not floor_seconds:
        return None
    return round(ready_last / floor_seconds, 2)
