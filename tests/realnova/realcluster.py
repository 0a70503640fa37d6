"""Helpers of the real-Nova tier's cluster tests: the samples as this cluster runs them, the operator
(installed by its chart from its image, as pods on the real nodes), waits on conditions, and the
real OpenStack APIs through Keystone.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, TypeVar

import yaml
from simcluster import SimHandle
from simcluster.platform.controlplane import REPO
from simcluster.realtier.container_pids import container_pids, send
from simcluster.realtier.operator_chart import CONTAINER as OPERATOR_CONTAINER
from simcluster.realtier.operator_chart import NAMESPACE as OPERATOR_NAMESPACE
from simcluster.realtier.operator_chart import SELECTOR as OPERATOR_SELECTOR
from simcluster.realtier.operator_chart import deploy, leader_metrics
from simcluster.realtier.tier import FAKE_COMPUTE_DRIVER

T = TypeVar("T")
JSON = dict[str, Any]
SAMPLES = REPO / "config" / "samples"
NAMESPACE = "openstack"
GROUP = "/apis/nova.openstack.c5c3.io/v1alpha1"
NOVA, POOL = "nova", "rack7"  # the samples' names
POOL_LABELS = {"example.org/compute-pool": "rack7", "topology.kubernetes.io/zone": "az1"}
UPGRADE_POOL_LABELS = {"example.org/compute-pool": "upgrade", "topology.kubernetes.io/zone": "az2"}

# The release the tier's minimal Nova runs: 2026.1 in ``make test`` (issue 24: the day-one server
# scenario at 2026.1, the release real-nova.md measured; the sample itself stays at 2025.2, the
# upgrade's first release). ``make test-servers RELEASE=...`` runs the same Nova at another release.
RELEASE_UNDER_TEST = os.environ.get("REALNOVA_RELEASE") or "2026.1"
# From 2026.1 (nova 33) a stopping scheduler, conductor or compute first sleeps
# ``[DEFAULT] manager_shutdown_timeout`` (160 s by default, then the RPC server's drain), heartbeat
# and all, whatever it has in progress: every rollout's old pods would serve on for about three
# minutes (the 200 s grace of the samples covers it). The tier's Nova says 0, as an operator who
# prefers quick rollouts to that wait would: its pods stop after their RPC servers drain. The tier's
# pool says so too (``tier_pool``): its nova-compute would otherwise sleep most of the pool's 200 s
# grace (2026.1's graceful_shutdown_timeout plus 20 s) at every stop, two in a row in each rollout.
QUICK_SHUTDOWN = {"DEFAULT": {"manager_shutdown_timeout": "0"}}
# The tier's API rolls its three pods at once: one by one, each waiting out its readiness probe
# (10 s delay, 15 s period), they made up about 50 s of every rollout of the minimal Nova.
API_ROLLOUT = {"strategy": {"rollingUpdate": {"maxSurge": "100%", "maxUnavailable": 0}}}
# One uWSGI worker per API and metadata pod, not the default two: under --lazy-apps each worker
# imports nova on its own (about 6 CPU-seconds each here), and at every rollout the API's three pods
# and the metadata pod start together on two cores, the slowest part of the tier's rollouts. The
# full sample (test_full_sample) runs several workers per pod.
ONE_WORKER = {"uwsgi": {"processes": 1}}
# With one worker, a request that waits on an RPC call holds the pod's probes behind it: a pool's
# deletion rolls its DaemonSet (§9.2) while the pool disables its services, and the API's
# ``set_host_enabled`` call to a nova-compute that is being replaced waited out the default 60 s,
# long enough for the liveness probe to restart that API pod and for the Nova to turn not Ready
# (seen twice in test_pools_real). 20 s keeps such a wait within one failed probe of each kind
# (docs/operations.md, "Probes and resources").
BOUNDED_RPC = {"DEFAULT": {"rpc_response_timeout": "20"}}


def tier_extra_config() -> dict[str, dict[str, str]]:
    """What the tier's Nova and pool add to ``spec.extraConfig``, by section."""
    return {s: dict(o) for s, o in QUICK_SHUTDOWN.items()} if RELEASE_UNDER_TEST >= "2026.1" else {}


def sample_secret(name: str, key: str) -> str:
    for doc in yaml.safe_load_all((SAMPLES / "secrets.yaml").read_text()):
        if doc["metadata"]["name"] == name:
            return str(doc["stringData"][key])
    raise KeyError(name)


def full_sample_image() -> str:
    """The image reference ``nova_full.yaml`` names (a registry, a repository and a digest)."""
    image = yaml.safe_load((SAMPLES / "nova_full.yaml").read_text())["spec"]["image"]
    return f"{image['repository']}@{image['digest']}"


def _add_extra_config(obj: JSON, *blocks: dict[str, dict[str, str]]) -> None:
    """Each block's options into ``spec.extraConfig`` of ``obj``, by section; none: left as it was."""
    for block in blocks:
        for section, options in block.items():
            obj["spec"].setdefault("extraConfig", {}).setdefault(section, {}).update(options)


def pool_on_fake_driver(
    workdir: pathlib.Path, extra: dict[str, dict[str, str]] | None = None
) -> pathlib.Path:
    """The NovaCompute sample on the fake driver (no libvirt here): ``[DEFAULT] compute_driver`` is
    ``FAKE_COMPUTE_DRIVER``, whose nova-compute survives a restart of its pod; ``extra``: more of
    ``spec.extraConfig``, by section."""
    pool = yaml.safe_load((SAMPLES / "novacompute.yaml").read_text())
    _add_extra_config(pool, {"DEFAULT": {"compute_driver": FAKE_COMPUTE_DRIVER}}, extra or {})
    path = workdir / "novacompute-fake-driver.yaml"
    path.write_text(yaml.safe_dump(pool, sort_keys=False))
    return path


def tier_pool(workdir: pathlib.Path) -> pathlib.Path:
    """The pool of the ``minimal`` fixture: on the fake driver, with ``tier_extra_config()``."""
    return pool_on_fake_driver(workdir, tier_extra_config())


def tier_nova(workdir: pathlib.Path) -> pathlib.Path:
    """The Nova of the ``minimal`` fixture: the minimal sample at ``RELEASE_UNDER_TEST`` (its release
    and image tag), with ``tier_extra_config()``, ``BOUNDED_RPC``, ``API_ROLLOUT`` and ``ONE_WORKER``."""
    nova = yaml.safe_load((SAMPLES / "nova_minimal.yaml").read_text())
    nova["spec"]["openStackRelease"] = RELEASE_UNDER_TEST
    nova["spec"]["image"]["tag"] = RELEASE_UNDER_TEST
    _add_extra_config(nova, tier_extra_config(), BOUNDED_RPC)
    nova["spec"].setdefault("api", {}).setdefault("deployment", {}).update(API_ROLLOUT)
    for block in ("api", "metadata"):
        nova["spec"].setdefault(block, {}).update(ONE_WORKER)
    path = workdir / "nova_minimal.yaml"
    path.write_text(yaml.safe_dump(nova, sort_keys=False))
    return path


def start_operator(handle: SimHandle) -> None:
    """The operator installed by its chart from its image (``tools/opimage``), as users run it (the
    seconds of its build and install in ``handle.real.startup``)."""
    from opimage import build  # buildah and mmdebstrap

    assert handle.real is not None
    t = time.monotonic()
    image, _ = build()
    handle.real.startup["operator image"] = round(time.monotonic() - t, 1)
    seconds = deploy(handle, image.ref, image.archive)
    handle.real.startup.update({k: round(v, 1) for k, v in seconds.items()})


class TierOperator:
    """The operator the tier started, as the tests check it: still the same (``alive``: the chart's
    pods, none replaced or restarted since this was made) and its log (``log_text``: the pods' logs
    through the API server)."""

    def __init__(self, handle: SimHandle) -> None:
        self.handle = handle
        self.pods = self._pods()

    def _pods(self) -> dict[str, int]:
        """The chart's pods: uid -> restarts of the operator's container."""
        out = {}
        for pod in pods(self.handle, OPERATOR_NAMESPACE, OPERATOR_SELECTOR):
            statuses = (pod.get("status") or {}).get("containerStatuses") or []
            out[pod["metadata"]["uid"]] = sum(int(s.get("restartCount", 0)) for s in statuses)
        return out

    @property
    def alive(self) -> bool:
        return bool(self.pods) and self._pods() == self.pods

    def log_text(self) -> str:
        assert self.handle.real is not None
        return "".join(
            self.handle.real.container_log(pod, OPERATOR_CONTAINER)
            for pod in pods(self.handle, OPERATOR_NAMESPACE, OPERATOR_SELECTOR)
        )


_KILLED: set[str] = set()  # the containers whose processes end_stopping killed


def end_stopping(handle: SimHandle, pod: JSON) -> None:
    """If ``pod`` is stopping (its deletion asked), the processes of each of its running containers
    killed, once per container, as ``crictl stop --timeout 0`` on its node would: how the tier ends
    a wait that tests nothing (a bus role sleeping ``manager_shutdown_timeout``, a nova-compute that
    dropped its SIGTERM). A second delete with a shorter grace does not: a real kubelet does not cut
    short a stop in progress (its SyncTerminatingPod runs without the pod worker's context,
    kubernetes#113606)."""
    assert handle.real is not None
    if not pod["metadata"].get("deletionTimestamp"):
        return
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        cid = status.get("containerID")
        if not cid or "running" not in (status.get("state") or {}) or cid in _KILLED:
            continue
        _KILLED.add(cid)
        # the pod or its node's task gone meanwhile: nothing left to end
        with contextlib.suppress(subprocess.CalledProcessError, ValueError, StopIteration):
            send(container_pids(handle.real.real_compute.nodes, pod, status["name"]), signal.SIGKILL)


def wait_for(
    check: Callable[[], T | None],
    *,
    within: float,
    what: str,
    handle: SimHandle | None = None,
    detail: Callable[[], str] | None = None,
) -> T:
    """``check()`` until it answers; on timeout, ``what``, the last answer, ``detail()`` (e.g. the
    conditions not True) and the tail of the cluster's logs."""
    deadline = time.monotonic() + within
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(2)
    now = ""
    if detail is not None:
        try:
            now = detail()
        except Exception as exc:
            now = repr(exc)
    logs = handle.logs(4000) if handle is not None else ""
    raise AssertionError(f"{what}: not within {within:.0f} s (last: {last!r}; {now})\n{logs}")


def conditions(handle: SimHandle, plural: str, name: str, namespace: str = NAMESPACE) -> dict[str, JSON]:
    obj = handle.cluster.kube.get(f"{GROUP}/namespaces/{namespace}/{plural}/{name}")
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def is_ready(handle: SimHandle, plural: str, name: str, namespace: str = NAMESPACE) -> bool:
    return conditions(handle, plural, name, namespace).get("Ready", {}).get("status") == "True"


def not_ready_summary(handle: SimHandle, plural: str, name: str, namespace: str = NAMESPACE) -> str:
    conds = conditions(handle, plural, name, namespace)
    return "; ".join(
        f"{t}={c['status']}/{c.get('reason')}" for t, c in conds.items() if c["status"] != "True"
    )


def not_ready_detail(
    handle: SimHandle, plural: str, name: str, *selectors: str, namespace: str = NAMESPACE, tail: int = 3000
) -> str:
    """What a wait on ``name`` that timed out shows: its conditions not True with their messages (the
    operator's fixed words, never a secret), then the tails of the operator's log and of every
    container's log in the pods of ``selectors`` (label selectors in ``namespace``)."""
    conds = conditions(handle, plural, name, namespace)
    out = [
        f"{t}={c['status']}/{c.get('reason')}: {c.get('message', '')}"
        for t, c in conds.items()
        if c["status"] != "True"
    ]
    assert handle.real is not None
    out.append(f"===== the operator's log (tail) =====\n{TierOperator(handle).log_text()[-tail:]}")
    for selector in selectors:
        for pod in pods(handle, namespace, selector):
            for container in pod["spec"]["containers"]:
                log = handle.real.container_log(pod, container["name"])
                out.append(f"===== {pod['metadata']['name']}/{container['name']} (tail) =====\n{log[-tail:]}")
    return "\n".join(out)


def pods(handle: SimHandle, namespace: str = NAMESPACE, selector: str = "") -> list[JSON]:
    query = f"?labelSelector={selector}" if selector else ""
    return list(handle.cluster.kube.get(f"/api/v1/namespaces/{namespace}/pods{query}")["items"])


class OpenStackClient:
    """Admin calls to the real services: a token from Keystone, the compute API at its Service."""

    def __init__(self, handle: SimHandle, compute_url: str) -> None:
        assert handle.real is not None
        self._services = handle.real.openstack
        self.compute = compute_url.rstrip("/")
        self._token = ""

    def token(self) -> str:
        if not self._token:
            self._token = self._services.admin_token()
        return self._token

    def call(self, method: str, path: str, body: Any = None, microversion: str = "2.95") -> Any:
        headers = {
            "X-Auth-Token": self.token(),
            "Content-Type": "application/json",
            "OpenStack-API-Version": f"compute {microversion}",
        }
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{self.compute}/v2.1{path}", data, headers, method=method)
        with urllib.request.urlopen(req, timeout=60) as resp:
            text = resp.read()
            return json.loads(text) if text else None

    def fault(self, server_id: str) -> str:
        """An ERROR server's fault: its code, message and the end of where nova raised it."""
        fault = (self.server(server_id) or {}).get("fault") or {}
        return f"{fault.get('code')} {fault.get('message')}: {str(fault.get('details', ''))[-2000:]}"

    def services(self) -> list[JSON]:
        return list(self.call("GET", "/os-services")["services"])

    def server(self, server_id: str) -> JSON | None:
        """The server at microversion 2.95, or None once it is gone (404)."""
        try:
            return dict(self.call("GET", f"/servers/{server_id}")["server"])
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise


def service_address(handle: SimHandle, name: str, port: int, namespace: str = NAMESPACE) -> tuple[str, int]:
    """Where the host (this test) reaches ``port`` of a Service: a port of the host's loopback
    published to it (``RealTier.reach``)."""
    assert handle.real is not None
    host, published = handle.real.reach(namespace, name, port)
    return str(host), int(published)


def compute_url(handle: SimHandle, name: str, namespace: str = NAMESPACE) -> str:
    """The compute API at its Service (``service_address``)."""
    host, port = service_address(handle, name, 8774, namespace)
    return f"http://{host}:{port}"


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def operator_metrics(handle: SimHandle) -> str:
    """The text of the operator's /metrics: the leading pod's, through the API server's pod proxy."""
    return leader_metrics(handle.cluster.kube)
