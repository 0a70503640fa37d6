"""Release upgrades 2025.2 → 2026.1 → 2026.2 with the real nova of each release (issue 25, scenario 1).

A Nova of its own (``nova-up``: its own databases, its own vhost on the broker, one API replica, no
console proxy) and a pool of its own on ``compute-2`` start at 2025.2; two servers boot there.
Then, in this order:

1. a failed expand and the abort recipe of ``docs/operations.md``: with Placement stopped, the real
   ``nova-status upgrade check`` fails ("Placement API"), the expand Job stops before either schema
   changes and after its five attempts the Nova reports ``ExpandFailed``; the documented patch
   (release and tag back) aborts: the phase Jobs go, ``UpgradeAborted``, the Nova Ready at 2025.2;
2. the upgrade to 2026.1 and 3. to 2026.2: the pre-flight check exits 1 (a warning nova really
   checks: instances without ``hw_machine_type``, which only the libvirt driver sets) and the
   upgrade proceeds (``UpgradeCheckWarnings``); migrate reads the cells with the new code; the roles
   roll; contract runs the online data migrations on the cell schema and then on cell0; the pool
   follows. The servers stay listable and ACTIVE; a steady client lists them throughout, and the
   failed requests of each rollout are counted (target 0).

The module removes its Nova, pool, servers, vhost and databases' users at the end (the databases
stay: nothing else names them).
"""

from __future__ import annotations

import os
import threading
import time
import urllib.error
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from simcluster import SimHandle

from tests.realnova.cloud import request, upload_image
from tests.realnova.own_nova import NOVAS, OwnNova, wait_ready
from tests.realnova.realcluster import (
    JSON,
    NAMESPACE,
    OpenStackClient,
    compute_url,
    conditions,
    is_ready,
    not_ready_summary,
    pods,
    wait_for,
)

pytestmark = [pytest.mark.realnova, pytest.mark.long]  # make test-realnova

OWN = OwnNova("nova-up", "upgrade")
UP, UP_POOL = OWN.name, OWN.pool
HOST = "compute-2"
FLAVOR: dict[str, Any] = {"name": "upgrade.small", "ram": 128, "vcpus": 1, "disk": 1}
JOBS = f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"
PHASE_JOBS = ("db-expand", "db-migrate", "db-contract")


class SteadyClient(threading.Thread):
    """Lists the servers every half second; each answer recorded under the current ``label``."""

    def __init__(self, client: OpenStackClient) -> None:
        super().__init__(name="steady-client", daemon=True)
        self.client = client
        self.label = ""
        self.answers: list[tuple[float, str, str]] = []  # (monotonic time, label, "200" or the failure)
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            label = self.label
            try:
                self.client.call("GET", "/servers/detail")
                outcome = "200"
            except urllib.error.HTTPError as exc:
                outcome = str(exc.code)
            except OSError as exc:
                outcome = type(exc).__name__
            self.answers.append((time.monotonic(), label, outcome))
            self._halt.wait(0.5)

    def stop(self) -> None:
        self._halt.set()
        self.join(30)

    def tally(self, label: str) -> tuple[int, list[str]]:
        """(requests, failures) under ``label``."""
        mine = [a for a in self.answers if a[1] == label]
        return len(mine), [a[2] for a in mine if a[2] != "200"]


@dataclass
class Site:
    handle: SimHandle
    client: OpenStackClient
    steady: SteadyClient
    image: str = ""
    flavor: str = ""
    servers: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    failed: dict[str, tuple[int, list[str]]] = field(default_factory=dict)

    @property
    def kube(self) -> Any:
        return self.handle.cluster.kube

    def nova(self) -> JSON:
        return dict(self.kube.get(f"{NOVAS}/{UP}"))

    def status(self) -> JSON:
        return dict(self.nova().get("status") or {})

    def servers_shown(self) -> dict[str, str]:
        listed = self.client.call("GET", "/servers/detail")["servers"]
        return {s["id"]: s["status"] for s in listed if s["id"] in self.servers}


@pytest.fixture(scope="module")
def site(minimal: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    handle = minimal
    real = handle.real
    assert real is not None
    OWN.provision(handle)
    t0 = time.monotonic()
    OWN.create(handle, "2025.2", tmp_path_factory.mktemp("upgrade"))
    steady: SteadyClient | None = None
    s: Site | None = None
    try:
        wait_ready(handle, "novas", UP, 480, "the upgrade's Nova Ready at 2025.2")
        wait_ready(handle, "novacomputes", UP_POOL, 300, "the upgrade's pool Ready")
        client = OpenStackClient(handle, compute_url(handle, UP))
        steady = SteadyClient(OpenStackClient(handle, compute_url(handle, UP)))
        s = Site(handle, client, steady)
        s.seconds["bring-up"] = time.monotonic() - t0
        osv = real.openstack
        s.image = upload_image(osv.glance_url, client.token(), "upgrade", os.urandom(64 * 1024))
        s.flavor = client.call("POST", "/flavors", {"flavor": FLAVOR})["flavor"]["id"]
        t0 = time.monotonic()
        for n in (1, 2):
            body = {
                "server": {
                    "name": f"upgrade-{n}",
                    "imageRef": s.image,
                    "flavorRef": s.flavor,
                    "networks": "none",
                }
            }
            s.servers.append(str(client.call("POST", "/servers", body, microversion="2.37")["server"]["id"]))
        wait_for(
            lambda: set(s.servers_shown().values()) == {"ACTIVE"} or None,
            within=180,
            what="the servers ACTIVE at 2025.2",
            detail=lambda: repr(
                {k: v if v != "ERROR" else client.fault(k) for k, v in s.servers_shown().items()}
            ),
        )
        s.seconds["boot"] = time.monotonic() - t0
        steady.start()
        yield s
    finally:
        if steady is not None and steady.is_alive():
            steady.stop()
        if s is not None:
            print(f"upgrade: seconds {s.seconds}; failed requests {s.failed}")
        _tear_down(handle, s)


def _tear_down(handle: SimHandle, s: Site | None) -> None:
    real = handle.real
    assert real is not None
    if s is not None:
        for server in s.servers:
            try:
                s.client.call("DELETE", f"/servers/{server}")
            except urllib.error.HTTPError as exc:
                if exc.code != 404:
                    raise
        wait_for(lambda: not s.servers_shown() or None, within=120, what="the upgrade's servers deleted")
        if s.flavor:
            s.client.call("DELETE", f"/flavors/{s.flavor}")
        if s.image:
            token = s.client.token()
            request(
                "DELETE", f"{real.openstack.glance_url}/v2/images/{s.image}", headers={"X-Auth-Token": token}
            )
    OWN.tear_down(handle)


# -- helpers -----------------------------------------------------------------------------------------


def _events(handle: SimHandle) -> dict[str, tuple[str, str, int]]:
    """The Nova's events: uid -> (reason, message, count)."""
    items = handle.cluster.kube.get(
        f"/api/v1/namespaces/{NAMESPACE}/events?fieldSelector=involvedObject.name={UP}"
    )["items"]
    return {
        e["metadata"]["uid"]: (e["reason"], e.get("message", ""), int(e.get("count") or 1)) for e in items
    }


def _new_events(handle: SimHandle, before: dict[str, tuple[str, str, int]]) -> list[tuple[str, str]]:
    return [
        (reason, message)
        for uid, (reason, message, count) in _events(handle).items()
        if uid not in before or before[uid][2] < count
    ]


def _job_pods(handle: SimHandle, job: str) -> list[JSON]:
    return pods(handle, selector=f"job-name={UP}-{job}")


def _termination_messages(handle: SimHandle, job: str) -> list[str]:
    out = []
    for pod in _job_pods(handle, job):
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            for state in (cs.get("state") or {}, cs.get("lastState") or {}):
                message = (state.get("terminated") or {}).get("message")
                if message:
                    out.append(str(message).strip())
    return out


def _logs(handle: SimHandle, job: str) -> str:
    """Every container log of the Job's pods (``RealTier.container_log``)."""
    assert handle.real is not None
    text = []
    for pod in _job_pods(handle, job):
        spec = pod["spec"]
        for container in [*(spec.get("initContainers") or []), *spec["containers"]]:
            text.append(handle.real.container_log(pod, container["name"]))
    return "\n".join(text)


def _alembic(handle: SimHandle, database: str) -> list[list[str]]:
    assert handle.real is not None
    return handle.real.backends.mariadb.sql("SELECT version_num FROM alembic_version", database=database)


def _schemas(handle: SimHandle) -> dict[str, list[list[str]]]:
    return {db: _alembic(handle, db) for db in ("nova_up_api", "nova_up", "nova_up_cell0")}


# -- 1. a failed expand and the abort ------------------------------------------------------------------


def test_a_failed_pre_flight_check_fails_the_expand_and_the_documented_abort_restores_2025_2(
    site: Site,
) -> None:
    handle = site.handle
    assert handle.real is not None
    osv = handle.real.openstack
    schemas = _schemas(handle)
    before = _events(handle)
    images = OWN.images(site.handle)
    site.steady.label = "failed expand"
    t0 = time.monotonic()
    osv.stop_service("placement")
    try:
        OWN.patch_release(site.handle, "2026.1")

        def failed() -> JSON | None:
            c = conditions(handle, "novas", UP).get("DatabaseReady", {})
            return c if c.get("reason") == "ExpandFailed" else None

        condition = wait_for(
            failed,
            within=600,
            what="ExpandFailed after the expand Job's five attempts",
            handle=handle,
            detail=lambda: not_ready_summary(handle, "novas", UP),
        )
    finally:
        osv.start_service("placement")
    site.seconds["expand failed"] = time.monotonic() - t0
    assert condition["status"] == "False"
    assert f"{UP}-db-expand" in condition["message"], condition
    messages = _termination_messages(handle, "db-expand")
    assert messages, "no termination message of the expand Job's pods"
    codes = {int(m.rsplit(" ", 1)[1]) for m in messages}
    assert all(m.startswith("nova-status upgrade check exit ") for m in messages), messages
    assert min(codes) >= 2, messages  # the failure path: 2 (a check failed) or 255 (the check errored)
    # the check errored reaching Placement at the URL the pods have from the catalog (exit 255:
    # nova-status prints the traceback): closed unanswered by the relay (the Service's endpoint is
    # the relay, which finds nothing behind it)
    log = _logs(handle, "db-expand")
    placement = osv.internal_urls.get("placement", osv.placement_url)
    assert f"ConnectFailure: Unable to establish connection to {placement}/" in log, log[-2000:]
    job = site.kube.get(f"{JOBS}/{UP}-db-expand")
    assert (job.get("status") or {}).get("failed") == 5, job.get("status")
    assert _schemas(handle) == schemas  # stopped before either schema was touched
    assert OWN.images(site.handle) == images  # the old release kept serving
    reasons = [r for r, _ in _new_events(handle, before)]
    assert "UpgradeCheckWarnings" in reasons, reasons
    assert "ExpandFailed" in reasons, reasons

    # the abort recipe of docs/operations.md: release and tag back in one merge patch
    before = _events(handle)
    t0 = time.monotonic()
    OWN.patch_release(site.handle, "2025.2")
    wait_ready(handle, "novas", UP, 300, "the Nova Ready at 2025.2 after the abort")
    site.seconds["abort"] = time.monotonic() - t0
    status = site.status()
    assert status.get("installedRelease") == "2025.2", status
    assert not status.get("upgradePhase"), status
    assert not status.get("targetRelease"), status
    reasons = [r for r, _ in _new_events(handle, before)]
    assert "UpgradeAborted" in reasons, reasons
    names = {j["metadata"]["name"] for j in site.kube.get(JOBS)["items"]}
    assert not {f"{UP}-{job}" for job in PHASE_JOBS} & names, names
    assert OWN.images(site.handle) == images
    assert set(site.servers_shown().values()) == {"ACTIVE"}
    site.failed["failed expand and abort"] = site.steady.tally("failed expand")
    assert site.failed["failed expand and abort"][1] == [], site.failed


# -- 2., 3. the upgrades ------------------------------------------------------------------------------------


def _upgrade(s: Site, release: str, within: float = 1200) -> None:
    handle = s.handle
    previous = str(s.status().get("installedRelease"))
    before = _events(handle)
    s.steady.label = release
    phases: dict[str, float] = {}
    t0 = time.monotonic()
    OWN.patch_release(s.handle, release)

    def done() -> bool:
        status = s.status()
        phase = status.get("upgradePhase") or ""
        if phase:
            phases.setdefault(str(phase), round(time.monotonic() - t0))
        return status.get("installedRelease") == release and not phase and is_ready(handle, "novas", UP)

    wait_for(
        done,
        within=within,
        what=f"the upgrade {previous} -> {release} complete",
        handle=handle,
        detail=lambda: f"{s.status().get('upgradePhase')}: {not_ready_summary(handle, 'novas', UP)}",
    )
    s.seconds[f"{release} control plane"] = time.monotonic() - t0

    def pool_followed() -> bool:
        now = [p for p in pods(handle, selector=f"app.kubernetes.io/instance={UP_POOL}")]
        images = {c["image"] for p in now for c in p["spec"]["containers"]}
        return images == {f"ghcr.io/c5c3/nova-compute:{release}"} and is_ready(
            handle, "novacomputes", UP_POOL
        )

    wait_for(
        pool_followed,
        within=300,
        what=f"the pool on nova-compute:{release} and Ready",
        handle=handle,
        detail=lambda: not_ready_summary(handle, "novacomputes", UP_POOL),
    )
    s.seconds[f"{release} with the pool"] = time.monotonic() - t0
    s.steady.label = ""
    s.failed[f"{previous} -> {release}"] = s.steady.tally(release)
    print(f"upgrade {previous} -> {release}: phases at {phases}; requests, failed {s.failed}")

    assert list(phases) == ["Expanding", "Migrating", "RollingUpdate", "Contracting"], phases
    assert set(OWN.images(s.handle).values()) == {f"ghcr.io/c5c3/nova:{release}"}
    events = _new_events(handle, before)
    reasons = [r for r, _ in events]
    for reason in ("UpgradeInitiated", "ExpandComplete", "MigrateComplete", "DeploymentRolloutComplete"):
        assert reason in reasons, events
    assert "UpgradeComplete" in reasons, events
    # the pre-flight check warned (exit 1: instances without hw_machine_type) and the upgrade went on
    assert _termination_messages(handle, "db-expand") == ["nova-status upgrade check exit 1"]
    assert "UpgradeCheckWarnings" in reasons, events
    assert "hw_machine_type unset" in _logs(handle, "db-expand")
    # contract: the online data migrations ran to the end on the cell schema, then on cell0
    contract = s.kube.get(f"{JOBS}/{UP}-db-contract")
    assert (contract.get("status") or {}).get("succeeded") == 1, contract.get("status")
    log = _logs(handle, "db-contract")
    # each online_data_migrations call prints its table; the cell pass and the cell0 pass: two at least
    assert log.count("| Total Needed | Completed |") >= 2, log[-2000:]
    # the servers of 2025.2: listed, ACTIVE
    assert s.servers_shown() == dict.fromkeys(s.servers, "ACTIVE")
    assert s.failed[f"{previous} -> {release}"][1] == [], s.failed


def test_the_upgrade_to_2026_1_keeps_the_servers_and_the_api(site: Site) -> None:
    _upgrade(site, "2026.1")


def test_the_upgrade_to_2026_2_keeps_the_servers_and_the_api(site: Site) -> None:
    _upgrade(site, "2026.2")
