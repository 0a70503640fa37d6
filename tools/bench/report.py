"""The bench's table (Markdown, so it pastes into the README) and the comparison of two runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Row = tuple[str, Callable[[dict[str, Any]], Any]]


def _get(*path: str) -> Callable[[dict[str, Any]], Any]:
    def get(result: dict[str, Any]) -> Any:
        value: Any = result
        for key in path:
            if not isinstance(value, dict) or key not in value:
                return None
            value = value[key]
        return value

    return get


def _stage(stage: str) -> Callable[[dict[str, Any]], Any]:
    def get(result: dict[str, Any]) -> Any:
        s = (result.get("stages") or {}).get(stage) or {}
        return f"{_fmt(s.get('began'))} → {_fmt(s.get('ended'))}"

    return get


def _rest_cpu(result: dict[str, Any]) -> Any:
    """CPU seconds of every process but the operator and the API server while converging."""
    cpu = (result.get("machine") or {}).get("cpu_seconds_converge") or {}
    rest = [v for k, v in cpu.items() if k not in ("operator", "kube-apiserver")]
    return round(sum(rest), 1) if rest else None


# (label, getter) in print order; a getter returning a number is compared by ``compare``.
ROWS: list[Row] = [
    ("Novas", _get("novas")),
    ("all Ready last / floor all available last", _get("versus_floor", "last")),
    ("all Ready median / floor median", _get("versus_floor", "median")),
    ("CPU to converge / floor CPU (every process)", _get("versus_floor", "cpu")),
    ("all Ready: first (s)", _get("ready", "first")),
    ("all Ready: median (s)", _get("ready", "median")),
    ("all Ready: last (s)", _get("ready", "last")),
    ("floor all available: median (s)", _get("floor", "all_ready", "median")),
    ("floor all available: last (s)", _get("floor", "all_ready", "last")),
    ("create → first child write: p50 (s)", _get("first_write_seconds", "p50")),
    ("create → first child write: p95 (s)", _get("first_write_seconds", "p95")),
    ("passes per Nova to converge", _get("converge", "passes_per_nova")),
    ("requests per Nova to converge", _get("converge", "total")),
    ("  writes", _get("converge", "writes")),
    ("    status writes (the Nova's)", _get("converge", "nova_status_writes")),
    ("    patches of the Nova (finalizer, claims)", _get("converge", "nova_patches")),
    ("  reads (get, list)", _get("converge", "reads")),
    ("requests per wake-up pass", _get("wake", "per_pass", "total")),
    ("  writes", _get("wake", "per_pass", "writes")),
    ("requests per idle minute (Leases aside)", _get("idle", "requests_per_minute")),
    ("reconcile time, converging: p50 (s)", _get("reconcile_seconds", "converge", "p50")),
    ("reconcile time, converging: p95 (s)", _get("reconcile_seconds", "converge", "p95")),
    ("reconcile time, wake-up pass: p50 (s)", _get("reconcile_seconds", "wake", "p50")),
    ("reconcile time, wake-up pass: p95 (s)", _get("reconcile_seconds", "wake", "p95")),
    ("queue wait, converging: p95 (s)", _get("queue_wait_seconds", "converge", "p95")),
    ("event to next pass: p50 (s)", _get("event_to_pass_seconds", "p50")),
    ("event to next pass: p95 (s)", _get("event_to_pass_seconds", "p95")),
    ("stand-in reaction p95: Grant (s)", _get("standin_reaction_seconds", "grants", "p95")),
    ("stand-in reaction p95: HTTPRoute (s)", _get("standin_reaction_seconds", "httproutes", "p95")),
    ("operator RSS, no Nova (MiB)", _get("operator", "rss_mib_empty")),
    ("operator RSS, converged (MiB)", _get("operator", "rss_mib_converged")),
    ("operator RSS growth (MiB)", _get("operator", "rss_mib_growth")),
    ("operator CPU to converge (s)", _get("operator", "cpu_seconds_converge")),
    ("machine busy while converging (of 1)", _get("machine", "busy_fraction_converge")),
    ("kube-apiserver CPU to converge (s)", _get("machine", "cpu_seconds_converge", "kube-apiserver")),
    ("rest of the cluster and bench CPU (s)", _rest_cpu),
    ("stage MariaDB objects: began → ended (s)", _stage("mariadb")),
    ("stage db-sync Job (s)", _stage("db-sync")),
    ("stage Deployments (s)", _stage("deployments")),
    ("stage routes (s)", _stage("routes")),
    ("stage Ready (s)", _stage("ready")),
]


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".") if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def headline(result: dict[str, Any]) -> str:
    """The run against its floor in one line: the ratio of the last Nova and of the median one."""
    ratio = result.get("versus_floor") or {}
    ready, floor_ready = result.get("ready") or {}, (result.get("floor") or {}).get("all_ready") or {}
    if ratio.get("last") is None:
        return "versus the floor: not measured (no floor, or a run that did not finish)"
    return (
        f"all Ready (last) / floor all available (last): {_fmt(ready.get('last'))} s / "
        f"{_fmt(floor_ready.get('last'))} s = {_fmt(ratio['last'])}; median: {_fmt(ready.get('median'))} s / "
        f"{_fmt(floor_ready.get('median'))} s = {_fmt(ratio.get('median'))}; CPU: {_fmt(ratio.get('cpu'))}"
    )


def table(result: dict[str, Any]) -> str:
    lines = ["| figure | measured |", "| --- | --- |"]
    lines += [f"| {label.strip()} | {_fmt(get(result))} |" for label, get in ROWS]
    return "\n".join(lines)


def details(result: dict[str, Any], top: int = 12) -> str:
    """The requests by verb and resource, the event-to-pass latency by kind, the stand-ins."""
    out = []
    for title, counts in (
        ("requests per Nova to converge", _get("converge", "by_verb_resource")(result) or {}),
        ("requests per wake-up pass", _get("wake", "per_pass", "by_verb_resource")(result) or {}),
        ("idle requests (Leases aside)", _get("idle", "by_verb_resource")(result) or {}),
    ):
        shown = ", ".join(f"{k} {_fmt(v)}" for k, v in list(counts.items())[:top]) or "none"
        out.append(f"{title}: {shown}")
    for kind, s in (_get("event_to_pass_seconds", "by_kind")(result) or {}).items():
        out.append(f"event to next pass after {kind} ready: p50 {_fmt(s['p50'])} p95 {_fmt(s['p95'])} s")
    for kind, s in (result.get("standin_reaction_seconds") or {}).items():
        out.append(
            f"stand-in reaction, {kind}: p50 {_fmt(s['p50'])} p95 {_fmt(s['p95'])} max {_fmt(s['max'])} s"
        )
    for phase in ("converge", "wake"):
        costly = list(((result.get("step_seconds") or {}).get(phase) or {}).items())[:6]
        shown = ", ".join(
            f"{k} {_fmt(v['seconds'])} s/{v['count']} (p95 {_fmt(v['p95'])})" for k, v in costly
        )
        out.append(f"costliest steps ({phase}): {shown or 'none'}")
    run = result.get("run") or {}
    out.append(
        f"commit {run.get('commit')}, {run.get('machine')}, load average {run.get('load_average_before')}"
        f" before / {run.get('load_average_after')} after, operator args {run.get('operator_args') or '-'}"
    )
    return "\n".join(out)


def compare(a: dict[str, Any], b: dict[str, Any], names: Sequence[str] = ("a", "b")) -> str:
    head = f"| figure | {names[0]} | {names[1]} | change |"
    lines = [head, "| --- | --- | --- | --- |"]
    for label, get in ROWS:
        va, vb = get(a), get(b)
        change = ""
        if isinstance(va, int | float) and isinstance(vb, int | float) and not isinstance(va, bool):
            diff = vb - va
            change = f"{diff:+.3g}" + (f" ({diff / va:+.0%})" if va else "")
        lines.append(f"| {label.strip()} | {_fmt(va)} | {_fmt(vb)} | {change} |")
    return "\n".join(lines)


def floor_table(found: dict[str, Any]) -> str:
    """``bench floor``'s figures as a Markdown table."""
    ready = found.get("all_ready") or {}
    machine = found.get("machine") or {}
    cpu = machine.get("cpu_seconds") or {}
    rows = [
        ("namespaces", found.get("novas")),
        ("objects per namespace (the operator's children)", found.get("objects_per_namespace")),
        ("sent as", found.get("verb")),
        ("creates took (s)", found.get("creates_seconds")),
        (
            "all available: first / median / last (s)",
            f"{_fmt(ready.get('first'))} / {_fmt(ready.get('median'))} / {_fmt(ready.get('last'))}",
        ),
        ("machine busy (of 1)", machine.get("busy_fraction")),
        *((f"{name} CPU (s)", seconds) for name, seconds in sorted(cpu.items())),
    ]
    lines = ["| figure | measured |", "| --- | --- |"]
    lines += [f"| {label} | {_fmt(value)} |" for label, value in rows]
    return "\n".join(lines)


# ``bench pools``: (label, getter) in print order.
POOL_ROWS: list[Row] = [
    ("pools x nodes per pool", lambda r: f"{r.get('pools')} x {r.get('nodes_per_pool')} = {r.get('nodes')}"),
    ("the Nova Ready after its create (s)", _get("nova_ready_seconds")),
    ("all pools Ready: first (s)", _get("ready", "first")),
    ("all pools Ready: median (s)", _get("ready", "median")),
    ("all pools Ready: last (s)", _get("ready", "last")),
    ("floor: plain DaemonSets' pods all Ready (s)", _get("floor", "seconds")),
    ("all Ready last / floor", _get("ready_last_over_floor")),
    ("NovaCompute passes per pool to converge", _get("converge", "passes_per_pool")),
    ("wait between joins (s)", _get("join", "gap_seconds")),
    ("node join → Active: median (s)", _get("join", "median")),
    ("node join → Active: p95 (s)", _get("join", "p95")),
    ("node join → Active: max (s)", _get("join", "max")),
    (
        "joins measured / not Active in time",
        lambda r: f"{_fmt(_get('join', 'count')(r))} / {_fmt(_get('join', 'missing')(r))}",
    ),
    ("compute API requests per pass, converged", _get("converged_pass", "compute", "per_pass")),
    ("compute API requests per pass, while joining", _get("join", "window", "compute", "per_pass")),
    ("compute API requests per pass, converging", _get("converge", "compute", "per_pass")),
    ("compute API requests per idle minute, no pool", _get("idle_empty", "compute", "per_minute")),
    ("compute API requests per idle minute, all pools", _get("idle_full", "compute", "per_minute")),
    ("Kubernetes requests per pass, converged", _get("converged_pass", "kube", "per_pass")),
    ("Kubernetes requests per pass, while joining", _get("join", "window", "kube", "per_pass")),
    ("Kubernetes requests per idle minute, no pool", _get("idle_empty", "kube", "per_minute")),
    ("Kubernetes requests per idle minute, all pools", _get("idle_full", "kube", "per_minute")),
    ("drain: nodes unlabelled at once", _get("drain", "nodes")),
    ("drain: every service disabled (s)", _get("drain", "all_disabled")),
    ("drain: every service deleted (s)", _get("drain", "all_deleted")),
    ("operator RSS, no pool (MiB)", _get("operator", "rss_mib_empty")),
    ("operator RSS, all pools converged (MiB)", _get("operator", "rss_mib_converged")),
    ("operator RSS growth (MiB)", _get("operator", "rss_mib_growth")),
    ("operator RSS peak (MiB)", _get("operator", "rss_mib_peak")),
    ("operator CPU per idle minute, no pool (s)", _get("operator", "cpu_seconds_per_idle_minute_empty")),
    ("operator CPU per idle minute, all pools (s)", _get("operator", "cpu_seconds_per_idle_minute_full")),
    ("operator CPU to converge the pools (s)", _get("operator", "cpu_seconds_converge")),
    ("operator CPU over the joins (s)", _get("join", "cpu_seconds")),
    ("operator CPU over the drain (s)", _get("drain", "cpu_seconds")),
    ("machine busy while converging (of 1)", _get("machine", "busy_fraction_converge")),
    ("kube-apiserver CPU to converge (s)", _get("machine", "cpu_seconds_converge", "kube-apiserver")),
]


def pools_table(result: dict[str, Any]) -> str:
    lines = ["| figure | measured |", "| --- | --- |"]
    lines += [f"| {label} | {_fmt(get(result))} |" for label, get in POOL_ROWS]
    return "\n".join(lines)


def pools_details(result: dict[str, Any], top: int = 8) -> str:
    """Which requests, per pass and per idle minute; the run's machine and load."""
    out = []
    for title, path in (
        ("compute requests in the converged passes", ("converged_pass", "compute", "by_route")),
        (
            "compute list requests per converged pass, by kind",
            ("converged_pass", "compute", "lists_per_pass"),
        ),
        ("Kubernetes requests in the converged passes", ("converged_pass", "kube", "by_verb_resource")),
        ("compute requests while joining", ("join", "window", "compute", "by_route")),
        ("Kubernetes requests while joining", ("join", "window", "kube", "by_verb_resource")),
        ("compute requests idle, all pools", ("idle_full", "compute", "by_route")),
        ("Kubernetes requests idle, all pools", ("idle_full", "kube", "by_verb_resource")),
    ):
        counts = _get(*path)(result) or {}
        shown = ", ".join(f"{k} {_fmt(v)}" for k, v in list(counts.items())[:top]) or "none"
        out.append(f"{title}: {shown}")
    passes = _get("converged_pass", "passes")(result)
    out.append(
        f"passes counted: converged {_fmt(passes)}, joining {_fmt(_get('join', 'window', 'passes')(result))}"
    )
    run = result.get("run") or {}
    out.append(
        f"commit {run.get('commit')}, {run.get('machine')}, load average {run.get('load_average_before')}"
        f" before / {run.get('load_average_after')} after, {run.get('wall_seconds')} s wall,"
        f" idle windows {run.get('idle_seconds')} s"
    )
    return "\n".join(out)
