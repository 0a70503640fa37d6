"""``python -m bench lease-load``: does the Lease hold on a busy machine, and where do renewals wait?

A real kube-apiserver and etcd (envtest), a leader elector as the operator's ServiceAccount, and,
beside it, what made renewals miss their deadline in issue 36:

- ``--hogs`` CPU hogs (default: one per core), busy processes at the cluster's priority;
- ``--listers`` tasks on the elector's event loop that LIST ``--objects`` ConfigMaps of 4 KiB
  over and over through the operator's shared client (decoding holds the loop, the requests
  fill the API server's seats of the operator's priority level).

For ``--seconds`` it records the event-loop lag, every renewal (from its due time to renewed or
lost), the Lease requests' latency, and then the API server's own figures: the priority and
fairness queue wait per priority level, and how long the Lease requests took in the API server.
It prints one table and writes the figures as JSON (``--out``).

``--flowschema`` first applies the FlowSchema and PriorityLevelConfiguration the chart ships
(for the ServiceAccount the elector runs as); ``--shared-pool`` sends the Lease requests through
the operator's shared client, retries and all, as before issue 36. Not part of ``make test``:
one run takes ``--seconds`` plus about 20 s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import pathlib
import shutil
import ssl
import tempfile
import time
import urllib.request
from typing import Any

from simcluster import ControlPlane, find_binaries
from simcluster.client.kube import Kube as AdminKube
from simcluster.client.kube import KubeError
from simcluster.platform.controlplane import OPERATOR_NAMESPACE, OPERATOR_USER
from simcluster.platform.flowcontrol import lease_flow_control

from bench import hogs, promtext
from nova_operator.kube.client import Kube
from nova_operator.kube.resources import CONFIGMAPS, LEASES
from nova_operator.runtime.leaderelection import LeaderElectionLost, LeaderElector
from nova_operator.runtime.looplag import LoopLag
from nova_operator.settings import LeaderElectionSettings

LEASE = "lease-load"


def _setup(admin: AdminKube, objects: int, flowschema: bool) -> None:
    with contextlib.suppress(KubeError):
        admin.post(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OPERATOR_NAMESPACE}},
        )
    rules = [
        {"apiGroups": [LEASES.group], "resources": [LEASES.plural], "verbs": ["get", "create", "update"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]},
    ]
    admin.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": LEASE},
            "rules": rules,
        },
        OPERATOR_NAMESPACE,
    )
    admin.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": LEASE},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": LEASE},
            "subjects": [{"kind": "User", "name": OPERATOR_USER}],
        },
        OPERATOR_NAMESPACE,
    )
    data = {"blob": "x" * 4096}
    for i in range(objects):
        with contextlib.suppress(KubeError):
            admin.post(
                f"/api/v1/namespaces/{OPERATOR_NAMESPACE}/configmaps",
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"load-{i}"}, "data": data},
            )
    if flowschema:
        for doc in lease_flow_control():  # as every install has them (``platform.flowcontrol``)
            admin.apply(doc)
        time.sleep(2)  # the API server's flowcontrol config controller picks them up


def _apiserver_metrics(plane: ControlPlane) -> str:
    req = urllib.request.Request(plane.server + "/metrics")
    req.add_header("Authorization", f"Bearer {plane.admin_token}")
    ctx = ssl.create_default_context(cafile=str(plane.ca_file))
    with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
        return str(resp.read().decode())


def _mean(text: str, metric: str, **labels: str) -> tuple[float, float]:
    """(mean seconds, count) of a histogram over the series matching ``labels``."""
    total = sum(v for _, v in promtext.samples(text, f"{metric}_sum", **labels))
    count = sum(v for _, v in promtext.samples(text, f"{metric}_count", **labels))
    return (total / count if count else 0.0), count


def _top(h: promtext.Histogram) -> float:
    """The smallest bucket bound that holds every observation (inf: some went past the last)."""
    n = h.get(math.inf, 0.0)
    return next((le for le, count in h.items() if count >= n), math.inf) if n else 0.0


async def _measure(plane: ControlPlane, opts: argparse.Namespace) -> dict[str, Any]:
    kube = await Kube.connect(kubeconfig=str(plane.kubeconfig), context="operator")
    metrics = kube.metrics
    settings = LeaderElectionSettings(namespace=OPERATOR_NAMESPACE, name=LEASE, identity="lease-load")
    elector = LeaderElector(kube, settings, metrics=metrics, own_connections=not opts.shared_pool)
    lag = LoopLag(metrics.loop_lag.observe)
    renewals: list[tuple[str, float]] = []
    observe = elector._observe_renewal

    def record(result: str, seconds: float) -> None:
        renewals.append((result, seconds))
        observe(result, seconds)

    elector._observe_renewal = record  # type: ignore[method-assign]
    lists = 0

    async def lister() -> None:
        nonlocal lists
        while True:
            with contextlib.suppress(Exception):
                await kube.list(CONFIGMAPS, OPERATOR_NAMESPACE)
                lists += 1

    async def lead() -> None:
        await asyncio.sleep(opts.seconds)

    tasks = [asyncio.create_task(lag.run())] + [asyncio.create_task(lister()) for _ in range(opts.listers)]
    lost = False
    try:
        await elector.run(lead)
    except LeaderElectionLost:
        lost = True
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await kube.close()
    text = metrics.render().decode()
    lease_put = promtext.histogram(
        text, "nova_operator_api_request_duration_seconds", verb="update", resource=str(LEASES)
    )
    lease_get = promtext.histogram(
        text, "nova_operator_api_request_duration_seconds", verb="get", resource=str(LEASES)
    )
    return {
        "lost_lease": lost,
        "worst_loop_lag_s": round(lag.worst, 3),
        "loop_lag_p99_s": promtext.quantile(
            promtext.histogram(text, "nova_operator_event_loop_lag_seconds"), 0.99
        ),
        "renewals": len(renewals),
        "worst_renewal_s": round(max((s for _, s in renewals), default=0.0), 3),
        "renewals_lost": sum(1 for r, _ in renewals if r == "lost"),
        "lease_get_max_bucket_s": _top(lease_get),
        "lease_put_max_bucket_s": _top(lease_put),
        "lists_done": lists,
    }


def run(opts: argparse.Namespace) -> dict[str, Any]:
    own_dir = not opts.workdir
    workdir = pathlib.Path(opts.workdir or tempfile.mkdtemp(prefix="lease-load-"))
    plane = ControlPlane(workdir, find_binaries()).start()
    try:
        admin = AdminKube(plane.server, plane.admin_token, plane.ca_file)
        _setup(admin, opts.objects, opts.flowschema)
        with hogs.running(opts.hogs):
            found = asyncio.run(_measure(plane, opts))
            text = _apiserver_metrics(plane)
    finally:
        plane.stop()
        if own_dir:
            shutil.rmtree(workdir, ignore_errors=True)
    wait = "apiserver_flowcontrol_request_wait_duration_seconds"
    levels = sorted({labels["priority_level"] for labels, _ in promtext.samples(text, f"{wait}_count")})
    found["apf_wait_mean_s"] = {lvl: round(_mean(text, wait, priority_level=lvl)[0], 4) for lvl in levels}
    for verb in ("GET", "PUT"):
        mean, count = _mean(text, "apiserver_request_duration_seconds", verb=verb, resource="leases")
        found[f"apiserver_lease_{verb.lower()}_mean_s"] = round(mean, 4)
        found[f"apiserver_lease_{verb.lower()}_count"] = count
    found["options"] = {k: v for k, v in vars(opts).items() if k != "func"}
    return found


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "lease-load", help="a leader elector beside CPU hogs and a busy loop: worst lag and renewal"
    )
    p.add_argument("--seconds", type=float, default=60.0, help="how long to hold the Lease (default 60)")
    p.add_argument("--hogs", type=int, default=hogs.DEFAULT, help="CPU hogs (default: one per core)")
    p.add_argument(
        "--listers", type=int, default=4, help="concurrent LIST loops on the elector's loop (default 4)"
    )
    p.add_argument("--objects", type=int, default=500, help="ConfigMaps of 4 KiB they list (default 500)")
    p.add_argument(
        "--flowschema", action="store_true", help="apply the chart's FlowSchema and priority level first"
    )
    p.add_argument(
        "--shared-pool", action="store_true", help="Lease requests on the shared client, as before"
    )
    p.add_argument("--workdir", help="control plane directory (default: a temp dir)")
    p.add_argument("--out", type=pathlib.Path, help="write the figures as JSON here")
    p.set_defaults(func=main)


def main(opts: argparse.Namespace) -> int:
    found = run(opts)
    for key, value in found.items():
        if key != "options":
            print(f"{key:32} {value}")
    if opts.out:
        opts.out.write_text(json.dumps(found, indent=2, sort_keys=True, default=str) + "\n")
    return 1 if found["lost_lease"] else 0
