"""Issue 38 item 4 on the real processes: a nova-compute whose pod is deleted with a build in flight
stops gracefully, to the end, within the grace period the pool renders from its release.

The module's pool (``graceful``, of the minimal Nova, on ``compute-2``) keeps its release's stop
bound: no ``graceful_shutdown_timeout`` and no ``terminationGracePeriodSeconds`` of its own, so the
pod gets what the operator renders (the release's ``graceful_shutdown_timeout`` plus the margin:
200 s at 2026.1). Its nova-compute waits for its tasks on SIGTERM (not the tier's
``manager_shutdown_timeout = 0``), for ``MANAGER_WAIT`` seconds rather than the release's 160: a
wait longer than the old fixed 30 s shows the same, in a minute less of CI each time. nova logs the
steps of its stop at DEBUG, so the pool sets ``debug``. It reaches Placement through a
``PlacementGate`` (``[placement] endpoint_override``), which holds the build's first read of its
allocations until the test lets it go: the build is in flight when the pod is deleted, and stays so
until nova-compute has logged the start of its stop.

Before item 4 the pool's pods had a fixed 30 s: the kubelet killed nova-compute mid-wait (exit
code 137, no end of the stop in its log): the kubelet sends SIGTERM, then SIGKILL once the pod's
deletion grace has run out.
"""

from __future__ import annotations

import json
import os
import pathlib
import ssl
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import pytest
import yaml
from simcluster import SimHandle
from simcluster.client.kube import KubeError

from nova_operator import catalog
from nova_operator.models.common import STOP_MARGIN_SECONDS
from nova_operator.renderers.stops import graceful_shutdown_timeout
from tests.realnova.cloud import request, upload_image
from tests.realnova.own_nova import delete_to_the_end, wait_ready
from tests.realnova.placement_gate import PlacementGate
from tests.realnova.realcluster import (
    GROUP,
    JSON,
    NAMESPACE,
    NOVA,
    UPGRADE_POOL_LABELS,
    OpenStackClient,
    compute_url,
    pods,
    pool_on_fake_driver,
    wait_for,
)

pytestmark = pytest.mark.realnova

POOL_NAME = "graceful"
HOST = "compute-2"  # the node labelled for a scenario's own pool
GATE_SERVICE = "placement-gate"
FLAVOR: dict[str, Any] = {"name": "graceful.tiny", "ram": 64, "vcpus": 1, "disk": 1}
SELECTOR = f"app.kubernetes.io/instance={POOL_NAME},app.kubernetes.io/component=nova-compute"
OLD_FIXED_GRACE = 30  # what the pool's pods had before item 4
MANAGER_WAIT = 50  # [DEFAULT] manager_shutdown_timeout of the pool: longer than OLD_FIXED_GRACE
# nova's own lines for the steps of a stop (nova/service.py, nova/compute/manager.py), in order
STOP_STEPS = (
    "nova-compute service graceful shutdown started.",
    "nova-compute manager graceful shutdown started.",
    "Compute service manager is waiting for",
    "nova-compute manager graceful shutdown finished.",
    "nova-compute service graceful shutdown finished.",
)


@dataclass
class Stage:
    handle: SimHandle
    client: OpenStackClient
    gate: PlacementGate
    image: str = ""
    flavor: str = ""
    server: str = ""
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def kube(self) -> Any:
        return self.handle.cluster.kube


def _pool(workdir: pathlib.Path, gate_url: str) -> JSON:
    extra = {
        "DEFAULT": {"debug": "true", "manager_shutdown_timeout": str(MANAGER_WAIT)},
        "placement": {"endpoint_override": gate_url},
    }
    pool = yaml.safe_load(pool_on_fake_driver(workdir, extra).read_text())
    pool["metadata"]["name"] = POOL_NAME
    label = "example.org/compute-pool"
    pool["spec"]["nodeSelector"] = {label: UPGRADE_POOL_LABELS[label]}
    return dict(pool)


@pytest.fixture(scope="module")
def stage(minimal: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stage]:
    real = minimal.real
    assert real is not None
    gate = PlacementGate(real.host_address, real.openstack.placement_url).start()
    s = Stage(minimal, OpenStackClient(minimal, compute_url(minimal, NOVA)), gate)
    try:
        real.expose(NAMESPACE, GATE_SERVICE, 8778, gate.port)
        workdir = pathlib.Path(tmp_path_factory.mktemp("graceful"))
        t0 = time.monotonic()
        s.kube.apply(_pool(workdir, f"http://{GATE_SERVICE}.{NAMESPACE}.svc:8778"), NAMESPACE)
        wait_ready(minimal, "novacomputes", POOL_NAME, 300, f"the pool {POOL_NAME} Ready")
        wait_for(lambda: _compute_up(s) or None, within=180, what=f"{HOST}'s nova-compute up", handle=minimal)
        s.seconds["pool up"] = time.monotonic() - t0
        s.image = upload_image(real.openstack.glance_url, s.client.token(), "graceful", os.urandom(64 * 1024))
        s.flavor = s.client.call("POST", "/flavors", {"flavor": FLAVOR})["flavor"]["id"]
        yield s
    finally:
        _clean_up(s)


def _compute_up(s: Stage) -> bool:
    rows = [r for r in s.client.services() if r["binary"] == "nova-compute" and r["host"] == HOST]
    return len(rows) == 1 and rows[0]["state"] == "up" and rows[0]["status"] == "enabled"


def _clean_up(s: Stage) -> None:
    """Every step is tried; the first failure is raised at the end. The pool's last pod is not under
    test: it is stopped at once rather than after its release's 160 s wait."""
    failures: list[BaseException] = []

    def step(fn: Callable[..., object], *args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:
            failures.append(exc)

    s.gate.open()
    assert s.handle.real is not None
    glance = s.handle.real.openstack.glance_url
    if s.server:
        step(_delete_server, s)
    if s.flavor:
        step(s.client.call, "DELETE", f"/flavors/{s.flavor}")
    if s.image:
        auth = {"X-Auth-Token": s.client.token()}
        step(lambda: request("DELETE", f"{glance}/v2/images/{s.image}", headers=auth))
    step(_delete_pool, s)
    for path in (
        f"/api/v1/namespaces/{NAMESPACE}/services/{GATE_SERVICE}",
        f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices/{GATE_SERVICE}-real",
    ):
        step(_delete_if_present, s, path)
    step(s.gate.stop)
    if failures:
        raise failures[0]


def _delete_if_present(s: Stage, path: str) -> None:
    try:
        s.kube.delete(path)
    except KubeError as exc:
        if exc.status != 404:
            raise


def _delete_server(s: Stage) -> None:
    """The server deleted by the API itself: HOST's service forced down first (microversion 2.53),
    so the API does not hand the deletion to a nova-compute on HOST and wait for the pool's next pod
    to start one (its stopped one is gone). That service is not under test any more: the pool's
    deletion removes its row next."""
    if s.client.server(s.server) is not None:
        for row in s.client.services():
            if row["binary"] == "nova-compute" and row["host"] == HOST:
                s.client.call("PUT", f"/os-services/{row['id']}", {"forced_down": True}, microversion="2.53")
        s.client.call("DELETE", f"/servers/{s.server}")
    wait_for(lambda: s.client.server(s.server) is None, within=180, what="the server gone from the API")


def _delete_pool(s: Stage) -> None:
    """The pool deleted to the end of its finalizer (its service row goes), its pods stopped at once."""
    delete_to_the_end(s.handle, f"{GROUP}/namespaces/{NAMESPACE}/novacomputes/{POOL_NAME}", POOL_NAME, 300)


# -- the pod's end, as the API and its log show it ----------------------------------------------------


class PodEnd(threading.Thread):
    """Watches one pod until the API has it no more: when its container was seen terminated, and how."""

    def __init__(self, handle: SimHandle, pod: JSON, container: str) -> None:
        super().__init__(name=f"watch {pod['metadata']['name']}", daemon=True)
        self.handle, self.pod, self.container = handle, pod, container
        self.terminated: JSON | None = None
        self.terminated_at: float | None = None  # time.monotonic()
        self.gone_at: float | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        kube = self.handle.cluster.kube
        ctx = ssl.create_default_context(cafile=str(self.handle.cluster.control_plane.ca_file))
        query = urllib.parse.urlencode(
            {
                "watch": "1",
                "fieldSelector": f"metadata.name={self.pod['metadata']['name']}",
                "resourceVersion": self.pod["metadata"]["resourceVersion"],
                "timeoutSeconds": "900",
            }
        )
        req = urllib.request.Request(
            f"{kube.server}/api/v1/namespaces/{NAMESPACE}/pods?{query}",
            headers={"Authorization": f"Bearer {kube.token}", "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=960) as resp:
                for line in resp:
                    event = json.loads(line)
                    self._saw(event["object"])
                    if event["type"] == "DELETED":
                        self.gone_at = time.monotonic()
                        return
        except BaseException as exc:
            self.error = exc

    def _saw(self, pod: JSON) -> None:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            ended = (status.get("state") or {}).get("terminated")
            if status["name"] == self.container and ended and self.terminated is None:
                self.terminated, self.terminated_at = dict(ended), time.monotonic()


def _open_log(s: Stage, pod: JSON, container: str) -> IO[str]:
    """The container's current log, opened: readable to its end after the pod is gone
    (``RealTier.open_log``)."""
    assert s.handle.real is not None
    log: IO[str] = s.handle.real.open_log(pod, container)
    return log


def _running_pod(s: Stage) -> JSON:
    live = [p for p in pods(s.handle, selector=SELECTOR) if not p["metadata"].get("deletionTimestamp")]
    assert [p["spec"]["nodeName"] for p in live] == [HOST], live
    (pod,) = live
    (status,) = [c for c in pod["status"]["containerStatuses"] if c["name"] == "nova-compute"]
    assert "running" in status["state"], status
    return dict(pod)


def _status(s: Stage) -> str:
    shown = s.client.server(s.server)
    assert shown is not None, "the server vanished"
    return str(shown["status"])


def _manager_wait(release: str) -> int:
    """How long the pool's nova-compute waits for its tasks on SIGTERM: ``MANAGER_WAIT``, its
    ``[DEFAULT] manager_shutdown_timeout``, an option the release must have (and default to a wait
    its grace covers) for this scenario to show anything."""
    option = catalog.load_catalog(release).option("DEFAULT", "manager_shutdown_timeout")
    why = (
        f"nova {release} has no [DEFAULT] manager_shutdown_timeout: its nova-compute does not wait "
        "for its tasks, so this scenario shows nothing about the grace at this release"
    )
    assert option is not None, why
    assert option.default is not None, why
    assert MANAGER_WAIT < int(option.default) < graceful_shutdown_timeout(release, None), option.default
    return MANAGER_WAIT


def test_a_compute_deleted_with_a_build_in_flight_stops_gracefully_to_the_end(stage: Stage) -> None:
    s = stage
    release = s.kube.get(f"{GROUP}/namespaces/{NAMESPACE}/novas/{NOVA}")["status"]["installedRelease"]
    wait = _manager_wait(release)
    assert wait > OLD_FIXED_GRACE  # what a fixed 30 s grace cut short
    pod = _running_pod(s)
    grace = int(pod["spec"]["terminationGracePeriodSeconds"])
    assert grace == graceful_shutdown_timeout(release, None) + STOP_MARGIN_SECONDS  # the release's
    assert grace > wait, f"the pod's grace ({grace} s) must cover nova-compute's wait ({wait} s)"

    # a build on HOST, held at its first read of its allocations: in flight
    s.gate.close()
    body = {
        "server": {
            "name": "graceful",
            "imageRef": s.image,
            "flavorRef": s.flavor,
            "networks": "none",
            "host": HOST,
        }
    }
    s.server = str(s.client.call("POST", "/servers", body, microversion="2.74")["server"]["id"])
    assert s.gate.wait_held(s.server, timeout=180), f"no build of {s.server} reached {HOST}: {s.gate.held}"
    assert _status(s) == "BUILD"

    log = _open_log(s, pod, "nova-compute")
    end = PodEnd(s.handle, pod, "nova-compute")
    end.start()
    t0 = time.monotonic()
    s.kube.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{pod['metadata']['name']}")
    text: list[str] = []  # what the log holds, read as it grows

    def stop_started() -> bool:
        text.append(log.read())
        return STOP_STEPS[0] in "".join(text)

    wait_for(stop_started, within=60, what="nova-compute logging the start of its stop", handle=s.handle)
    assert _status(s) == "BUILD"  # still in flight as the stop began
    s.gate.open()
    t_open = time.monotonic() - t0

    def built() -> JSON | None:
        shown = s.client.server(s.server)
        assert shown is not None, "the server vanished"
        assert shown["status"] != "ERROR", shown.get("fault")
        return shown if shown["status"] == "ACTIVE" else None

    active = wait_for(built, within=120, what="the build finished during the stop", handle=s.handle)
    t_active = time.monotonic() - t0
    assert active["OS-EXT-SRV-ATTR:host"] == HOST

    wait_for(
        lambda: end.gone_at is not None or end.error is not None or None,
        within=grace + 60,
        what="the deleted pod gone from the API",
        handle=s.handle,
    )
    assert end.error is None, repr(end.error)
    assert end.terminated is not None, "no terminated state was written"
    assert end.terminated_at is not None
    stopped = end.terminated_at - t0
    text.append(log.read())
    log.close()
    lines = "".join(text).splitlines()
    s.seconds.update({"gate opened": t_open, "build active": t_active, "stop": stopped})
    print(f"item 4, a stop with a build in flight: seconds {s.seconds}")

    # nova went through every step of its stop, the build finishing within it
    at = [next((i for i, ln in enumerate(lines) if step in ln), -1) for step in STOP_STEPS]
    assert -1 not in at, dict(zip(STOP_STEPS, at, strict=True))
    assert at == sorted(at), dict(zip(STOP_STEPS, at, strict=True))
    assert f"waiting for {wait} seconds" in lines[at[2]], lines[at[2]]
    took = [i for i, ln in enumerate(lines) if s.server in ln and "Took " in ln and "to build instance" in ln]
    assert took, "no line of the build's end"
    assert at[0] < took[0] < at[-1], (took, at)
    assert not [ln for ln in lines if "Graceful shutdown timeout exceeded" in ln]
    # it ended on its own, on SIGTERM, before its grace ran out (SIGKILL: 137), after the release's
    # wait: longer than the old fixed 30 s would have let it live
    assert end.terminated["exitCode"] == 0, end.terminated
    assert end.terminated["reason"] == "Completed", end.terminated
    assert wait <= stopped < grace, (stopped, wait, grace)
