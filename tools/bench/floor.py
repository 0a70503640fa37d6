"""``python -m bench floor``: what the simulated cluster alone needs for N Novas' children.

The issue behind ``make bench`` asked whether the cluster is the limit ("the same Deployments and
Jobs created by a plain client"). This answers it on the machine at hand:

1. The simulated cluster and N + 1 namespaces with their prerequisites, as ``run`` prepares them.
2. The operator reconciles one Nova (the last namespace) to Ready; every object it created there
   (label ``app.kubernetes.io/managed-by=nova-operator``) is read back, and the operator stopped.
3. Those objects, with what the API server sets (uid, resourceVersion, owner references, status,
   cluster IPs, a Job's selector) left out, are created in the N other namespaces by a plain
   client (``--apply``: server-side apply, the operator's verb), 16 requests in flight, all of a
   namespace's objects at once in the operator's kind order (nothing waits for a database or a
   Job, as the operator must): the most the cluster could be asked to do at a time.
4. Measured: when the creates ended, when every Deployment was available, every Job complete and
   every route accepted (the tracker ``run`` uses); the CPU seconds of each process meanwhile and
   how busy the machine was.
"""

from __future__ import annotations

import asyncio
import copy
import os
import pathlib
import statistics
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from simcluster import SimHandle, launch
from simcluster.client.asynckube import ApiError, AsyncKube

from bench import proc
from bench.run import NAME, NOVAS, Options, in_namespace, namespaces, prepare, start_operator
from bench.tracker import Tracker

MANAGED = "app.kubernetes.io%2Fmanaged-by%3Dnova-operator"
# kind -> collection path under a namespace, in the order the operator creates them
KINDS: tuple[tuple[str, str], ...] = (
    ("NetworkPolicy", "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies"),
    ("Secret", "/api/v1/namespaces/{ns}/secrets"),
    ("ConfigMap", "/api/v1/namespaces/{ns}/configmaps"),
    ("Database", "/apis/k8s.mariadb.com/v1alpha1/namespaces/{ns}/databases"),
    ("User", "/apis/k8s.mariadb.com/v1alpha1/namespaces/{ns}/users"),
    ("Grant", "/apis/k8s.mariadb.com/v1alpha1/namespaces/{ns}/grants"),
    ("Job", "/apis/batch/v1/namespaces/{ns}/jobs"),
    ("Deployment", "/apis/apps/v1/namespaces/{ns}/deployments"),
    ("Service", "/api/v1/namespaces/{ns}/services"),
    ("PodDisruptionBudget", "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"),
    ("HorizontalPodAutoscaler", "/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers"),
    ("CronJob", "/apis/batch/v1/namespaces/{ns}/cronjobs"),
    ("HTTPRoute", "/apis/gateway.networking.k8s.io/v1/namespaces/{ns}/httproutes"),
)
_SERVER_META = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "ownerReferences",
)
_JOB_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid")


@dataclass
class FloorOptions:
    novas: int
    workdir: pathlib.Path | None = None
    timeout: float = 600.0
    apply: bool = False  # server-side apply (the operator's verb) instead of create


def portable(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as a plain client would create it anew: what the API server set left out."""
    out = copy.deepcopy(obj)
    out.pop("status", None)
    meta = out["metadata"]
    for key in _SERVER_META:
        meta.pop(key, None)
    meta.pop("namespace", None)
    spec = out.get("spec") or {}
    if kind == "Service":
        for key in ("clusterIP", "clusterIPs"):
            spec.pop(key, None)
    if kind == "Job":
        spec.pop("selector", None)
        template_meta = (spec.get("template") or {}).get("metadata") or {}
        for labels in (meta.get("labels") or {}, template_meta.get("labels") or {}):
            for key in _JOB_LABELS:
                labels.pop(key, None)
    return out


async def _template(kube: AsyncKube, ns: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(kind, collection path pattern, object) of every child the operator made in ``ns``."""
    children = []
    for kind, pattern in KINDS:
        items = await kube.list(pattern.format(ns=ns) + f"?labelSelector={MANAGED}")
        if kind == "Job":  # the db-sync Job only (a CronJob's runs are the CronJob's business)
            items = [
                o
                for o in items
                if not any(r.get("kind") == "CronJob" for r in o["metadata"].get("ownerReferences") or [])
            ]
        parts = pattern.split("/")
        api_version = parts[2] if parts[1] == "api" else f"{parts[2]}/{parts[3]}"
        children += [
            (kind, pattern, {"apiVersion": api_version, "kind": kind, **portable(kind, o)}) for o in items
        ]
    return children


async def _reconcile_template(handle: SimHandle, opts: Options, nova: dict[str, Any], ns: str) -> None:
    op = start_operator(handle, opts)
    try:
        cp = handle.cluster.control_plane
        async with AsyncKube(cp.server, cp.admin_token, cp.ca_file) as kube:
            await kube.create(f"{NOVAS}/namespaces/{ns}/novas", in_namespace(nova, ns))
            tracker = Tracker(kube, {ns})
            tracker.start()
            try:
                if not await tracker.wait(lambda: ("novas", ns, NAME) in tracker.ready, 300):
                    raise RuntimeError(f"the template Nova in {ns} did not become Ready in 300 s")
            finally:
                await tracker.stop()
    finally:
        op.process.stop()


async def _replay(
    handle: SimHandle,
    children: list[tuple[str, str, dict[str, Any]]],
    names: list[str],
    within: float,
    apply: bool = False,
) -> dict[str, Any]:
    cp = handle.cluster.control_plane
    async with AsyncKube(cp.server, cp.admin_token, cp.ca_file) as kube:
        tracker = Tracker(kube, set(names))
        tracker.start()
        await asyncio.sleep(2.0)
        window = proc.CpuWindow({**handle.cluster.processes(), "bench and stand-ins": os.getpid()})
        sem = asyncio.Semaphore(16)
        done_at: list[float] = []

        async def one(ns: str) -> None:
            for _kind, pattern, obj in children:
                async with sem:
                    try:
                        if apply:
                            name = obj["metadata"]["name"]
                            path = f"{pattern.format(ns=ns)}/{name}?fieldManager=nova-operator&force=true"
                            await kube.request("PATCH", path, obj, "application/apply-patch+yaml")
                        else:
                            await kube.create(pattern.format(ns=ns), obj)
                    except ApiError as exc:  # a prerequisite the operator only updated (the samples')
                        if exc.status != 409:
                            raise
            done_at.append(time.time())

        want = {
            "deployments": sum(1 for k, _, _ in children if k == "Deployment"),
            "jobs": sum(1 for k, _, _ in children if k == "Job"),
            "httproutes": sum(1 for k, _, _ in children if k == "HTTPRoute"),
        }

        def finished() -> bool:
            return all(len(tracker.ready_in(kind, ns)) >= n for kind, n in want.items() for ns in names)

        window.start()
        t0 = time.time()
        await asyncio.gather(*(one(ns) for ns in names))
        t_created = time.time()
        ok = await tracker.wait(finished, within)
        cpu = window.stop()
        per_ns = (
            [max(t for kind in want for t in tracker.ready_in(kind, ns)) - t0 for ns in names] if ok else []
        )
        await tracker.stop()
    return {
        "finished": ok,
        "objects_per_namespace": len(children),
        "kinds": sorted({k for k, _, _ in children}),
        "creates_seconds": round(t_created - t0, 2),
        "all_ready": {
            "first": round(min(per_ns), 2) if per_ns else None,
            "median": round(statistics.median(per_ns), 2) if per_ns else None,
            "last": round(max(per_ns), 2) if per_ns else None,
        },
        "machine": {"busy_fraction": window.machine_busy, "cpu_seconds": cpu},
    }


def floor(opts: FloorOptions) -> dict[str, Any]:
    workdir = opts.workdir or pathlib.Path(tempfile.mkdtemp(prefix="nova-floor-"))
    print(f"floor: {opts.novas} namespace(s); simulated cluster in {workdir} ...", flush=True)
    handle = launch(workdir, nodes=0, pools={})
    try:
        run_opts = Options(novas=opts.novas + 1, out=workdir / "unused.json")
        nova = prepare(handle, run_opts)
        *names, template_ns = namespaces(opts.novas + 1)
        asyncio.run(_reconcile_template(handle, run_opts, nova, template_ns))
        cp = handle.cluster.control_plane

        async def read() -> list[tuple[str, str, dict[str, Any]]]:
            async with AsyncKube(cp.server, cp.admin_token, cp.ca_file) as kube:
                return await _template(kube, template_ns)

        children = asyncio.run(read())
        print(
            f"floor: {len(children)} objects per Nova; creating them in {len(names)} namespaces", flush=True
        )
        result = asyncio.run(_replay(handle, children, names, opts.timeout, opts.apply))
        result["verb"] = "server-side apply" if opts.apply else "create"
    finally:
        handle.stop()
    result["novas"] = opts.novas
    result["machine_cores"] = os.cpu_count()
    return result
