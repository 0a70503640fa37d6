"""``launch()``: the whole simulated cluster in one call, for the e2e fixture, ``make run`` and benchmarks.

It starts the ``SimCluster`` processes, creates the fake nodes, installs the dependency CRDs
(mariadb-operator, RabbitMQ cluster operator, Gateway API v1.6.3), a GatewayClass served by the
Gateway stand-in, and runs the stand-in controllers and the fake Keystone/Nova API in a
background thread with an event loop of its own. ``SimHandle.stop()`` (also run at exit) undoes
all of it.

The operator itself is never imported here; ``make run`` installs the project's CRDs and RBAC
through the handle's kubeconfig and starts the operator with ``handle.operator_env()``.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import pathlib
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from simcluster.client.asynckube import AsyncKube
from simcluster.client.kube import Kube
from simcluster.platform.cluster import CRDS_DIR, SimCluster
from simcluster.platform.controlplane import REPO
from simcluster.platform.flowcontrol import lease_flow_control
from simcluster.platform.process import ManagedProcess, spawn
from simcluster.standins import GATEWAY_CLASS, GATEWAY_CONTROLLER, Backend, StandIns
from simcluster.standins.openstack import FakeOpenStack

T = TypeVar("T")

DEPENDENCY_CRD_FILES = [
    CRDS_DIR / "mariadb-operator.yaml",
    CRDS_DIR / "rabbitmq-cluster-operator.yaml",
    *sorted((CRDS_DIR / "gateway-api-v1.6.3").glob("*.yaml")),
]
# The service user the fake Keystone knows (admin role, project "service", domain "Default").
SERVICE_USER = "nova"
SERVICE_PASSWORD = "nova-service-password"


class Sidecar:
    """An event loop in a daemon thread, for the stand-ins and the fake OpenStack API."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="simcluster-sidecar", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        """Run ``coro`` in the sidecar loop and wait for its result (from another thread)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        if self.loop.is_closed():
            return

        async def _cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self._thread.is_alive():
            with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
                self.call(_cancel_all(), timeout=10)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
        if not self.loop.is_running():
            self.loop.close()


@dataclass
class SimHandle:
    """A running simulated cluster and its helpers."""

    cluster: SimCluster
    nodes: dict[str, list[str]]
    openstack: FakeOpenStack | None = None
    standins: StandIns | None = None
    sidecar: Sidecar | None = None
    _stop_event: asyncio.Event | None = None
    _standins_future: concurrent.futures.Future[Any] | None = None
    _kube: AsyncKube | None = None
    startup_seconds: float = 0.0
    processes: list[ManagedProcess] = field(default_factory=list)
    # what ``stop()`` runs, in order, after the spawned processes and the stand-ins: (part, stop)
    teardown: list[tuple[str, Callable[[], Any]]] = field(default_factory=list)
    real: Any = None  # the real-Nova tier (``simcluster.realtier.tier.RealTier``) when launched with it
    stop_seconds: dict[str, float] = field(default_factory=dict)  # what ``stop()`` took, by part
    _stopped: bool = field(default=False)

    @property
    def kubeconfig(self) -> pathlib.Path:
        return self.cluster.kubeconfig

    @property
    def workdir(self) -> pathlib.Path:
        return self.cluster.workdir

    def logs(self, tail_bytes: int = 20_000) -> str:
        return self.cluster.logs(tail_bytes)

    def operator_env(self) -> dict[str, str]:
        """Environment for an operator subprocess: its kubeconfig context and the fake API URLs."""
        env = {"KUBECONFIG": str(self.kubeconfig), "KUBE_CONTEXT": "operator"}
        if self.openstack is not None:
            env["SIM_KEYSTONE_URL"] = self.openstack.keystone_url
            env["SIM_NOVA_API_URL"] = self.openstack.nova_url
        return env

    def in_sidecar(self, fn: Callable[[], Awaitable[T]], timeout: float = 30.0) -> T:
        """Run an async callable in the stand-ins' loop (e.g. ``openstack.go_offline``)."""
        assert self.sidecar is not None

        async def _run() -> T:
            return await fn()

        return self.sidecar.call(_run(), timeout)

    def apply(self, *paths: pathlib.Path, namespace: str = "default") -> list[dict[str, Any]]:
        """Create or replace every object in these YAML files (CRDs, RBAC, samples), as admin.

        Files (a directory means its ``*.yaml`` but ``kustomization.yaml``) are applied in the order
        given; a custom resource may follow its CRD.
        """
        files = [
            f
            for p in paths
            for f in (sorted(p.glob("*.yaml")) if p.is_dir() else [p])
            if f.name != "kustomization.yaml"
        ]
        docs = self.cluster.kube.apply_files(files, namespace)
        crds = [d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition"]
        self.cluster.kube.wait_crds_established(crds)
        return docs

    def install(self, *, flowcontrol: bool = True) -> None:
        """What an install puts beside the operator: its CRDs (``config/crd``), its RBAC
        (``config/rbac``) and, unless ``flowcontrol`` is off, the priority level its Lease requests
        travel in (``platform.flowcontrol``)."""
        self.apply(REPO / "config" / "crd", REPO / "config" / "rbac")
        if flowcontrol:
            for doc in lease_flow_control():
                self.cluster.kube.apply(doc)

    def create_gateway(self, namespace: str, name: str, *, listeners: int = 1) -> None:
        """A Gateway of the stand-in's class; HTTPRoutes naming it get Accepted."""
        self.cluster.kube.apply(
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "Gateway",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "gatewayClassName": GATEWAY_CLASS,
                    "listeners": [
                        {"name": f"http-{i}" if i else "http", "port": 80 + i, "protocol": "HTTP"}
                        for i in range(listeners)
                    ],
                },
            }
        )

    def spawn(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: pathlib.Path | None = None,
        inherit_env: bool = True,
    ) -> ManagedProcess:
        """Run a program next to the cluster (the operator, a second replica, ...), with
        ``operator_env()`` plus ``env`` on top of this process's environment (``inherit_env=False``:
        exactly ``env``, as a pod's process gets it), its output in ``<workdir>/<name>.log``, the
        same parent-death signal as the cluster, and stopped by ``stop()``. Names must be unique
        per handle."""
        env = {**self.operator_env(), **(env or {})} if inherit_env else env
        proc = spawn(name, argv, self.workdir, env=env, inherit_env=inherit_env, cwd=cwd)
        self.processes.append(proc)
        return proc

    async def _stop_standins(self) -> None:
        if self._stop_event is not None:
            self._stop_event.set()
        if self._standins_future is not None:
            await asyncio.wrap_future(self._standins_future)

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        atexit.unregister(self.stop)
        t0 = time.monotonic()
        for proc in reversed(self.processes):
            proc.stop()
        self.stop_seconds["spawned processes"] = time.monotonic() - t0
        # The stand-in operators go before the teardown parts: the real tier's RabbitMQ and MariaDB
        # stand-ins act on the backing servers, which a part stops (stopped after it, they logged a traceback
        # at every look at a server already gone).
        t0 = time.monotonic()
        if self.sidecar is not None:
            with contextlib.suppress(Exception):
                self.sidecar.call(self._stop_standins(), timeout=15)
        self.stop_seconds["stand-ins"] = time.monotonic() - t0
        for part, stop in self.teardown:
            t0 = time.monotonic()
            try:
                stop()
            except Exception as exc:
                print(f"simcluster: stopping the {part} failed: {exc}", file=sys.stderr)
            self.stop_seconds[part] = time.monotonic() - t0
        t0 = time.monotonic()
        if self.sidecar is not None:
            sidecar = self.sidecar

            async def _shutdown() -> None:
                if self.openstack is not None:
                    await self.openstack.stop()
                if self._kube is not None:
                    await self._kube.__aexit__(None, None, None)

            with contextlib.suppress(Exception):
                sidecar.call(_shutdown(), timeout=15)
            sidecar.stop()
        self.stop_seconds["fake OpenStack"] = time.monotonic() - t0
        self.cluster.stop()
        self.stop_seconds.update(self.cluster.control_plane.stop_seconds)


def launch(
    workdir: pathlib.Path | None = None,
    *,
    bindir: pathlib.Path | None = None,
    nodes: int = 3,
    pools: Mapping[str, int] | None = None,
    standins: bool = True,
    openstack: bool = True,
    extra_stage_files: tuple[pathlib.Path, ...] = (),
    audit: bool = False,
    kwok: bool = True,
    extra_apiserver_args: Sequence[str] = (),
    service_account_admission: bool = False,
) -> SimHandle:
    """Start the simulated cluster and return its handle (stopped at exit if not before).

    ``nodes`` plain fake nodes plus, for each ``pools`` entry, that many nodes labelled
    ``sim.nova.openstack.c5c3.io/pool=<pool>``. ``handle.nodes`` maps "" and each pool to names.
    ``audit`` makes the API server log the operator's requests (``cluster.control_plane.audit_log``).
    ``kwok=False``: no kwok process, so no fake nodes (``nodes`` and ``pools`` must be empty).
    ``extra_apiserver_args`` and ``service_account_admission``: the control plane's (``SimCluster``),
    for real nodes (``realnode.access``: logs and exec through the API server, pods' tokens).
    """
    t0 = time.monotonic()
    if workdir is None:
        workdir = pathlib.Path(tempfile.mkdtemp(prefix="simcluster-"))
    cluster = SimCluster(
        workdir,
        bindir,
        extra_stage_files=extra_stage_files,
        audit=audit,
        kwok=kwok,
        extra_apiserver_args=extra_apiserver_args,
        service_account_admission=service_account_admission,
    )
    cluster.start(while_controllers_start=install_dependency_crds if standins else None)
    handle = SimHandle(cluster=cluster, nodes={})
    atexit.register(handle.stop)
    try:
        handle.nodes[""] = cluster.create_nodes(nodes, wait=False) if nodes else []
        for pool, count in (pools or {}).items():
            handle.nodes[pool] = cluster.create_nodes(count, prefix=f"kwok-{pool}", pool=pool, wait=False)
        if standins or openstack:
            handle.sidecar = Sidecar()
        if openstack:
            assert handle.sidecar is not None
            fake = FakeOpenStack()
            fake.add_user(SERVICE_USER, SERVICE_PASSWORD)
            handle.openstack = handle.sidecar.call(fake.start())
        if standins:
            start_standins(handle)
        cluster.wait_nodes_ready([n for names in handle.nodes.values() for n in names])
    except BaseException:
        handle.stop()
        raise
    handle.startup_seconds = time.monotonic() - t0
    return handle


def install_dependency_crds(kube: Kube) -> None:
    """The CRDs of mariadb-operator, the RabbitMQ cluster operator and Gateway API, and the GatewayClass
    of the Gateway stand-in."""
    docs = kube.apply_files(DEPENDENCY_CRD_FILES)
    kube.wait_crds_established(
        [d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition"]
    )
    kube.apply_when_served(
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": GATEWAY_CLASS},
            "spec": {"controllerName": GATEWAY_CONTROLLER},
        }
    )


def start_standins(handle: SimHandle, backend: Backend | None = None) -> None:
    """The stand-in operators in the handle's sidecar (``backend``: acting on real servers)."""
    if handle.sidecar is None:
        handle.sidecar = Sidecar()
    cp = handle.cluster.control_plane

    async def _setup() -> tuple[AsyncKube, StandIns, asyncio.Event]:
        kube = await AsyncKube(cp.server, cp.admin_token, cp.ca_file).__aenter__()
        return kube, StandIns(kube, handle.openstack, backend), asyncio.Event()

    handle._kube, handle.standins, handle._stop_event = handle.sidecar.call(_setup())
    handle._standins_future = handle.sidecar.spawn(handle.standins.run(handle._stop_event))
