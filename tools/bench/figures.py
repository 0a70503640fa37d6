"""From the raw data of one run (times, audit log, readiness tracker, /metrics) to the figures.

Every time is in seconds. Definitions:

* ``ready``: when each Nova was first seen Ready for its generation, from the first create.
* ``converge``: the operator's requests from the first create until it was quiet after the last
  Nova turned Ready, per Nova, by ``verb resource``; Lease requests (leader election) apart; and
  the passes (reconciles) per Nova in that time.
* ``wake``: an annotation touched on every Nova; the requests until every Nova had its pass, per
  pass (``nova_operator_controller_reconcile_total`` counts the passes).
* ``idle``: requests per minute while nothing happens.
* ``event_to_pass``: from a child's status write that made it ready (the audit log's time of the
  controller's or stand-in's write) to the operator's next request in that Nova's namespace, the
  first visible sign of the pass it triggered.
* ``standin_reaction``: from a MariaDB object's or HTTPRoute's creation (or its User's readiness,
  for a Grant; its backend Service's creation, for a route) to the stand-in's Ready status write
  (both dated by the audit log).
* ``stages``: per stage, the median over Novas of when the operator created the stage's first
  object and when its last object turned ready, from the Nova's own create.
* ``first_write``: from a Nova's create to the operator's first write of one of its children (any
  write in its namespace but to the Nova itself and events), per Nova: how long a new Nova waited
  before its work began.
* ``versus_floor``: ``all Ready (last) / floor all available (last)`` and the same for the medians,
  the floor being ``bench floor``'s run on the same machine (``with_floor``); and the CPU seconds
  the cluster's processes, the bench and the operator spent while the Novas converged over what
  the cluster's processes and the bench spent in the floor, which other load on the machine
  stretches less than the wall times.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from simcluster.platform.controlplane import OPERATOR_USER

from bench import audit, promtext
from bench.tracker import Tracker

RECONCILE = "nova_operator_controller_reconcile_time_seconds"
QUEUE_WAIT = "nova_operator_workqueue_queue_duration_seconds"
STEP = "nova_operator_reconcile_duration_seconds"
PASSES = "nova_operator_controller_reconcile_total"
MARIADB_KINDS = ("databases", "users", "grants")
GATES = ("databases", "users", "grants", "jobs", "deployments", "httproutes")
STAGES: dict[str, tuple[str, ...]] = {
    "mariadb": MARIADB_KINDS,
    "db-sync": ("jobs",),
    "deployments": ("deployments",),
    "routes": ("httproutes",),
}


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def pct(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (nearest rank) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = math.ceil(q * len(ordered))  # nearest rank, 1-based
    return ordered[min(len(ordered), max(1, rank)) - 1]


def spread(values: Sequence[float]) -> dict[str, Any]:
    return {
        "count": len(values),
        "p50": _r(pct(values, 0.5)),
        "p95": _r(pct(values, 0.95)),
        "max": _r(max(values) if values else None),
    }


def per_nova(requests: Iterable[audit.Request], n: int) -> dict[str, Any]:
    reqs = list(requests)
    counts = audit.by_verb_and_resource(reqs)
    return {
        "total": _r(len(reqs) / n, 2),
        "writes": _r(sum(r.is_write for r in reqs) / n, 2),
        "reads": _r(sum(r.is_read for r in reqs) / n, 2),
        "watches": _r(sum(r.verb == "watch" for r in reqs) / n, 2),
        "by_verb_resource": {k: _r(v / n, 2) for k, v in sorted(counts.items(), key=lambda kv: -kv[1])},
    }


def _quantiles(after: str, before: str, metric: str, /, **labels: str) -> dict[str, Any]:
    h = promtext.minus(
        promtext.histogram(after, metric, **labels), promtext.histogram(before, metric, **labels)
    )
    return {
        "count": int(max(h.values(), default=0)),
        "p50": _r(promtext.quantile(h, 0.5), 4),
        "p95": _r(promtext.quantile(h, 0.95), 4),
        "p99": _r(promtext.quantile(h, 0.99), 4),
    }


def steps(after: str, before: str) -> dict[str, dict[str, Any]]:
    """Per pipeline step: invocations, total seconds and p95 in the window, the costliest first."""
    totals = {
        got["sub_reconciler"]: value
        for got, value in promtext.samples(after, f"{STEP}_sum")
        if "sub_reconciler" in got
    }
    for got, value in promtext.samples(before, f"{STEP}_sum"):
        if got.get("sub_reconciler") in totals:
            totals[got["sub_reconciler"]] -= value
    out = {}
    for step, seconds in sorted(totals.items(), key=lambda kv: -kv[1]):
        q = _quantiles(after, before, STEP, sub_reconciler=step)
        out[step] = {"count": q["count"], "seconds": _r(seconds, 3), "p95": q["p95"]}
    return out


def _by_ns(requests: Iterable[audit.Request]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    for r in requests:
        out[r.namespace].append(r.at)
    for times in out.values():
        times.sort()
    return out


class StatusWrites:
    """Others' status writes by object, from the audit log: when a child really turned ready (the
    write the tracker saw the result of), free of the tracker's own delay."""

    def __init__(self, log: audit.AuditLog) -> None:
        self._writes: dict[tuple[str, str, str], list[float]] = defaultdict(list)
        for r in log.requests:
            if r.user != OPERATOR_USER and r.resource.endswith("/status"):
                self._writes[(r.resource.split("/")[0], r.namespace, r.name)].append(r.at)

    def ready_at(self, key: tuple[str, str, str], seen: float) -> float:
        before = [t for t in self._writes.get(key, []) if t <= seen + 0.05]
        return max(before) if before else seen


def event_to_pass(
    log: audit.AuditLog, tracker: Tracker, end: float
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    operator = [r for r in log.of(OPERATOR_USER) if r.verb not in ("watch", "list")]
    next_request = _by_ns(operator)
    writes = StatusWrites(log)
    latencies: dict[str, list[float]] = defaultdict(list)
    for (kind, ns, name), seen in tracker.ready.items():
        if kind not in GATES:
            continue
        changed = writes.ready_at((kind, ns, name), seen)
        times = next_request.get(ns, [])
        i = bisect.bisect_right(times, changed)
        if i < len(times) and times[i] < end:
            latencies[kind].append(times[i] - changed)
    everything = [v for vs in latencies.values() for v in vs]
    return spread(everything), {k: spread(v) for k, v in sorted(latencies.items())}


def _created(log: audit.AuditLog) -> dict[tuple[str, str, str], float]:
    out: dict[tuple[str, str, str], float] = {}
    for r in log.of(OPERATOR_USER):
        if r.created:
            out.setdefault((r.resource, r.namespace, r.name), r.at)
    return out


def standin_reaction(log: audit.AuditLog, tracker: Tracker) -> dict[str, dict[str, Any]]:
    created = _created(log)
    writes = StatusWrites(log)
    ready_at = {key: writes.ready_at(key, seen) for key, seen in tracker.ready.items()}
    users_ready: dict[str, list[float]] = defaultdict(list)
    services: dict[str, list[float]] = defaultdict(list)
    for (kind, ns, _), t in ready_at.items():
        if kind == "users":
            users_ready[ns].append(t)
    for (kind, ns, _), t in created.items():
        if kind == "services":
            services[ns].append(t)
    out: dict[str, list[float]] = defaultdict(list)
    for (kind, ns, name), ready in ready_at.items():
        if kind not in (*MARIADB_KINDS, "httproutes") or (kind, ns, name) not in created:
            continue
        start = created[(kind, ns, name)]
        if kind == "grants":
            start = max([start, *[t for t in users_ready[ns] if t <= ready]])
        if kind == "httproutes":
            start = max([start, *[t for t in services[ns] if t <= ready]])
        out[kind].append(ready - start)
    return {k: spread(v) for k, v in sorted(out.items())}


def stages(
    log: audit.AuditLog, tracker: Tracker, created_at: Mapping[str, float], names: Sequence[str]
) -> dict[str, dict[str, float | None]]:
    created = _created(log)
    began: dict[str, list[float]] = defaultdict(list)
    ended: dict[str, list[float]] = defaultdict(list)
    for ns in names:
        t0 = created_at[ns]
        for stage, kinds in STAGES.items():
            starts = [t for (k, n, _), t in created.items() if n == ns and k in kinds]
            ends = [t for (k, n, _), t in tracker.ready.items() if n == ns and k in kinds]
            if starts:
                began[stage].append(min(starts) - t0)
            if ends:
                ended[stage].append(max(ends) - t0)
        ready = tracker.ready.get(("novas", ns, "nova"))
        if ready is not None:
            ended["ready"].append(ready - t0)
    out: dict[str, dict[str, float | None]] = {}
    for stage in (*STAGES, "ready"):
        out[stage] = {
            "began": _r(statistics.median(began[stage]), 2) if began[stage] else None,
            "ended": _r(statistics.median(ended[stage]), 2) if ended[stage] else None,
        }
    return out


def _is_child_write(r: audit.Request) -> bool:
    return r.is_write and r.resource.split("/")[0] not in ("novas", "events")


def first_write(log: audit.AuditLog, created_at: Mapping[str, float], names: Sequence[str]) -> dict[str, Any]:
    """Per Nova, seconds from its create to the operator's first write of a child; their spread."""
    first: dict[str, float] = {}
    for r in log.of(OPERATOR_USER):
        if r.namespace in created_at and r.namespace not in first and _is_child_write(r):
            first[r.namespace] = r.at
    waits = [first[ns] - created_at[ns] for ns in names if ns in first and ns in created_at]
    return {**spread(waits), "missing": len(names) - len(waits)}


def _ratio(a: Any, b: Any) -> float | None:
    if not isinstance(a, int | float) or not isinstance(b, int | float) or not b:
        return None
    return round(a / b, 3)


def with_floor(result: dict[str, Any], found: Mapping[str, Any], source: str) -> dict[str, Any]:
    """``result`` (a run) with the floor it is measured against and the two ratios (in place)."""
    ready, floor_ready = result.get("ready") or {}, found.get("all_ready") or {}
    result["floor"] = {
        "source": source,
        "finished": found.get("finished"),
        "novas": found.get("novas"),
        "verb": found.get("verb"),
        "all_ready": dict(floor_ready),
        "machine": found.get("machine") or {},
    }
    ours = sum(((result.get("machine") or {}).get("cpu_seconds_converge") or {}).values())
    theirs = sum(((found.get("machine") or {}).get("cpu_seconds") or {}).values())
    result["versus_floor"] = {
        "last": _ratio(ready.get("last"), floor_ready.get("last")),
        "median": _ratio(ready.get("median"), floor_ready.get("median")),
        "cpu": _ratio(ours, theirs),
    }
    return result


def compute(
    raw: dict[str, Any], log: audit.AuditLog, tracker: Tracker, names: Sequence[str]
) -> dict[str, Any]:
    n, t0 = raw["novas"], raw["t0"]
    ready = sorted(t - t0 for (k, _, _), t in tracker.ready.items() if k == "novas")
    ops = log.of(OPERATOR_USER)
    in_window = [r for r in ops if t0 <= r.at < raw["t_settled"]]
    wake = [r for r in ops if raw["t_wake"] <= r.at < raw["t_woken"]]
    idle = [r for r in ops if raw["t_idle"] <= r.at < raw["t_idle_end"]]
    minutes = max(1e-9, (raw["t_idle_end"] - raw["t_idle"]) / 60.0)
    passes = max(1.0, raw["wake_passes"])
    m = raw["metrics"]
    overall, by_kind = event_to_pass(log, tracker, raw["t_settled"])
    converging = audit.without_leases(in_window)
    return {
        "novas": n,
        "converged": raw["converged"],
        "ready": {
            "count": len(ready),
            "first": _r(ready[0] if ready else None, 2),
            "median": _r(statistics.median(ready) if ready else None, 2),
            "last": _r(ready[-1] if ready else None, 2),
            "creates_spread": _r(max(raw["created"].values()) - t0, 2),
        },
        "first_write_seconds": first_write(log, raw["created"], names),
        "converge": {
            **per_nova(converging, n),
            "nova_status_writes": _r(
                sum(r.is_write and r.resource == "novas/status" for r in converging) / n, 2
            ),
            "nova_patches": _r(sum(r.is_write and r.resource == "novas" for r in converging) / n, 2),
            "leases": len(in_window) - len(audit.without_leases(in_window)),
            "passes_per_nova": _r(
                (
                    promtext.total(m["converged"], PASSES, controller="nova")
                    - promtext.total(m["start"], PASSES, controller="nova")
                )
                / n,
                2,
            ),
            "seconds": _r(raw["t_settled"] - t0, 2),
        },
        "wake": {
            "passes": raw["wake_passes"],
            "per_pass": per_nova(audit.without_leases(wake), int(passes)),
        },
        "idle": {
            "seconds": _r(raw["t_idle_end"] - raw["t_idle"], 1),
            "requests_per_minute": _r(len(audit.without_leases(idle)) / minutes, 2),
            "lease_requests_per_minute": _r((len(idle) - len(audit.without_leases(idle))) / minutes, 2),
            "by_verb_resource": dict(audit.by_verb_and_resource(audit.without_leases(idle))),
        },
        "reconcile_seconds": {
            "converge": _quantiles(m["converged"], m["start"], RECONCILE, controller="nova"),
            "wake": _quantiles(m["woken"], m["converged"], RECONCILE, controller="nova"),
        },
        "step_seconds": {
            "converge": steps(m["converged"], m["start"]),
            "wake": steps(m["woken"], m["converged"]),
        },
        "queue_wait_seconds": {
            "converge": _quantiles(m["converged"], m["start"], QUEUE_WAIT, name="nova"),
            "wake": _quantiles(m["woken"], m["converged"], QUEUE_WAIT, name="nova"),
        },
        "event_to_pass_seconds": {**overall, "by_kind": by_kind},
        "standin_reaction_seconds": standin_reaction(log, tracker),
        "stages": stages(log, tracker, raw["created"], names),
        "machine": {
            "busy_fraction_converge": raw.get("machine_busy"),
            "cpu_seconds_converge": raw.get("cpu_by_process", {}),
        },
        "operator": {
            "rss_mib_empty": _r(raw["rss_empty"], 1),
            "rss_mib_converged": _r(raw["rss_converged"], 1),
            "rss_mib_growth": _r(raw["rss_converged"] - raw["rss_empty"], 1),
            "rss_mib_peak": _r(raw["rss_peak"], 1),
            "rss_mib_end": _r(raw["rss_end"], 1),
            "cpu_seconds_converge": _r(raw["cpu_converge"], 2),
            "cpu_seconds_idle": _r(raw["cpu_idle"], 2),
            "cpu_seconds_total": _r(raw["cpu_total"], 2),
        },
    }
