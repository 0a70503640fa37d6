"""``python -m bench writes``: what one write costs the API server, by kind (issue 27's floor argument).

On a bare control plane (etcd + kube-apiserver, nothing else running), over one kept-alive
connection as the operator's client holds it, ``--count`` writes of each sort are sent one after
another and the API server's CPU seconds (``/proc``) are divided by their number:

- a Nova created from ``config/samples/nova_minimal.yaml``, a merge patch of its metadata (the
  finalizer, a Job claim) and of its status subresource (a condition's reason);
- a ConfigMap created and patched the same way, for comparison;
- the three Nova writes again after the CRD's CEL rules (``x-kubernetes-validations``) are taken
  out, which says how much of a Nova write the rules cost.

The last line multiplies by the Nova writes that issue 27's budget allows per Nova (its create,
two patches, three status writes) for N Novas: API-server CPU that no queue design can save.
The API server's idle rate, measured first, is taken out of every figure.
"""

from __future__ import annotations

import asyncio
import pathlib
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import yaml
from simcluster.client.asynckube import AsyncKube
from simcluster.client.kube import Kube
from simcluster.platform.controlplane import REPO, ControlPlane, find_binaries

from bench import proc

NOVA_PATH = "/apis/nova.openstack.c5c3.io/v1alpha1/namespaces/{ns}/novas"
CONFIGMAP_PATH = "/api/v1/namespaces/{ns}/configmaps"
NAMESPACE = "bench-writes"
# The Nova writes issue 27's budget allows per Nova: sort -> how many
BUDGET: dict[str, int] = {"nova create": 1, "nova patch": 2, "nova status patch": 3}


@dataclass
class WritesOptions:
    count: int = 300
    novas: int = 100
    workdir: pathlib.Path | None = None


def without_cel(crd: dict[str, Any]) -> dict[str, Any]:
    """``crd`` with every ``x-kubernetes-validations`` list of its schemas taken out."""

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k != "x-kubernetes-validations"}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    out: dict[str, Any] = strip(crd)  # new dicts and lists throughout: ``crd`` stays as it was
    meta = out.get("metadata") or {}
    out["metadata"] = {"name": meta.get("name")}  # applied over the live one: no stale version
    return out


def cel_rules(crd: dict[str, Any]) -> int:
    """How many CEL rules ``crd``'s schemas carry."""
    if isinstance(crd, dict):
        own = len(crd.get("x-kubernetes-validations") or [])
        return own + sum(cel_rules(v) for v in crd.values())
    if isinstance(crd, list):
        return sum(cel_rules(v) for v in crd)
    return 0


def budget_seconds(per_write_ms: dict[str, float], novas: int) -> float:
    """API-server CPU seconds of ``novas`` Novas' own writes at the budget (``BUDGET``)."""
    return sum(per_write_ms[sort] * n for sort, n in BUDGET.items()) * novas / 1000.0


Write = Callable[[int], Awaitable[object]]


def _condition(reason: str) -> dict[str, Any]:
    return {
        "status": {
            "observedGeneration": 1,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": reason,
                    "message": "waiting for the databases, the db-sync Job and the workloads",
                    "lastTransitionTime": "2026-12-03T00:00:00Z",
                    "observedGeneration": 1,
                }
            ],
        }
    }


def _nova_writes(kube: AsyncKube, prefix: int) -> dict[str, Write]:
    """Nova ``prefix + i``, made from the minimal sample (read once), and its two patches."""
    base = NOVA_PATH.format(ns=NAMESPACE)
    sample = yaml.safe_load((REPO / "config" / "samples" / "nova_minimal.yaml").read_text())

    def name(i: int) -> str:
        return f"nova-{prefix + i:04d}"

    def nova(i: int) -> dict[str, Any]:
        return {**sample, "metadata": {"name": name(i), "namespace": NAMESPACE}}

    return {
        "nova create": lambda i: kube.create(base, nova(i)),
        "nova patch": lambda i: kube.merge_patch(
            f"{base}/{name(i)}", {"metadata": {"annotations": {"bench/claim": str(i)}}}
        ),
        "nova status patch": lambda i: kube.merge_patch(
            f"{base}/{name(i)}/status", _condition(f"Waiting{i % 7}")
        ),
    }


def _configmap_writes(kube: AsyncKube) -> dict[str, Write]:
    base = CONFIGMAP_PATH.format(ns=NAMESPACE)
    return {
        "configmap create": lambda i: kube.create(
            base,
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"cm-{i:04d}"},
                "data": {"nova.conf": "x" * 4000},
            },
        ),
        "configmap patch": lambda i: kube.merge_patch(
            f"{base}/cm-{i:04d}", {"metadata": {"annotations": {"bench/claim": str(i)}}}
        ),
    }


async def _measure(pid: int, idle_rate: float, count: int, write: Write) -> float:
    """Milliseconds of API-server CPU per write (one at a time), its idle rate taken out."""
    cpu0, t0 = proc.cpu_seconds(pid), time.monotonic()
    for i in range(count):
        await write(i)
    await asyncio.sleep(0.5)  # the watch cache's and etcd's share of the last writes
    spent = proc.cpu_seconds(pid) - cpu0 - idle_rate * (time.monotonic() - t0)
    return max(spent, 0.0) * 1000.0 / count


async def _per_write(
    plane: ControlPlane, kube: Kube, crd: dict[str, Any], pid: int, idle_rate: float, count: int
) -> dict[str, float]:
    """Each sort's cost; then the CRD without its CEL rules and the Nova writes again."""
    per_write: dict[str, float] = {}
    async with AsyncKube(plane.server, plane.admin_token, plane.ca_file) as client:  # one kept-alive session
        for sort, write in {**_nova_writes(client, 0), **_configmap_writes(client)}.items():
            per_write[sort] = round(await _measure(pid, idle_rate, count, write), 2)
        kube.apply(without_cel(crd))
        await asyncio.sleep(3.0)  # the handler rebuilt without the rules
        for sort, write in _nova_writes(client, count).items():
            per_write[f"{sort}, no CEL"] = round(await _measure(pid, idle_rate, count, write), 2)
    return per_write


def writes(opts: WritesOptions) -> dict[str, Any]:
    workdir = opts.workdir or pathlib.Path(tempfile.mkdtemp(prefix="nova-writes-"))
    plane = ControlPlane(workdir=workdir, bindir=find_binaries()).start()
    try:
        kube = Kube(plane.server, plane.admin_token)
        pid = plane.processes()["kube-apiserver"]
        crd = yaml.safe_load((REPO / "config" / "crd" / "nova.openstack.c5c3.io_novas.yaml").read_text())
        kube.apply(crd)
        kube.wait_crds_established([crd["metadata"]["name"]])
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        time.sleep(3.0)  # the CRD's handler and the namespace settled
        cpu0 = proc.cpu_seconds(pid)
        time.sleep(5.0)
        idle_rate = (proc.cpu_seconds(pid) - cpu0) / 5.0
        per_write = asyncio.run(_per_write(plane, kube, crd, pid, idle_rate, opts.count))
        return {
            "count": opts.count,
            "novas": opts.novas,
            "cel_rules": cel_rules(crd),
            "idle_ms_per_second": round(idle_rate * 1000.0, 1),
            "per_write_ms": per_write,
            "budget_seconds": round(budget_seconds(per_write, opts.novas), 2),
            "budget_seconds_no_cel": round(
                budget_seconds({s: per_write[f"{s}, no CEL"] for s in BUDGET}, opts.novas), 2
            ),
        }
    finally:
        plane.stop()


def table(found: dict[str, Any]) -> str:
    """``bench writes``' figures as a Markdown table and the budget line."""
    lines = ["| write | API-server CPU per write (ms) |", "| --- | --- |"]
    lines += [f"| {sort} | {ms} |" for sort, ms in found["per_write_ms"].items()]
    budget = ", ".join(f"{sort} x{n}" for sort, n in BUDGET.items())
    lines.append(
        f"{found['novas']} Novas' own writes at issue 27's budget ({budget}): "
        f"{found['budget_seconds']} CPU-s of the API server ({found['budget_seconds_no_cel']} without the "
        f"CRD's {found['cel_rules']} CEL rules); idle API server {found['idle_ms_per_second']} ms/s, "
        "taken out"
    )
    return "\n".join(lines)
