"""The simulated cluster: the control plane plus the real controllers, a scheduler and kwok.

``SimCluster`` starts etcd and kube-apiserver (``ControlPlane``), then kube-controller-manager,
kube-scheduler and kwok, all on loopback, each in its own process group with its log in
``workdir``. kwok plays the kubelet for nodes annotated ``kwok.x-k8s.io/node=fake``, using the
stock node stages of kwok v0.8.0 and the project's pod stages (``stages/pod.yaml``).

Every child is stopped by ``stop()``, by ``atexit``, and, should this process die without
either (SIGKILL), by the parent-death signal set through ``setpriv``. Start it from the thread
that lives as long as the cluster (the main thread in pytest and in the CLI).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import functools
import json
import pathlib
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from simcluster.client.kube import JSON, Kube, KubeError
from simcluster.platform.controlplane import ControlPlane, ControlPlaneError, find_binaries, free_port
from simcluster.platform.process import ManagedProcess

HERE = pathlib.Path(__file__).resolve().parents[1]  # tools/simcluster: its stages/ and crds/
STAGES_DIR = HERE / "stages"
CRDS_DIR = HERE / "crds"

KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
SIM_PREFIX = "sim.nova.openstack.c5c3.io"
# Pod labels and annotations the project stages react to (see stages/pod.yaml).
FAIL_LABEL = f"{SIM_PREFIX}/fail"
UNREADY_LABEL = f"{SIM_PREFIX}/unready"
TERMINATION_MESSAGE_ANNOTATION = f"{SIM_PREFIX}/termination-message"
EXIT_CODE_ANNOTATION = f"{SIM_PREFIX}/exit-code"
COMPLETE_AFTER_ANNOTATION = f"{SIM_PREFIX}/complete-after"
REAL_BACKOFF_ANNOTATION = f"{SIM_PREFIX}/real-backoff"
# Label every fake node carries, and the pool label create_nodes(pool=...) sets.
NODE_TYPE_LABEL = "type"
POOL_LABEL = f"{SIM_PREFIX}/pool"
CELL0_UUID = "00000000-0000-0000-0000-000000000000"
SIM_BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
    "kwok-stages.yaml",
)


def stock_node_stages(bindir: pathlib.Path) -> list[JSON]:
    """kwok's stock Node stages (fast + heartbeat), taken from the file build.sh writes."""
    docs = yaml.safe_load_all((bindir / "kwok-stages.yaml").read_text())
    return [d for d in docs if d and d.get("spec", {}).get("resourceRef", {}).get("kind") == "Node"]


def project_stage_files() -> list[pathlib.Path]:
    return sorted(STAGES_DIR.glob("*.yaml"))


@dataclass
class SimCluster:
    """etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok on loopback.

    ``start()`` returns once every process answers and kwok manages nodes; ``create_nodes``
    adds fake nodes. ``kubeconfig`` has the contexts ``admin`` and ``operator`` (see
    ``ControlPlane``).
    """

    workdir: pathlib.Path
    bindir: pathlib.Path | None = None
    extra_stage_files: Sequence[pathlib.Path] = ()
    start_timeout: float = 90.0
    audit: bool = False  # log the operator's requests (``control_plane.audit_log``)
    extra_apiserver_args: Sequence[str] = ()  # see ControlPlane
    service_account_admission: bool = False  # see ControlPlane
    kwok: bool = True  # False: no fake nodes (the real-Nova tier), so no kwok process to build or start
    control_plane: ControlPlane = field(init=False)
    kube: Kube = field(init=False)
    startup_seconds: float = 0.0
    _ports: dict[str, int] = field(default_factory=dict)
    _node_counters: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _started: bool = False

    def __post_init__(self) -> None:
        self.workdir = pathlib.Path(self.workdir)
        if self.bindir is None:
            self.bindir = find_binaries(kwok=self.kwok)
        needed = SIM_BINARIES if self.kwok else tuple(b for b in SIM_BINARIES if not b.startswith("kwok"))
        missing = [b for b in needed if not (self.bindir / b).exists()]
        if missing:
            raise ControlPlaneError(
                f"{self.bindir} lacks {', '.join(missing)}: run tools/envtest/build.sh without "
                "ENVTEST_ONLY_CORE=1" + ("" if self.kwok else " (ENVTEST_NO_KWOK=1 leaves out kwok only)")
            )
        self.control_plane = ControlPlane(
            self.workdir,
            self.bindir,
            start_timeout=self.start_timeout,
            audit=self.audit,
            extra_apiserver_args=self.extra_apiserver_args,
            service_account_admission=self.service_account_admission,
        )

    # -- lifecycle -------------------------------------------------------------------------

    def start(self, while_controllers_start: Callable[[Kube], None] | None = None) -> SimCluster:
        """Start every process. ``while_controllers_start(kube)`` (e.g. installing CRDs) runs in a
        thread once the API server answers, overlapping the controllers' start-up."""
        t0 = time.monotonic()
        atexit.register(self.stop)
        self._started = True
        try:
            self.control_plane.start()
            self.kube = Kube(self.server, self.admin_token, self.control_plane.ca_file)
            with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="simcluster-setup") as pool:
                side = pool.submit(while_controllers_start, self.kube) if while_controllers_start else None
                if self.kwok:
                    self._write_stages()
                self._start_controllers()
                if side is not None:
                    side.result()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def stop(self) -> None:
        """Stop every process (kwok, scheduler, controller-manager, apiserver, etcd). Idempotent."""
        if not self._started:
            return
        self._started = False
        atexit.unregister(self.stop)
        self.control_plane.stop()

    def __enter__(self) -> SimCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- access ----------------------------------------------------------------------------

    @property
    def kubeconfig(self) -> pathlib.Path:
        return self.control_plane.kubeconfig

    @property
    def server(self) -> str:
        return self.control_plane.server

    @property
    def admin_token(self) -> str:
        return self.control_plane.admin_token

    @property
    def operator_token(self) -> str:
        return self.control_plane.operator_token

    @property
    def stages_file(self) -> pathlib.Path:
        return self.workdir / "kwok-stages.yaml"

    def logs(self, tail_bytes: int = 20_000) -> str:
        return self.control_plane.logs(tail_bytes)

    def processes(self) -> dict[str, int]:
        """Name -> pid of every running child process."""
        return self.control_plane.processes()

    # -- nodes -----------------------------------------------------------------------------

    def create_nodes(
        self,
        count: int,
        *,
        prefix: str = "kwok-node",
        pool: str | None = None,
        labels: Mapping[str, str] | None = None,
        cpu: str = "32",
        memory: str = "256Gi",
        pods: str = "110",
        wait: bool = True,
        timeout: float = 30.0,
    ) -> list[str]:
        """Create ``count`` fake nodes managed by kwok and (by default) wait until they are Ready.

        Names are ``<prefix>-<n>`` with a counter per prefix. ``pool`` sets the label
        ``sim.nova.openstack.c5c3.io/pool=<pool>``; ``labels`` are added as given.
        """
        if not self.kwok:
            raise ControlPlaneError("this cluster runs no kwok (kwok=False): it has no fake nodes")
        names = []
        for _ in range(count):
            with self._lock:
                n = self._node_counters.get(prefix, 0)
                self._node_counters[prefix] = n + 1
                name = f"{prefix}-{n}"
            node_labels = {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                NODE_TYPE_LABEL: "kwok",
                **({POOL_LABEL: pool} if pool else {}),
                **(labels or {}),
            }
            resources = {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "1Ti"}
            self.kube.post(
                "/api/v1/nodes",
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": name,
                        "labels": node_labels,
                        "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
                    },
                    "spec": {},
                    "status": {
                        "allocatable": resources,
                        "capacity": resources,
                        "nodeInfo": {
                            "architecture": "amd64",
                            "operatingSystem": "linux",
                            "kubeletVersion": "fake",
                            "kubeProxyVersion": "fake",
                            "containerRuntimeVersion": "kwok",
                        },
                        "phase": "Running",
                    },
                },
            )
            names.append(name)
        if wait:
            self.wait_nodes_ready(names, timeout)
        return names

    def wait_nodes_ready(self, names: Sequence[str], timeout: float = 30.0) -> None:
        """Ready=True and no ``not-ready`` taint left (so the scheduler will place pods there)."""
        for name in names:
            path = f"/api/v1/nodes/{name}"
            check = functools.partial(lambda p: _node_schedulable(self.kube.get(p)), path)
            self.kube.wait(check, timeout, name)

    def label_node(self, name: str, labels: Mapping[str, str | None]) -> None:
        """Set (value) or remove (None) labels on a node."""
        self.kube.patch(f"/api/v1/nodes/{name}", {"metadata": {"labels": dict(labels)}})

    def delete_node(self, name: str) -> None:
        self.kube.delete(f"/api/v1/nodes/{name}")

    # -- marking pods that others create ----------------------------------------------------

    def mark_pods(
        self,
        name: str,
        *,
        namespace: str,
        match_labels: Mapping[str, str],
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        timeout: float = 15.0,
    ) -> None:
        """Add ``labels``/``annotations`` to every pod created from now on in ``namespace`` whose labels
        include ``match_labels`` (e.g. ``{"batch.kubernetes.io/job-name": "nova-db-migrate"}`` with
        ``labels={FAIL_LABEL: "true"}``), so a test can steer pods of Jobs and Deployments the
        operator creates without racing kwok. Uses a MutatingAdmissionPolicy (admissionregistration
        v1) and waits until the API server applies it. Undo with ``unmark_pods(name)``.
        """
        policy = f"simcluster-mark-{name}"
        meta_fields = []
        if labels:
            meta_fields.append(f"labels: {_cel_map(labels)}")
        if annotations:
            meta_fields.append(f"annotations: {_cel_map(annotations)}")
        expression = f"Object{{metadata: Object.metadata{{{', '.join(meta_fields)}}}}}"
        self.kube.apply(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingAdmissionPolicy",
                "metadata": {"name": policy},
                "spec": {
                    "failurePolicy": "Fail",
                    "reinvocationPolicy": "Never",
                    "matchConstraints": {
                        "resourceRules": [
                            {
                                "apiGroups": [""],
                                "apiVersions": ["v1"],
                                "operations": ["CREATE"],
                                "resources": ["pods"],
                            }
                        ]
                    },
                    "mutations": [
                        {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}}
                    ],
                },
            }
        )
        self.kube.apply(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingAdmissionPolicyBinding",
                "metadata": {"name": policy},
                "spec": {
                    "policyName": policy,
                    "matchResources": {
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                        "objectSelector": {"matchLabels": dict(match_labels)},
                    },
                },
            }
        )
        probe = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"generateName": "simcluster-mark-probe-", "labels": dict(match_labels)},
            "spec": {"containers": [{"name": "probe", "image": "registry.invalid/probe:1"}]},
        }
        want = {**(labels or {})}

        def applied() -> bool:
            pod = self.kube.post(f"/api/v1/namespaces/{namespace}/pods?dryRun=All", probe)
            got = pod["metadata"].get("labels", {})
            got_ann = pod["metadata"].get("annotations", {})
            return all(got.get(k) == v for k, v in want.items()) and all(
                got_ann.get(k) == v for k, v in (annotations or {}).items()
            )

        self.kube.wait(applied, timeout, f"MutatingAdmissionPolicy {policy} in effect", interval=0.2)

    def unmark_pods(self, name: str) -> None:
        policy = f"simcluster-mark-{name}"
        for kind in ("mutatingadmissionpolicybindings", "mutatingadmissionpolicies"):
            try:
                self.kube.delete(f"/apis/admissionregistration.k8s.io/v1/{kind}/{policy}")
            except KubeError as exc:
                if exc.status != 404:
                    raise

    # -- internals -------------------------------------------------------------------------

    def _write_stages(self) -> None:
        assert self.bindir is not None
        docs: list[Any] = stock_node_stages(self.bindir)
        for f in [*project_stage_files(), *self.extra_stage_files]:
            docs.extend(d for d in yaml.safe_load_all(f.read_text()) if d)
        self.stages_file.write_text(yaml.safe_dump_all(docs, sort_keys=False))

    def _start_controllers(self) -> None:
        cp, w = self.control_plane, self.workdir
        kubeconfig = str(cp.kubeconfig)
        common = [
            f"--kubeconfig={kubeconfig}",
            "--leader-elect=false",
            "--kube-api-qps=300",
            "--kube-api-burst=600",
        ]

        def serving(name: str) -> list[str]:
            self._ports[name] = free_port()
            return [
                "--bind-address=127.0.0.1",
                f"--secure-port={self._ports[name]}",
                f"--cert-dir={w / (name + '-pki')}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--authentication-skip-lookup=true",  # no client-CA configmap: bearer tokens only
            ]

        kcm = cp._spawn(
            "kube-controller-manager",
            [
                *common,
                *serving("kube-controller-manager"),
                # No legacy token Secrets: the ServiceAccount admission plugin is off and pods carry
                # no token volume; everything else (GC, namespace, deployment, job, daemonset,
                # disruption, nodelifecycle, root-ca publisher, ...) runs as in a real cluster.
                # The apiserver's self-signed serving cert has no CA bit, so its ClusterTrustBundle
                # publisher would only retry and log.
                "--controllers=*,-serviceaccount-token-controller,"
                "-kube-apiserver-serving-clustertrustbundle-publisher-controller",
                f"--root-ca-file={cp.ca_file}",
                # kwok heartbeats every 20-45 s; on a busy 2-core box one may come late.
                "--node-monitor-grace-period=3m",
            ],
        )
        sched = cp._spawn("kube-scheduler", [*common, *serving("kube-scheduler")])
        kwok = self._spawn_kwok() if self.kwok else None
        for name, proc in (("kube-controller-manager", kcm), ("kube-scheduler", sched)):
            cp._wait_ok(f"https://127.0.0.1:{self._ports[name]}/healthz", proc, timeout=self.start_timeout)
        if kwok is not None:
            self._wait_kwok(kwok)
        # The namespace controller runs when the default ServiceAccount appears.
        self.kube.wait(
            lambda: bool(self.kube.get("/api/v1/namespaces/default/serviceaccounts/default")),
            self.start_timeout,
            "the default ServiceAccount (controller-manager running)",
        )

    def _spawn_kwok(self) -> ManagedProcess:
        kubeconfig = str(self.control_plane.kubeconfig)
        return self.control_plane._spawn(
            "kwok",
            [
                f"--kubeconfig={kubeconfig}",
                f"--config={self.stages_file}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
                # IPs written into fake node and pod status only; nothing is ever sent there.
                "--cidr=10.0.0.1/16",
                "--node-ip=10.0.0.1",
                f"--server-address=127.0.0.1:{free_port()}",
            ],
        )

    def _wait_kwok(self, kwok: ManagedProcess) -> None:
        """kwok has no health endpoint worth trusting here; it is ready when it turns a probe node Ready."""
        deadline = time.monotonic() + self.start_timeout
        probe = "simcluster-probe"
        self.kube.post(
            "/api/v1/nodes",
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": probe, "annotations": {KWOK_NODE_ANNOTATION: "fake"}},
                "spec": {"unschedulable": True},
            },
        )
        while not _node_ready(self.kube.get(f"/api/v1/nodes/{probe}")):
            if not kwok.alive or time.monotonic() > deadline:
                raise ControlPlaneError(f"kwok did not manage the probe node\n{self.logs(4000)}")
            time.sleep(0.1)
        self.kube.delete(f"/api/v1/nodes/{probe}")


def _cel_map(values: Mapping[str, str]) -> str:
    """A CEL map literal of strings (JSON string escapes are valid CEL)."""
    return "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in values.items()) + "}"


def _node_ready(node: JSON) -> bool:
    conditions = node.get("status", {}).get("conditions", [])
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _node_schedulable(node: JSON) -> bool:
    taints = node.get("spec", {}).get("taints", [])
    return _node_ready(node) and not any(t.get("key", "").startswith("node.kubernetes.io/") for t in taints)


def healthz(url: str) -> bool:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=2) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


__all__ = [
    "CELL0_UUID",
    "COMPLETE_AFTER_ANNOTATION",
    "EXIT_CODE_ANNOTATION",
    "FAIL_LABEL",
    "POOL_LABEL",
    "REAL_BACKOFF_ANNOTATION",
    "TERMINATION_MESSAGE_ANNOTATION",
    "UNREADY_LABEL",
    "KubeError",
    "SimCluster",
]
