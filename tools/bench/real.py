"""``make bench-real``: the minimal sample's bring-up on the real-Nova tier, measured (not a test).

The minimal Nova and the sample pool are applied together, as a user applies the samples. Seconds
from that create to each stage (the Nova's MariaDB objects Ready, db-sync done, each Deployment
available, the Nova Ready; each change of the pool's conditions, the pool Ready), the issue's two
figures (the Nova Ready after its create, the pool Ready after the Nova's), and the RSS of every pod
(the sum over the processes of its containers). Prints a table and writes JSON.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import time
from typing import Any

import yaml
from simcluster.platform.controlplane import REPO, free_port
from simcluster.platform.operator import operator_argv
from simcluster.realtier.launch import FAKE_COMPUTE_DRIVER, launch_real

from bench.proc import rss

SAMPLES = REPO / "config" / "samples"
NS, NOVA, POOL = "openstack", "nova", "rack7"
GROUP = "/apis/nova.openstack.c5c3.io/v1alpha1"
POOL_LABELS = {"example.org/compute-pool": POOL, "topology.kubernetes.io/zone": "az1"}
ROLES = ("", "-metadata", "-scheduler", "-conductor", "-novncproxy")
SHIM = re.compile(r"shim\.py\x00run\x00[^\x00]*/pods/([0-9a-f-]{36})/containers/([^/\x00]+)/")


def _ready(obj: dict[str, Any] | None, ctype: str = "Ready") -> bool:
    conds = ((obj or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == ctype and c["status"] == "True" for c in conds)


def pod_rss() -> dict[str, float]:
    """Pod uid -> MiB: every process below a container's shim, by the shim's spec path."""
    children: dict[int, list[int]] = {}
    shims: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
            cmdline = pathlib.Path(f"/proc/{pid}/cmdline").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(ppid, []).append(pid)
        match = SHIM.search(cmdline)
        if match:
            shims[pid] = match.group(1)
    totals: dict[str, float] = {}
    for shim, uid in shims.items():
        stack, total = list(children.get(shim, [])), 0.0
        while stack:
            pid = stack.pop()
            total += rss(pid)
            stack.extend(children.get(pid, []))
        totals[uid] = totals.get(uid, 0.0) + total
    return totals


def run(out: pathlib.Path, timeout: float = 600.0) -> dict[str, Any]:
    t_launch = time.monotonic()
    release = str(yaml.safe_load((SAMPLES / "nova_minimal.yaml").read_text())["spec"]["openStackRelease"])
    handle = launch_real(
        None, releases=(release,), node_labels=dict.fromkeys(("compute-0", "compute-1"), POOL_LABELS)
    )
    figures: dict[str, Any] = {"cluster start (s)": round(time.monotonic() - t_launch, 1)}
    assert handle.real is not None
    figures["cluster start parts (s)"] = {k: round(v, 1) for k, v in handle.real.startup.items()}
    try:
        kube = handle.cluster.kube
        handle.install()
        handle.create_gateway(NS, "public-gateway")
        password = next(
            d["stringData"]["password"]
            for d in yaml.safe_load_all((SAMPLES / "secrets.yaml").read_text())
            if d["metadata"]["name"] == "nova-service-user"
        )
        handle.real.openstack.add_service_user("nova", password)
        pool = yaml.safe_load((SAMPLES / "novacompute.yaml").read_text())
        pool["spec"].setdefault("extraConfig", {}).setdefault("DEFAULT", {})["compute_driver"] = (
            FAKE_COMPUTE_DRIVER
        )
        pool_file = handle.workdir / "novacompute.yaml"
        pool_file.write_text(yaml.safe_dump(pool, sort_keys=False))
        handle.apply(
            SAMPLES / "secrets.yaml",
            REPO / "tools" / "simcluster" / "samples" / "dependencies.yaml",
            namespace=NS,
        )
        argv = operator_argv(handle, free_port())
        handle.spawn("operator", handle.real.in_cluster_dns(argv))
        t0 = time.monotonic()
        # Both at once, as a user applies the samples (and as make run does): the pool waits for
        # its Nova, and what it does meanwhile overlaps the Nova's bring-up.
        handle.apply(SAMPLES / "nova_minimal.yaml", pool_file, namespace=NS)
        stages: dict[str, float] = {}
        deadline = t0 + timeout

        def mark(name: str) -> None:
            if name not in stages:
                stages[name] = round(time.monotonic() - t0, 1)
                print(f"  {stages[name]:6.1f}s  {name}", flush=True)

        while time.monotonic() < deadline:
            nova = kube.get(f"{GROUP}/namespaces/{NS}/novas/{NOVA}")
            dbs = kube.get(f"/apis/k8s.mariadb.com/v1alpha1/namespaces/{NS}/databases")["items"]
            if dbs and all(_ready(d) for d in dbs) and len(dbs) >= 3:
                mark("MariaDB objects Ready")
            if _ready(nova, "DatabaseReady"):
                mark("db-sync done")
            for role in ROLES:
                dep = _get(kube, f"/apis/apps/v1/namespaces/{NS}/deployments/{NOVA}{role}")
                if dep and dep.get("status", {}).get("availableReplicas", 0) >= dep["spec"]["replicas"]:
                    mark(f"Deployment {NOVA}{role} available")
            if _ready(nova):
                mark("Nova Ready")
            pool = _get(kube, f"{GROUP}/namespaces/{NS}/novacomputes/{POOL}")
            for cond in ((pool or {}).get("status") or {}).get("conditions") or []:
                if cond["type"] in ("NovaReady", "DaemonSetReady", "ServicesReady", "AggregatesReady"):
                    mark(f"pool {cond['type']} {cond['status']} {cond['reason']}")
            if _ready(pool):
                mark("pool Ready")
            if "Nova Ready" in stages and "pool Ready" in stages:
                figures["Nova Ready after its create (s)"] = stages["Nova Ready"]
                figures["pool Ready after the Nova's Ready (s)"] = round(
                    stages["pool Ready"] - stages["Nova Ready"], 1
                )
                break
            time.sleep(0.5)
        else:
            raise SystemExit(f"not Ready within {timeout:.0f} s; stages so far: {stages}")
        figures["stages, s after the create"] = stages
        time.sleep(10)  # settle: RSS of the idle pods
        by_uid = pod_rss()
        pod_list = kube.get(f"/api/v1/namespaces/{NS}/pods")["items"]
        figures["pod RSS (MiB)"] = {
            p["metadata"]["name"]: round(by_uid.get(p["metadata"]["uid"], 0.0), 1)
            for p in pod_list
            if p["status"].get("phase") == "Running"
        }
        figures["pod RSS total (MiB)"] = round(sum(figures["pod RSS (MiB)"].values()), 1)
    finally:
        handle.stop()
    out.write_text(json.dumps(figures, indent=2) + "\n")
    return figures


def _get(kube: Any, path: str) -> dict[str, Any] | None:
    try:
        obj: dict[str, Any] = kube.get(path)
        return obj
    except Exception:
        return None


def report(figures: dict[str, Any]) -> str:
    lines = ["", "real-Nova bring-up (minimal sample)", f"  cluster start: {figures['cluster start (s)']} s"]
    for part, seconds in figures["cluster start parts (s)"].items():
        lines.append(f"    {part:<32} {seconds:6.1f} s")
    lines.append("  after the Nova's and the pool's create (applied together):")
    for stage, seconds in figures["stages, s after the create"].items():
        lines.append(f"    {stage:<56} {seconds:6.1f} s")
    lines.append(f"  Nova Ready after its create: {figures['Nova Ready after its create (s)']} s")
    pool_after = figures["pool Ready after the Nova's Ready (s)"]
    lines.append(f"  pool Ready after the Nova's Ready: {pool_after} s")
    lines.append("  pod RSS (MiB):")
    for pod, mib in sorted(figures["pod RSS (MiB)"].items()):
        lines.append(f"    {pod:<40} {mib:8.1f}")
    lines.append(f"    {'total':<40} {figures['pod RSS total (MiB)']:8.1f}")
    return "\n".join(lines)
