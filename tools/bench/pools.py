"""``python -m bench pools``: one Nova, P pools of N kwok nodes each, the operator as its own process.

1. The simulated cluster with the audit log on, the project's CRDs and RBAC, one namespace
   ``bench-000`` with the Nova's prerequisites (as ``bench run`` prepares them), P x N kwok nodes
   labelled ``sim.nova.openstack.c5c3.io/pool=pool-XX`` (and a zone per pool), and the spare nodes
   the joins use (a zone, no pool).
2. The operator starts; the minimal Nova is created and turns Ready (the stand-ins register a
   compute service when a nova-compute pod runs, the discover-hosts Job's pod maps the hosts).
   Idle ``--idle`` seconds with no pool: the baseline (RSS, CPU, requests at 0 nodes).
3. P NovaComputes created at once; each followed until Ready, then until the operator has been
   quiet for a few seconds.
4. A wake-up: an annotation touched on every pool, counted until every pool had its pass (the
   converged pass). Then ``--idle`` seconds idle at P x N nodes.
5. The floor: each pool's DaemonSet copied (pod template and affinity, not the pool's labels) into
   ``bench-floor`` by this client, without the operator's involvement, until every copy runs a
   Ready pod on each of its nodes; then deleted and its pods waited out.
6. ``--joins`` spare nodes labelled into the pools, one after the other: each until the pool's
   ledger shows it Active, service up, AggregatesReady True; then ``--join-gap`` seconds before
   the next (default 0: back to back). Back to back, a join whose service registers after the
   previous join's discover-hosts Job finished waits out that Job's 30 s (novacompute-crd.md §15:
   a finished Job is left alone 30 s before it is replaced, and all pools share its one name);
   a gap of 30 s or more measures joins on their own.
7. A drain: the pool label removed from ``--drain`` nodes (spread over the pools) at once, until
   every one of their services was disabled and deleted through the fake compute API.

Kubernetes requests come from the audit log (the operator's user), compute requests from the
fake's own log, passes from the operator's /metrics, RSS and CPU from /proc.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import json
import os
import pathlib
import platform
import shutil
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import yaml
from simcluster import POOL_LABEL, SimHandle, launch
from simcluster.client.asynckube import ApiError, AsyncKube
from simcluster.platform.operator import Operator
from simcluster.standins.openstack import FakeOpenStack

from bench import audit, poolfigures, proc, promtext
from bench.poolfigures import ComputeCall
from bench.run import (
    NAME,
    NOVAS,
    QUIET,
    SAMPLES,
    Options,
    _quiet,
    git_commit,
    prepare,
    start_operator,
)
from bench.tracker import nova_ready

NS = "bench-000"
FLOOR_NS = "bench-floor"
POOLS = "/apis/nova.openstack.c5c3.io/v1alpha1/namespaces/{ns}/novacomputes"
DAEMONSETS = "/apis/apps/v1/namespaces/{ns}/daemonsets"
ZONE_LABEL = "topology.kubernetes.io/zone"
ZONES = 4  # pool i is in zone az<i % ZONES>: a few zone aggregates, as racks share zones
FLOOR_LABEL = "bench.nova.openstack.c5c3.io/floor"
PASSES = "nova_operator_controller_reconcile_total"
DEPTH = "nova_operator_workqueue_depth"
CONTROLLER = "novacompute"
POLL = 0.5


@dataclass
class PoolsOptions:
    pools: int = 20
    nodes: int = 50
    out: pathlib.Path = pathlib.Path("bench-pools.json")
    workdir: pathlib.Path | None = None
    timeout: float = 900.0  # all pools Ready, the floor, the drain
    idle: float = 60.0
    joins: int = 20
    join_timeout: float = 180.0
    join_gap: float = 0.0  # seconds from a join's end to the next label (0: back to back)
    drain: int = 50
    operator_args: list[str] = field(default_factory=list)


def gap_before(k: int, gap: float) -> float:
    """Seconds to wait before the ``k``-th join (from 0): ``gap`` between joins, none before the first."""
    return gap if k > 0 and gap > 0 else 0.0


def pool_names(n: int) -> list[str]:
    return [f"pool-{i:02d}" for i in range(n)]


def zone_of(index: int) -> str:
    return f"az{index % ZONES}"


def pool_doc(name: str, index: int) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((SAMPLES / "novacompute.yaml").read_text())
    doc["metadata"] = {"name": name, "namespace": NS}
    doc["spec"]["novaRef"] = {"name": NAME}
    doc["spec"]["nodeSelector"] = {POOL_LABEL: name}
    return doc


def drained_nodes(nodes: dict[str, list[str]], count: int) -> list[str]:
    """``count`` nodes taken round-robin over the pools (the last of each first), at most half of each."""
    out: list[str] = []
    queues = {pool: list(reversed(names))[: len(names) // 2] for pool, names in nodes.items()}
    while len(out) < count and any(queues.values()):
        for pool in sorted(queues):
            if queues[pool] and len(out) < count:
                out.append(queues[pool].pop(0))
    return out


def create_nodes(handle: SimHandle, opts: PoolsOptions) -> tuple[dict[str, list[str]], list[str]]:
    """P x N pool nodes and the spare nodes, created 8 at a time, then waited Ready (within the
    run's ``--timeout``: 5,000 kwok nodes on a loaded machine take longer than a fixed 3 minutes)."""
    cluster = handle.cluster
    names = pool_names(opts.pools)

    def one(index: int) -> list[str]:
        return cluster.create_nodes(
            opts.nodes,
            prefix=f"kwok-{names[index]}",
            pool=names[index],
            labels={ZONE_LABEL: zone_of(index)},
            wait=False,
        )

    with ThreadPoolExecutor(8) as pool:
        made = list(pool.map(one, range(opts.pools)))
    spare = cluster.create_nodes(opts.joins, prefix="kwok-spare", wait=False) if opts.joins else []
    everything = [n for names_ in made for n in names_] + spare
    cluster.wait_nodes_ready(everything, timeout=opts.timeout)
    return dict(zip(names, made, strict=True)), spare


def _cond(obj: dict[str, Any], type_: str) -> bool:
    return any(
        c.get("type") == type_ and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def _entry(pool: dict[str, Any], node: str) -> dict[str, Any]:
    for e in (pool.get("status") or {}).get("nodes") or []:
        if e.get("name") == node:
            return dict(e)
    return {}


class Run:
    """The measurements, in order, with the state they share."""

    def __init__(self, handle: SimHandle, op: Operator, opts: PoolsOptions, kube: AsyncKube) -> None:
        assert handle.openstack is not None
        self.handle, self.op, self.opts, self.kube = handle, op, opts, kube
        self.fake: FakeOpenStack = handle.openstack
        cp = handle.cluster.control_plane
        self.log = audit.AuditLog(cp.audit_log)
        self.offset = time.time() - time.monotonic()  # the fake logs monotonic times
        self.names = pool_names(opts.pools)
        self.raw: dict[str, Any] = {}
        self.rss_peak = 0.0

    # -- helpers ------------------------------------------------------------------------------

    def alive(self) -> None:
        if not self.op.process.alive:
            raise RuntimeError(f"the operator exited:\n{self.op.process.output(4000)}")
        self.rss_peak = max(self.rss_peak, proc.rss(self.op.pid))

    def metrics(self) -> str:
        return promtext.scrape(self.op.metrics_url)

    def passes(self, text: str) -> float:
        return promtext.total(text, PASSES, controller=CONTROLLER)

    def calls(self) -> list[ComputeCall]:
        return [ComputeCall.of(c, self.offset) for c in self.fake.calls()]

    async def pools(self) -> dict[str, dict[str, Any]]:
        return {p["metadata"]["name"]: p for p in await self.kube.list(POOLS.format(ns=NS))}

    async def until(self, check: Callable[[], Any], limit: float) -> bool:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            self.alive()
            if await check():
                return True
            await asyncio.sleep(POLL)
        return False

    async def settle(self, after: float) -> float:
        """Wait until the operator was quiet QUIET seconds (Leases aside); returns when that began."""
        last = await _quiet(self.log, QUIET, 120.0)
        return max(last, after) + 0.001

    async def idle(self, key: str) -> None:
        t, cpu = time.time(), proc.cpu_seconds(self.op.pid)
        await asyncio.sleep(self.opts.idle)
        self.raw[key] = {
            "start": t,
            "end": time.time(),
            "cpu": proc.cpu_seconds(self.op.pid) - cpu,
            "rss": proc.rss(self.op.pid),
        }

    # -- the steps ----------------------------------------------------------------------------

    async def nova(self, nova: dict[str, Any]) -> None:
        nova = copy.deepcopy(nova)
        nova["metadata"]["namespace"] = NS
        t = time.time()
        await self.kube.create(f"{NOVAS}/namespaces/{NS}/novas", nova)

        async def ready() -> bool:
            obj = await self.kube.get(f"{NOVAS}/namespaces/{NS}/novas/{NAME}")
            return obj is not None and nova_ready(obj)

        if not await self.until(ready, self.opts.timeout):
            raise RuntimeError(f"the Nova was not Ready in {self.opts.timeout:.0f} s")
        self.raw["nova_ready_seconds"] = time.time() - t
        self.raw["t_nova_settled"] = await self.settle(time.time())

    async def create_pools(self) -> None:
        m0 = self.metrics()
        cpu0 = proc.cpu_seconds(self.op.pid)
        window = proc.CpuWindow(
            {**self.handle.cluster.processes(), "operator": self.op.pid, "bench and stand-ins": os.getpid()}
        )
        window.start()
        sem = asyncio.Semaphore(8)

        async def create(index: int, name: str) -> None:
            async with sem:
                await self.kube.create(POOLS.format(ns=NS), pool_doc(name, index))

        t0 = time.time()
        await asyncio.gather(*(create(i, n) for i, n in enumerate(self.names)))
        ready_at: dict[str, float] = {}

        async def all_ready() -> bool:
            now = time.time()
            for name, obj in (await self.pools()).items():
                if name not in ready_at and nova_ready(obj):
                    ready_at[name] = now
            return len(ready_at) == len(self.names)

        converged = await self.until(all_ready, self.opts.timeout)
        t_ready = time.time()
        self.raw["cpu_by_process"] = window.stop()
        self.raw["machine_busy"] = window.machine_busy
        t_settled = await self.settle(t_ready)
        m1 = self.metrics()
        self.raw.update(
            t0=t0,
            ready_at=ready_at,
            converged=converged,
            t_settled=t_settled,
            cpu_converge=proc.cpu_seconds(self.op.pid) - cpu0,
            rss_converged=proc.rss(self.op.pid),
            passes_converge=self.passes(m1) - self.passes(m0),
        )

    async def wake(self) -> None:
        before = self.metrics()
        p0 = self.passes(before)
        t = time.time()
        for name in self.names:
            await self.kube.merge_patch(
                f"{POOLS.format(ns=NS)}/{name}",
                {"metadata": {"annotations": {"bench.nova.openstack.c5c3.io/touch": str(t)}}},
            )

        async def done() -> bool:
            text = self.metrics()
            return self.passes(text) - p0 >= len(self.names) and (
                promtext.total(text, DEPTH, name=CONTROLLER) == 0
            )

        await self.until(done, 120)
        await asyncio.sleep(2.0)
        self.raw["wake"] = {"start": t, "end": time.time(), "passes": self.passes(self.metrics()) - p0}

    async def floor(self) -> None:
        """Each pool's DaemonSet as a plain client would create it, until every copy is rolled out."""
        copies = []
        for name, ds in sorted(
            (d["metadata"]["name"], d) for d in await self.kube.list(DAEMONSETS.format(ns=NS))
        ):
            template = copy.deepcopy(ds["spec"]["template"])
            template["metadata"] = {"labels": {FLOOR_LABEL: name}}
            copies.append(
                {
                    "apiVersion": "apps/v1",
                    "kind": "DaemonSet",
                    "metadata": {"name": name, "namespace": FLOOR_NS},
                    "spec": {
                        "selector": {"matchLabels": {FLOOR_LABEL: name}},
                        "template": template,
                        "updateStrategy": ds["spec"].get("updateStrategy") or {},
                    },
                }
            )
        await self.kube.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": FLOOR_NS}}
        )
        window = proc.CpuWindow({**self.handle.cluster.processes(), "bench and stand-ins": os.getpid()})
        window.start()
        t0 = time.time()
        await asyncio.gather(*(self.kube.create(DAEMONSETS.format(ns=FLOOR_NS), c) for c in copies))
        want = self.opts.pools * self.opts.nodes

        async def rolled_out() -> bool:
            items = await self.kube.list(DAEMONSETS.format(ns=FLOOR_NS))
            counts = [
                (int((d.get("status") or {}).get("numberReady") or 0),
                 int((d.get("status") or {}).get("desiredNumberScheduled") or 0))
                for d in items
            ]  # fmt: skip
            return (
                len(items) == len(copies)
                and sum(r for r, _ in counts) >= want
                and all(r == d for r, d in counts)
            )

        finished = await self.until(rolled_out, self.opts.timeout)
        seconds = time.time() - t0
        self.raw["floor"] = {
            "finished": finished,
            "daemonsets": len(copies),
            "seconds": seconds,
            "cpu_by_process": window.stop(),
            "machine_busy": window.machine_busy,
        }
        await self.kube.request("DELETE", f"/api/v1/namespaces/{FLOOR_NS}")

        async def gone() -> bool:
            try:
                return not await self.kube.list(f"/api/v1/namespaces/{FLOOR_NS}/pods?limit=1")
            except ApiError:
                return True

        t1 = time.time()
        await self.until(gone, self.opts.timeout)
        self.raw["floor"]["teardown_seconds"] = time.time() - t1
        self.raw["t_floor_gone"] = await self.settle(time.time())

    async def join(self, spare: list[str]) -> None:
        m0 = self.metrics()
        cpu0 = proc.cpu_seconds(self.op.pid)
        t0 = time.time()
        latencies: list[float] = []
        for k, node in enumerate(spare):
            index = k % len(self.names)
            pool = self.names[index]
            await asyncio.sleep(gap_before(k, self.opts.join_gap))
            t = time.time()
            await self.kube.merge_patch(
                f"/api/v1/nodes/{node}",
                {"metadata": {"labels": {POOL_LABEL: pool, ZONE_LABEL: zone_of(index)}}},
            )

            async def active(pool: str = pool, node: str = node) -> bool:
                obj = await self.kube.get(f"{POOLS.format(ns=NS)}/{pool}")
                e = _entry(obj or {}, node)
                return (
                    e.get("phase") == "Active"
                    and e.get("serviceState") == "up"
                    and _cond(obj or {}, "AggregatesReady")
                )

            if await self.until(active, self.opts.join_timeout):
                latencies.append(time.time() - t)
            print(f"bench pools: join {k + 1}/{len(spare)}: {node} -> {pool}", flush=True)
        end = time.time()
        self.raw["joins"] = {
            "start": t0,
            "end": end,
            "latencies": latencies,
            "attempted": len(spare),
            "passes": self.passes(self.metrics()) - self.passes(m0),
            "cpu": proc.cpu_seconds(self.op.pid) - cpu0,
        }

    async def drain(self, nodes: dict[str, list[str]]) -> None:
        chosen = drained_nodes(nodes, self.opts.drain)
        services = {}
        for n in chosen:
            svc = self.fake.service_by_host(n)
            if svc is not None:
                services[n] = svc.uuid
        m0 = self.metrics()
        cpu0 = proc.cpu_seconds(self.op.pid)
        t0 = time.time()
        await asyncio.gather(
            *(self.kube.merge_patch(f"/api/v1/nodes/{n}", {"metadata": {"labels": {POOL_LABEL: None}}})
              for n in chosen)
        )  # fmt: skip

        async def done() -> bool:
            left = self.fake.services_by_host()
            return not any(n in left for n in services)

        finished = await self.until(done, self.opts.timeout)
        self.raw["drain"] = {
            "start": t0,
            "end": time.time(),
            "finished": finished,
            "services": services,
            "nodes": len(chosen),
            "passes": self.passes(self.metrics()) - self.passes(m0),
            "cpu": proc.cpu_seconds(self.op.pid) - cpu0,
        }


async def measure(handle: SimHandle, op: Operator, opts: PoolsOptions, nova: dict[str, Any],
                  nodes: dict[str, list[str]], spare: list[str]) -> dict[str, Any]:  # fmt: skip
    cp = handle.cluster.control_plane
    async with AsyncKube(cp.server, cp.admin_token, cp.ca_file) as kube:
        r = Run(handle, op, opts, kube)
        print("bench pools: the Nova ...", flush=True)
        await r.nova(nova)
        print(f"bench pools: Nova Ready after {r.raw['nova_ready_seconds']:.1f} s; idle, no pool", flush=True)
        r.raw["rss_empty"] = proc.rss(op.pid)
        await r.idle("idle_empty")
        print(f"bench pools: creating {opts.pools} pools of {opts.nodes} nodes", flush=True)
        await r.create_pools()
        ready = r.raw["ready_at"]
        last = max(ready.values()) - r.raw["t0"] if ready else float("nan")
        print(f"bench pools: {len(ready)}/{opts.pools} pools Ready, the last after {last:.1f} s", flush=True)
        await r.wake()
        print("bench pools: converged pass measured; idle", flush=True)
        await r.idle("idle_full")
        print("bench pools: the floor (plain DaemonSets)", flush=True)
        await r.floor()
        print(f"bench pools: floor {r.raw['floor']['seconds']:.1f} s; {len(spare)} joins", flush=True)
        await r.join(spare)
        print(
            f"bench pools: drain of {min(opts.drain, len(drained_nodes(nodes, opts.drain)))} nodes",
            flush=True,
        )
        await r.drain(nodes)
        r.raw["rss_end"] = proc.rss(op.pid)
        r.raw["rss_peak"] = max(r.rss_peak, proc.rss_peak(op.pid))
        r.raw["cpu_total"] = proc.cpu_seconds(op.pid)
        r.log.refresh()
        return compute(r.raw, r.log, r.calls(), opts)


def compute(
    raw: dict[str, Any], log: audit.AuditLog, calls: list[ComputeCall], opts: PoolsOptions
) -> dict[str, Any]:
    """The figures of one run (``poolfigures`` does the arithmetic)."""
    pf = poolfigures
    t0 = raw["t0"]
    ready = pf.ready_times(raw["ready_at"], t0, opts.pools)
    floor = raw.get("floor") or {}
    floor_seconds = round(floor["seconds"], 2) if floor.get("finished") else None
    wake, joins, drain = raw["wake"], raw["joins"], raw["drain"]
    idle0, idle1 = raw["idle_empty"], raw["idle_full"]
    return {
        "pools": opts.pools,
        "nodes_per_pool": opts.nodes,
        "nodes": opts.pools * opts.nodes,
        "converged": raw["converged"],
        "nova_ready_seconds": round(raw["nova_ready_seconds"], 2),
        "ready": ready,
        "floor": {**floor, "seconds": floor_seconds},
        "ready_last_over_floor": pf.versus_floor(ready["last"], floor_seconds),
        "converge": {
            **pf.window(log, calls, t0, raw["t_settled"], raw["passes_converge"]),
            "passes_per_pool": pf.ratio(raw["passes_converge"], opts.pools),
        },
        "converged_pass": pf.window(log, calls, wake["start"], wake["end"], wake["passes"]),
        "idle_empty": pf.window(log, calls, idle0["start"], idle0["end"], 0),
        "idle_full": pf.window(log, calls, idle1["start"], idle1["end"], 0),
        "join": {
            **pf.joins(joins["latencies"], joins["attempted"]),
            "gap_seconds": opts.join_gap,
            "window": pf.window(log, calls, joins["start"], joins["end"], joins["passes"]),
            "cpu_seconds": round(joins["cpu"], 2),
        },
        "drain": {
            **pf.drain(calls, drain["services"], drain["start"]),
            "finished": drain["finished"],
            "window": pf.window(log, calls, drain["start"], drain["end"], drain["passes"]),
            "cpu_seconds": round(drain["cpu"], 2),
        },
        "machine": {
            "busy_fraction_converge": raw.get("machine_busy"),
            "cpu_seconds_converge": raw.get("cpu_by_process", {}),
        },
        "operator": {
            "rss_mib_empty": round(raw["rss_empty"], 1),
            "rss_mib_converged": round(raw["rss_converged"], 1),
            "rss_mib_growth": round(raw["rss_converged"] - raw["rss_empty"], 1),
            "rss_mib_idle_full": round(idle1["rss"], 1),
            "rss_mib_peak": round(raw["rss_peak"], 1),
            "rss_mib_end": round(raw["rss_end"], 1),
            "cpu_seconds_per_idle_minute_empty": pf.ratio(
                idle0["cpu"], (idle0["end"] - idle0["start"]) / 60, 3
            ),
            "cpu_seconds_per_idle_minute_full": pf.ratio(
                idle1["cpu"], (idle1["end"] - idle1["start"]) / 60, 3
            ),
            "cpu_seconds_converge": round(raw["cpu_converge"], 2),
            "cpu_seconds_total": round(raw["cpu_total"], 2),
        },
    }


def run(opts: PoolsOptions) -> dict[str, Any]:
    workdir = opts.workdir or pathlib.Path(tempfile.mkdtemp(prefix="nova-bench-pools-"))
    load0 = os.getloadavg()
    t_start = time.monotonic()
    total = opts.pools * opts.nodes
    print(f"bench pools: {opts.pools} x {opts.nodes} = {total} nodes; cluster in {workdir} ...", flush=True)
    handle = launch(workdir, nodes=0, pools={}, audit=True)
    try:
        base = Options(novas=1, out=opts.out, operator_args=list(opts.operator_args))
        nova = prepare(handle, base)
        t = time.monotonic()
        nodes, spare = create_nodes(handle, opts)
        print(
            f"bench pools: {total + len(spare)} kwok nodes Ready in {time.monotonic() - t:.0f} s", flush=True
        )
        op = start_operator(handle, base)
        print(f"bench pools: the operator leads {op.led_after:.1f} s after its start", flush=True)
        result = asyncio.run(measure(handle, op, opts, nova, nodes, spare))
    finally:
        handle.stop()
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
        "idle_seconds": opts.idle,
    }
    opts.out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return result
