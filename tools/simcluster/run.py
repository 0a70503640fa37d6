"""``python -m simcluster run`` (what ``make run`` calls): the operator, set up and running.

With ``$KUBECONFIG`` set, the operator runs against that cluster (its own flags follow
``--``). Without it, the simulated cluster is started, the CRDs, the RBAC and the samples
(with their Secrets and stand-in dependencies) are applied, the operator runs as its own
ServiceAccount, and every condition change of the sample Nova and NovaCompute is printed
until both are Ready; then how to look. Ctrl-C stops everything that was started.
"""

from __future__ import annotations

import os
import pathlib
import signal
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

import yaml

from simcluster.controlplane import REPO, free_port
from simcluster.launch import SimHandle, launch

SAMPLES = REPO / "config" / "samples"
POOL = "rack7"
POOL_LABEL = "example.org/compute-pool"
NAMESPACE = "openstack"
WATCHED = (("novas", "nova"), ("novacomputes", POOL))


def run_against_kubeconfig(operator_args: Sequence[str]) -> int:
    """Replace this process with the operator (signals go straight to it)."""
    argv = [sys.executable, "-m", "nova_operator", *operator_args]
    os.execv(sys.executable, argv)
    return 1  # not reached


def _samples(workdir: pathlib.Path, keystone_url: str) -> list[pathlib.Path]:
    """The samples as the simulated cluster needs them: Keystone is the fake one."""
    nova = yaml.safe_load((SAMPLES / "nova_minimal.yaml").read_text())
    nova["spec"]["keystoneEndpoint"] = keystone_url
    patched = workdir / "nova_minimal.yaml"
    patched.write_text(yaml.safe_dump(nova, sort_keys=False))
    here = pathlib.Path(__file__).parent
    return [
        SAMPLES / "secrets.yaml",
        here / "samples" / "dependencies.yaml",
        patched,
        SAMPLES / "novacompute.yaml",
    ]


def _conditions(handle: SimHandle, plural: str, name: str) -> dict[str, tuple[str, str, str]]:
    try:
        obj: dict[str, Any] = handle.cluster.kube.get(
            f"/apis/nova.openstack.c5c3.io/v1alpha1/namespaces/{NAMESPACE}/{plural}/{name}"
        )
    except Exception:  # not there yet, or the API server is busy: the next poll tells
        return {}
    return {
        c["type"]: (c.get("status", ""), c.get("reason", ""), c.get("message", ""))
        for c in (obj.get("status") or {}).get("conditions") or []
    }


def run_simulated(workdir: pathlib.Path | None, operator_args: Sequence[str]) -> int:
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    t0 = time.monotonic()
    print("starting the simulated cluster (etcd, kube-apiserver, controller-manager, scheduler, kwok) ...")
    handle = launch(workdir, nodes=3, pools={POOL: 3})
    try:
        c = handle.cluster
        for node in handle.nodes[POOL]:
            c.label_node(node, {POOL_LABEL: POOL, "topology.kubernetes.io/zone": "az1"})
        assert handle.openstack is not None
        service_user = yaml.safe_load_all((SAMPLES / "secrets.yaml").read_text())
        for doc in service_user:
            if doc["metadata"]["name"] == "nova-service-user":
                handle.openstack.add_user("nova", doc["stringData"]["password"])
        handle.apply(REPO / "config" / "crd", REPO / "config" / "rbac")
        handle.create_gateway(NAMESPACE, "public-gateway")
        handle.apply(*_samples(handle.workdir, handle.openstack.keystone_url), namespace=NAMESPACE)
        metrics, health = free_port(), free_port()
        operator = handle.spawn(
            "operator",
            [
                sys.executable, "-m", "nova_operator",
                "--kubeconfig", str(c.kubeconfig), "--context", "operator",
                "--metrics-bind-address", f"127.0.0.1:{metrics}",
                "--health-probe-bind-address", f"127.0.0.1:{health}",
                "--log-format", "json",
                # The Nova API is the fake one: no in-cluster Service DNS out here.
                "--nova-api-url", handle.openstack.nova_url,
                *operator_args,
            ],
        )  # fmt: skip
        print(
            f"cluster up in {time.monotonic() - t0:.1f} s; operator running as system:serviceaccount:"
            f"nova-system:nova-operator (log: {operator.log})"
        )
        seen: dict[tuple[str, str], tuple[str, str, str]] = {}
        ready_at: float | None = None
        while not stop.wait(1.0):
            if not operator.alive:
                print(f"the operator exited; the tail of its log:\n{operator.output(4000)}", file=sys.stderr)
                return 1
            all_ready = True
            for plural, name in WATCHED:
                conds = _conditions(handle, plural, name)
                for ctype, value in sorted(conds.items()):
                    if seen.get((name, ctype)) != value:
                        seen[(name, ctype)] = value
                        status, reason, message = value
                        print(
                            f"  {time.monotonic() - t0:6.1f}s  {plural[:-1]}/{name}  {ctype}={status}  "
                            f"{reason}: {message}"
                        )
                all_ready = all_ready and conds.get("Ready", ("",))[0] == "True"
            if all_ready and ready_at is None:
                ready_at = time.monotonic() - t0
                print(f"\nthe sample Nova and NovaCompute are Ready after {ready_at:.1f} s. Look around:")
                print(f"  export KUBECONFIG={c.kubeconfig}")
                print(f"  .venv/bin/kubectl -n {NAMESPACE} get novas,novacomputes,deployments,jobs,pods")
                print(f"  curl -s http://127.0.0.1:{metrics}/metrics | grep ^nova_operator_")
                print("Ctrl-C stops the operator and the cluster.", flush=True)
        return 0
    finally:
        print("stopping ...", flush=True)
        handle.stop()
