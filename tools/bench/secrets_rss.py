"""The operator's memory with many large Secrets no Nova reads in a Nova's namespace (issue 26 item 2).

``python tools/bench/secrets_rss.py [--secrets 200] [--size-kib 1023] [--source DIR]``

On the simulated cluster (one namespace ``bench-000`` with the samples' prerequisites and the minimal
Nova, Ready), the operator is started as its own process twice from the same state, and measured
once it has been quiet for a few seconds (its caches listed, the Nova's passes done):

1. without any other Secret in the namespace;
2. after ``--secrets`` Secrets of ``--size-kib`` KiB of random data each were added there
   (Helm release Secrets, say: no Nova names them).

Each start is a restart: every Secret of the namespace is listed again. Printed: the RSS once quiet
(``VmRSS``) and the peak (``VmHWM``) of both, and the differences. ``--source`` runs the operator
from another checkout (e.g. the commit before the change) for comparison. Not a test: it prints
figures; nothing is asserted.
"""

from __future__ import annotations

import argparse
import base64
import os
import pathlib
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from simcluster import ManagedProcess, SimHandle, launch
from simcluster.platform.controlplane import REPO
from simcluster.platform.operator import start_operator, wait_leading

from bench import proc, promtext
from bench.run import NAME, NOVAS, Options, in_namespace, namespaces, prepare

NAMESPACE = namespaces(1)[0]
QUIET = 5.0  # seconds without an operator request (Leases aside) that count as "settled"


def _requests(url: str) -> float:
    """Every request the operator sent so far, Lease renewals aside."""
    text = promtext.scrape(url, timeout=30.0)
    leases = promtext.total(text, "nova_operator_api_requests_total", resource="leases.coordination.k8s.io")
    return promtext.total(text, "nova_operator_api_requests_total") - leases


def start(handle: SimHandle, name: str, source: pathlib.Path) -> tuple[ManagedProcess, str]:
    """The operator as its own process (code from ``source``), up and leading."""
    assert handle.openstack is not None
    env = {"PYTHONPATH": os.pathsep.join([str(source), str(REPO / "tools")])}
    op = start_operator(handle, name, "--nova-api-url", handle.openstack.nova_url, cwd=source, env=env)
    wait_leading(op, 180)
    return op.process, op.metrics_url


def _scrape(url: str) -> str | None:
    """The metrics text, or None while the operator is too busy to answer (a large LIST decoding)."""
    try:
        return promtext.scrape(url, timeout=30.0)
    except OSError:
        return None


def settle(url: str, limit: float = 300.0) -> None:
    """Until the Secrets of the Nova's namespace are listed (the informer's relist count; a request
    is counted when its headers arrive, a large List's body comes later), then until the operator
    sent no request (Leases aside) for ``QUIET`` seconds."""
    deadline = time.monotonic() + limit
    while True:
        text = _scrape(url)
        if (
            text is not None
            and promtext.total(text, "nova_operator_informer_relists_total", resource="secrets") >= 1
        ):
            break
        if time.monotonic() > deadline:
            raise RuntimeError("the Secrets of the Nova's namespace were never listed")
        time.sleep(0.25)
    last, since = _requests(url), time.monotonic()
    while time.monotonic() - since < QUIET:
        if time.monotonic() > deadline:
            raise RuntimeError("the operator never went quiet")
        time.sleep(0.25)
        now = _requests(url)
        if now != last:
            last, since = now, time.monotonic()


def nova_ready(handle: SimHandle) -> bool:
    nova = handle.cluster.kube.get(f"{NOVAS}/namespaces/{NAMESPACE}/novas/{NAME}")
    conds = (nova.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def measure(handle: SimHandle, name: str, source: pathlib.Path) -> dict[str, float]:
    """One start of the operator: its RSS once settled (the Nova Ready) and its peak, in MiB."""
    p, url = start(handle, name, source)
    try:
        handle.cluster.kube.wait(lambda: nova_ready(handle), 300, "the Nova Ready", interval=0.5)
        settle(url)
        return {"rss": proc.rss(p.pid), "peak": proc.rss_peak(p.pid)}
    finally:
        p.stop()


def add_secrets(handle: SimHandle, count: int, size: int) -> None:
    kube = handle.cluster.kube

    def one(i: int) -> None:
        blob = base64.b64encode(os.urandom(size)).decode()
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"sh.helm.release.v1.app{i:03d}.v1", "labels": {"owner": "helm"}},
            "type": "helm.sh/release.v1",
            "data": {"release": blob},
        }
        kube.post(f"/api/v1/namespaces/{NAMESPACE}/secrets", body)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(one, range(count)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--secrets", type=int, default=200)
    parser.add_argument(
        "--size-kib", type=int, default=1023, help="data per Secret (the API server's cap: 1 MiB)"
    )
    parser.add_argument(
        "--source", type=pathlib.Path, default=REPO, help="the checkout the operator runs from"
    )
    args = parser.parse_args(argv)
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="nova-secrets-rss-"))
    print(f"secrets_rss: simulated cluster in {workdir}; operator from {args.source}", flush=True)
    handle = launch(workdir, nodes=0, pools={})
    try:
        nova = prepare(handle, Options(novas=1, out=workdir / "unused.json"))
        handle.cluster.kube.apply(in_namespace(nova, NAMESPACE), NAMESPACE, ensure_namespace=False)
        first, _ = start(handle, "operator-install", args.source)  # brings the Nova to Ready once
        try:
            handle.cluster.kube.wait(lambda: nova_ready(handle), 300, "the Nova Ready", interval=0.5)
        finally:
            first.stop()
        without = measure(handle, "operator-without", args.source)
        print(f"secrets_rss: without: {without}", flush=True)
        add_secrets(handle, args.secrets, args.size_kib * 1024)
        with_secrets = measure(handle, "operator-with", args.source)
    finally:
        handle.stop()
        shutil.rmtree(workdir / "etcd", ignore_errors=True)
    print()
    print(f"{args.secrets} Secrets of {args.size_kib} KiB in {NAMESPACE}, operator from {args.source}")
    print(f"{'':24}{'RSS settled (MiB)':>20}{'peak VmHWM (MiB)':>20}")
    print(f"{'without the Secrets':24}{without['rss']:>20.1f}{without['peak']:>20.1f}")
    print(f"{'with the Secrets':24}{with_secrets['rss']:>20.1f}{with_secrets['peak']:>20.1f}")
    print(
        f"{'difference':24}{with_secrets['rss'] - without['rss']:>+20.1f}"
        f"{with_secrets['peak'] - without['peak']:>+20.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
