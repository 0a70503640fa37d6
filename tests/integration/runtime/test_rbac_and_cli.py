"""The operator as itself: the rendered RBAC is enough to run a controller, and the CLI starts and stops."""

from __future__ import annotations

import asyncio
import os
import pathlib
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from simcluster import ControlPlane
from simcluster.client import jsonlog
from simcluster.client.kube import Kube as SimKube
from simcluster.platform.controlplane import free_port

from nova_operator import apply
from nova_operator.kube import Kube
from nova_operator.kube.resources import CONFIGMAPS, ResourceRef, render_rbac
from nova_operator.metrics import Metrics
from nova_operator.runtime import Request, Result
from nova_operator.runtime.manager import Manager
from nova_operator.settings import Settings

pytestmark = pytest.mark.integration
REPO = pathlib.Path(__file__).parents[3]

CLUSTER_ROLES = ResourceRef(
    "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False
)
ROLE_BINDINGS = ResourceRef("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")


async def grant_operator_role_in(kube: Kube, namespace: str) -> str:
    """Install the rendered ClusterRole (test-named); bind it to the operator in ``namespace`` only."""
    role: dict[str, Any] = yaml.safe_load(render_rbac()["role.yaml"])
    name = f"nova-operator-{namespace}"
    role["metadata"]["name"] = name
    await kube.create(CLUSTER_ROLES, role)
    binding = yaml.safe_load(render_rbac()["role_binding.yaml"])
    await kube.create(
        ROLE_BINDINGS,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "nova-operator"},
            "roleRef": {**binding["roleRef"], "name": name},
            "subjects": binding["subjects"],
        },
        namespace,
    )
    return name


class Mirror:
    """Copies each ConfigMap labelled src=yes into ``<name>-copy`` (apply with owner; cached reads)."""

    def __init__(self, kube: Kube, manager: Manager) -> None:
        self.kube = kube
        self.src = manager.informer(CONFIGMAPS, label_selector="src=yes")
        self.copies = manager.informer(CONFIGMAPS, label_selector="copy=yes")
        self.done: set[str] = set()
        self.changed = asyncio.Event()

    async def reconcile(self, request: Request) -> Result:
        src = self.src.cache.get(request.name, request.namespace)
        if src is None:
            return Result()
        desired = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": f"{request.name}-copy",
                "namespace": request.namespace,
                "labels": {"copy": "yes"},
            },
            "data": src.get("data", {}),
        }
        cached = self.copies.cache.get(f"{request.name}-copy", request.namespace)
        await apply.apply(self.kube, desired, owner=src, cached=cached)
        self.done.add(request.name)
        self.changed.set()
        return Result()


async def test_the_rendered_rbac_lets_the_operator_watch_apply_and_hold_its_lease(
    control_plane: ControlPlane, kube: Kube, namespace: str, fast_settings: Callable[..., Settings]
) -> None:
    role = await grant_operator_role_in(kube, namespace)
    try:
        for i in range(3):
            await kube.create(
                CONFIGMAPS,
                {"metadata": {"name": f"s{i}", "labels": {"src": "yes"}}, "data": {"i": str(i)}},
                namespace,
            )
        settings = fast_settings(
            enabled=True, identity="op", lease_duration=2.0, renew_deadline=1.5, retry_period=0.25
        )
        async with await Kube.connect(
            kubeconfig=str(control_plane.kubeconfig), context="operator", metrics=Metrics()
        ) as operator:
            manager = Manager(operator, settings)
            mirror = Mirror(operator, manager)
            manager.controller("mirror", mirror).watch_primary(mirror.src).watch_owned(
                mirror.copies, owner_group="", owner_kind="ConfigMap"
            )
            task = asyncio.create_task(manager.run())
            try:
                async with asyncio.timeout(20):
                    while len(mirror.done) < 3:
                        mirror.changed.clear()
                        await mirror.changed.wait()
            finally:
                manager.stop()
                await asyncio.wait_for(task, 10)
            forbidden = [
                labels
                for labels in (s.labels for m in operator.metrics.api_requests.collect() for s in m.samples)
                if labels.get("code") == "403"
            ]
            assert forbidden == []
        copy = await kube.get(CONFIGMAPS, "s1-copy", namespace)
        assert copy["data"] == {"i": "1"}
    finally:
        await kube.delete(CLUSTER_ROLES, role)


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return err.code
    except OSError:
        return 0


def reconciled(admin: SimKube, namespace: str) -> bool:
    pool = admin.get(f"/apis/nova.openstack.c5c3.io/v1alpha1/namespaces/{namespace}/novacomputes/pool-a")
    return bool((pool.get("status") or {}).get("conditions"))


def test_the_cli_serves_probes_and_exits_cleanly_on_sigterm(
    control_plane: ControlPlane, namespace: str
) -> None:
    """A real run, start to SIGTERM, at debug level: every line of stdout and stderr is one JSON record."""
    admin = SimKube(control_plane.server, control_plane.admin_token, control_plane.ca_file)
    admin.apply_files(sorted((REPO / "config" / "crd").glob("nova.openstack.c5c3.io_*.yaml")))
    # A pool whose Nova does not exist: its reconciles log (at debug) while it waits for it.
    admin.apply(
        {
            "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
            "kind": "NovaCompute",
            "metadata": {"name": "pool-a"},
            "spec": {"novaRef": {"name": "absent"}, "nodeSelector": {"pool": "a"}},
        },
        namespace,
    )
    metrics_port, health_port = free_port(), free_port()
    env = {**os.environ, "NOVA_OPERATOR_LOG_LEVEL": "debug", "PYTHONWARNINGS": "always"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nova_operator",
            f"--kubeconfig={control_plane.kubeconfig}",
            "--context=admin",
            f"--namespace={namespace}",
            "--leader-elect=false",
            f"--metrics-bind-address=127.0.0.1:{metrics_port}",
            f"--health-probe-bind-address=127.0.0.1:{health_port}",
            "--log-format=json",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while http_status(f"http://127.0.0.1:{health_port}/readyz") != 200 or not reconciled(
            admin, namespace
        ):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                _, err = proc.communicate()
                pytest.fail(f"never ready (exit {proc.returncode}): {err}")
            time.sleep(0.1)
        assert http_status(f"http://127.0.0.1:{health_port}/healthz") == 200
        assert http_status(f"http://127.0.0.1:{metrics_port}/metrics") == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        out, err = proc.communicate()
        assert jsonlog.records(out) == []
        entries = jsonlog.records(err)
        messages = [e["msg"] for e in entries]
        start = entries[0]
        assert (start["msg"], start["logger"], start["namespaces"]) == (
            "starting",
            "nova_operator.cli",
            [namespace],
        )
        for start_or_stop in ("caches synced", "starting controllers", "signal received, stopping"):
            assert start_or_stop in messages
        assert {e["level"] for e in entries} <= {"debug", "info", "warning"}, err
        reconciles = [e for e in entries if e.get("reconcile_id")]
        assert reconciles, "no reconcile logged"
        for entry in reconciles:
            assert (entry["controller"], entry["namespace"], entry["name"]) == (
                "novacompute",
                namespace,
                "pool-a",
            )
        assert any(e["msg"] == "reconciled" for e in reconciles)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
