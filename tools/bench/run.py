"""``python -m bench run``: N Novas on the simulated cluster, the operator as its own process, measured.

1. The simulated cluster with the API server's audit log on (the operator's user only), the
   project's CRDs and RBAC, and per Nova one namespace ``bench-NNN`` with its prerequisites (the
   sample Secrets, a MariaDB and a RabbitmqCluster the stand-ins make Ready, a Gateway), all Ready
   before the operator starts.
2. The operator (``python -m nova_operator``, leader election on, every namespace), idle for a
   moment: its RSS with no Nova.
3. All N Novas created at once; every child's readiness is followed by a watch (``tracker``) until
   every Nova is Ready, then until the operator has been quiet for a few seconds.
4. A wake-up: an annotation touched on every Nova, counted until every Nova had its pass.
5. An idle stretch (``--idle`` seconds, 60 by default).
6. With a floor (``Options.floor``: ``bench floor``'s result, run just before on the same machine),
   the ratios of the run's all-Ready times to the floor's (``figures.with_floor``).

Requests come from the audit log, reconcile times and queue waits from the operator's /metrics,
RSS and CPU from /proc. ``figures.compute`` turns the raw data into the JSON the report prints.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import functools
import json
import math
import os
import pathlib
import platform
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import yaml
from simcluster import SERVICE_PASSWORD, SimHandle, launch
from simcluster.client.asynckube import AsyncKube
from simcluster.platform.controlplane import OPERATOR_USER, REPO
from simcluster.platform.operator import Operator, wait_leading
from simcluster.platform.operator import start_operator as start_operator_process

from bench import audit, figures, proc, promtext
from bench.tracker import Tracker

SAMPLES = REPO / "config" / "samples"
DEPENDENCIES = REPO / "tools" / "simcluster" / "samples" / "dependencies.yaml"
NOVAS = "/apis/nova.openstack.c5c3.io/v1alpha1"
NAME = "nova"  # every Nova has the sample's name, in a namespace of its own
TOUCH = "bench.nova.openstack.c5c3.io/touch"
PODS_PER_NODE = 250
PODS_PER_NOVA = 10  # 5 Deployments (1 replica each by default), the db-sync Job, headroom
QUIET = 5.0  # seconds without an operator request (Leases aside) that count as "settled"


@dataclass
class Options:
    novas: int
    out: pathlib.Path
    workdir: pathlib.Path | None = None
    timeout: float = 600.0
    idle: float = 60.0
    operator_args: list[str] = field(default_factory=list)
    floor: dict[str, Any] | None = None  # a ``bench floor`` result to measure against
    floor_source: str = ""


def namespaces(n: int) -> list[str]:
    return [f"bench-{i:03d}" for i in range(n)]


def _docs(keystone_url: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The prerequisites of one Nova and the Nova itself (the samples, Keystone = the fake one)."""
    docs = [
        d
        for d in [
            *yaml.safe_load_all((SAMPLES / "secrets.yaml").read_text()),
            *yaml.safe_load_all(DEPENDENCIES.read_text()),
        ]
        if d
    ]
    for doc in docs:
        if doc["kind"] == "Secret" and doc["metadata"]["name"] == "nova-service-user":
            doc["stringData"]["password"] = SERVICE_PASSWORD
    nova = yaml.safe_load((SAMPLES / "nova_minimal.yaml").read_text())
    nova["spec"]["keystoneEndpoint"] = keystone_url
    return docs, nova


def in_namespace(doc: dict[str, Any], ns: str) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    out["metadata"]["namespace"] = ns
    return out


def prepare(handle: SimHandle, opts: Options) -> dict[str, Any]:
    """CRDs, RBAC, nodes and every namespace's prerequisites, Ready; returns the Nova template."""
    assert handle.openstack is not None
    kube = handle.cluster.kube
    need = max(3, math.ceil(opts.novas * PODS_PER_NOVA / PODS_PER_NODE) + 1)
    handle.nodes[""] = handle.cluster.create_nodes(need, pods=str(PODS_PER_NODE))
    handle.install()
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "nova-system"}})
    docs, nova = _docs(handle.openstack.keystone_url)

    def one(ns: str) -> None:
        kube.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        handle.create_gateway(ns, "public-gateway")
        for doc in docs:
            kube.apply(in_namespace(doc, ns), ns, ensure_namespace=False)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, namespaces(opts.novas)))

    def ready(path: str, check: Callable[[dict[str, Any]], bool]) -> bool:
        items = kube.get(path).get("items") or []
        mine = [o for o in items if o["metadata"]["namespace"].startswith("bench-")]
        return len(mine) >= opts.novas and all(check(o) for o in mine)

    def cond(o: dict[str, Any], t: str) -> bool:
        return any(
            c.get("type") == t and c.get("status") == "True"
            for c in (o.get("status") or {}).get("conditions") or []
        )

    for path, check, what in (
        ("/apis/k8s.mariadb.com/v1alpha1/mariadbs", lambda o: cond(o, "Ready"), "every MariaDB Ready"),
        ("/apis/rabbitmq.com/v1beta1/rabbitmqclusters", lambda o: bool(o.get("status")), "RabbitmqClusters"),
        ("/apis/gateway.networking.k8s.io/v1/gateways", lambda o: cond(o, "Programmed"), "Gateways"),
    ):
        kube.wait(functools.partial(ready, path, check), 300, what, interval=0.5)
    return nova


def start_operator(handle: SimHandle, opts: Options) -> Operator:
    """The operator (``opts.operator_args`` appended), up and leading."""
    assert handle.openstack is not None
    op = start_operator_process(
        handle, "operator", "--nova-api-url", handle.openstack.nova_url, *opts.operator_args, cwd=REPO
    )
    wait_leading(op, 120)
    return op


async def _quiet(log: audit.AuditLog, seconds: float, limit: float) -> float:
    """Wait until no operator request (Leases aside) came for ``seconds``; returns when the last one came."""
    deadline = time.time() + limit
    while True:
        log.refresh()
        recent = audit.without_leases(log.of(OPERATOR_USER))
        last = recent[-1].at if recent else 0.0
        if time.time() - last >= seconds or time.time() > deadline:
            return last
        await asyncio.sleep(0.5)


async def measure(handle: SimHandle, op: Operator, opts: Options, nova: dict[str, Any]) -> dict[str, Any]:
    cp = handle.cluster.control_plane
    log = audit.AuditLog(cp.audit_log)
    names = namespaces(opts.novas)
    raw: dict[str, Any] = {"novas": opts.novas}
    async with AsyncKube(cp.server, cp.admin_token, cp.ca_file) as kube:
        tracker = Tracker(kube, set(names))
        tracker.start()
        await asyncio.sleep(5.0)  # the operator settles with no Nova: its baseline
        raw["rss_empty"] = proc.rss(op.pid)
        cpu0 = proc.cpu_seconds(op.pid)
        m0 = promtext.scrape(op.metrics_url)

        created: dict[str, float] = {}
        sem = asyncio.Semaphore(16)
        window = proc.CpuWindow(
            {**handle.cluster.processes(), "operator": op.pid, "bench and stand-ins": os.getpid()}
        )
        window.start()

        async def create(ns: str) -> None:
            async with sem:
                created[ns] = time.time()
                await kube.create(f"{NOVAS}/namespaces/{ns}/novas", in_namespace(nova, ns))

        t0 = time.time()
        await asyncio.gather(*(create(ns) for ns in names))
        rss_peak = 0.0

        def all_ready() -> bool:
            nonlocal rss_peak
            if not op.process.alive:
                raise RuntimeError(f"the operator exited:\n{op.process.output(4000)}")
            rss_peak = max(rss_peak, proc.rss(op.pid))
            return all(("novas", ns, NAME) in tracker.ready for ns in names)

        converged = await tracker.wait(all_ready, opts.timeout)
        t_ready = time.time()
        raw["cpu_by_process"] = window.stop()
        raw["machine_busy"] = window.machine_busy
        raw["converged"] = converged
        last = await _quiet(log, QUIET, 120.0)
        t_settled = max(last, t_ready) + 0.001
        raw["cpu_converge"] = proc.cpu_seconds(op.pid) - cpu0
        raw["rss_converged"] = proc.rss(op.pid)
        m1 = promtext.scrape(op.metrics_url)

        # the wake-up: one annotation on every Nova, then every Nova's pass
        passes0 = promtext.total(m1, "nova_operator_controller_reconcile_total", controller="nova")
        t_wake = time.time()
        for ns in names:
            await kube.merge_patch(
                f"{NOVAS}/namespaces/{ns}/novas/{NAME}", {"metadata": {"annotations": {TOUCH: str(t_wake)}}}
            )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            m2 = promtext.scrape(op.metrics_url)
            done = promtext.total(m2, "nova_operator_controller_reconcile_total", controller="nova") - passes0
            depth = promtext.total(m2, "nova_operator_workqueue_depth", name="nova")
            if done >= opts.novas and depth == 0:
                break
            await asyncio.sleep(0.5)
        await asyncio.sleep(2.0)
        m2 = promtext.scrape(op.metrics_url)
        t_woken = time.time()
        raw["wake_passes"] = (
            promtext.total(m2, "nova_operator_controller_reconcile_total", controller="nova") - passes0
        )

        # idle
        t_idle = time.time()
        cpu_idle0 = proc.cpu_seconds(op.pid)
        await asyncio.sleep(opts.idle)
        t_idle_end = time.time()
        raw["cpu_idle"] = proc.cpu_seconds(op.pid) - cpu_idle0
        raw["cpu_total"] = proc.cpu_seconds(op.pid)
        raw["rss_end"] = proc.rss(op.pid)
        raw["rss_peak"] = max(rss_peak, proc.rss_peak(op.pid))
        await tracker.stop()
    log.refresh()
    raw.update(
        t0=t0,
        created=created,
        t_ready=t_ready,
        t_settled=t_settled,
        t_wake=t_wake,
        t_woken=t_woken,
        t_idle=t_idle,
        t_idle_end=t_idle_end,
        metrics={"start": m0, "converged": m1, "woken": m2},
    )
    return figures.compute(raw, log, tracker, names)


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=12"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run(opts: Options) -> dict[str, Any]:
    workdir = opts.workdir or pathlib.Path(tempfile.mkdtemp(prefix="nova-bench-"))
    load0 = os.getloadavg()
    t_start = time.monotonic()
    print(f"bench: {opts.novas} Nova(s); simulated cluster in {workdir} ...", flush=True)
    handle = launch(workdir, nodes=0, pools={}, audit=True)
    try:
        nova = prepare(handle, opts)
        print(f"bench: prerequisites Ready after {time.monotonic() - t_start:.0f} s; starting the operator")
        op = start_operator(handle, opts)
        print(f"bench: the operator leads {op.led_after:.1f} s after its start", flush=True)
        result = asyncio.run(measure(handle, op, opts, nova))
        result["operator_led_after_seconds"] = round(op.led_after, 2)
    finally:
        handle.stop()
        # etcd's data is most of the directory (200 MB at N=100); the logs and the audit log stay
        shutil.rmtree(workdir / "etcd", ignore_errors=True)
    result["run"] = {
        "commit": git_commit(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "load_average_before": round(load0[0], 2),
        "load_average_after": round(os.getloadavg()[0], 2),
        "operator_args": opts.operator_args,
        "workdir": str(workdir),
        "wall_seconds": round(time.monotonic() - t_start, 1),
    }
    if opts.floor is not None:
        figures.with_floor(result, opts.floor, opts.floor_source)
    opts.out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return result
