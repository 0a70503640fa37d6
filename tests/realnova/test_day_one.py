"""Day one on the real Nova (issue 24, scenarios 2, 4, 5 and 6), on the minimal sample and its pool.

One server, shared in this order: it boots on the fake driver from an image uploaded to Glance,
resizes to the pool's other host and back to ACTIVE with placement following it (2); its console URL
reaches the "hypervisor's" console server through the console Service, opened as the browser that
loaded its page would; a made-up token, or the token from another site's page, does not (4);
the metadata Service answers its signed requests, and only with the current shared secret once the
Secret is rotated, which rolls the metadata pods and the pool (5); then it is deleted, placement lets
its allocation go (2), and a one-minute db-archive run moves its row to the shadow table, which the
condition and the metrics report (6).

The module leaves the cluster as other modules expect it: no server, image or flavor of its own, the
db-archive schedule back to its default and its runs gone, the Nova and the pool Ready.
"""

from __future__ import annotations

import base64
import os
import re
import secrets
import time
import urllib.error
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from simcluster import SimHandle
from simcluster.client.kube import Kube, KubeError

from tests.realnova.cloud import (
    allocations,
    metadata_get,
    metadata_signature,
    provider_name,
    request,
    upload_image,
)
from tests.realnova.consoles import RFB_VERSION, VNCStandIn, websocket_upgrade
from tests.realnova.realcluster import (
    GROUP,
    JSON,
    NAMESPACE,
    NOVA,
    POOL,
    OpenStackClient,
    compute_url,
    conditions,
    http_status,
    is_ready,
    not_ready_summary,
    operator_metrics,
    pods,
    service_address,
    wait_for,
)
from tests.realnova.rollouts import DEPLOYMENTS, annotations_changed, changed, pod_names, templates

pytestmark = pytest.mark.realnova

POOL_HOSTS = {"compute-0", "compute-1"}
SMALL: dict[str, Any] = {"name": "day-one.small", "ram": 128, "vcpus": 1, "disk": 1}
LARGE: dict[str, Any] = {"name": "day-one.large", "ram": 256, "vcpus": 2, "disk": 2}
FAKE_CONSOLE_HOST = "fakevncconsole.com"  # where nova.virt.fake.FakeDriver says every console is
FAKE_CONSOLE_PORT = 6969
VNC_SERVICE = "day-one-vnc"
METADATA_SECRET = "nova-metadata-proxy"
EVERY_MINUTE = "* * * * *"
ARCHIVE_SELECTOR = f"app.kubernetes.io/instance={NOVA},app.kubernetes.io/component=db-archive"
METADATA_SELECTOR = f"app.kubernetes.io/instance={NOVA},app.kubernetes.io/component=metadata"


@dataclass
class Day:
    handle: SimHandle
    client: OpenStackClient
    placement: str
    glance: str
    image: str = ""
    flavors: dict[str, str] = field(default_factory=dict)  # name -> id
    server: str = ""
    project: str = ""
    seconds: dict[str, float] = field(default_factory=dict)

    def token(self) -> str:
        return self.client.token()

    def show(self) -> JSON | None:
        """The server at microversion 2.95 (None once it is gone)."""
        return self.client.server(self.server)

    def wait_status(self, status: str, within: float) -> JSON:
        t0 = time.monotonic()
        deadline = t0 + within
        last: JSON | None = None
        while time.monotonic() < deadline:
            last = self.show()
            assert last is not None, "the server vanished"
            if last["status"] == "ERROR":
                raise AssertionError(f"server in ERROR: {last.get('fault')}")
            if last["status"] == status and not last.get("OS-EXT-STS:task_state"):
                return last
            time.sleep(1)
        raise AssertionError(f"server not {status} within {within:.0f} s: {last}")

    def delete(self) -> None:
        """Delete the server (unless it is gone already) and wait until the API no longer shows it."""
        if self.show() is not None:
            self.client.call("DELETE", f"/servers/{self.server}")
        wait_for(lambda: self.show() is None, within=120, what="the server gone from the API")

    def allocations(self) -> dict[str, JSON]:
        return allocations(self.placement, self.token(), self.server)

    def allocated(self) -> dict[str, dict[str, int]]:
        """The server's allocations as ``{provider name: resources}``."""
        return {
            provider_name(self.placement, self.token(), rp): dict(a["resources"])
            for rp, a in self.allocations().items()
        }


def resources(flavor: dict[str, Any]) -> dict[str, int]:
    return {"VCPU": flavor["vcpus"], "MEMORY_MB": flavor["ram"], "DISK_GB": flavor["disk"]}


def new_day(handle: SimHandle, image_name: str) -> Day:
    """The scenario's cloud on ``handle``: an image (1 MiB of raw disk) in Glance and the two flavors."""
    assert handle.real is not None
    osv = handle.real.openstack
    d = Day(handle, OpenStackClient(handle, compute_url(handle, NOVA)), osv.placement_url, osv.glance_url)
    d.image = upload_image(d.glance, d.token(), image_name, os.urandom(1024 * 1024))
    for flavor in (SMALL, LARGE):
        d.flavors[flavor["name"]] = d.client.call("POST", "/flavors", {"flavor": flavor})["flavor"]["id"]
    return d


@pytest.fixture(scope="module")
def day(minimal: SimHandle) -> Iterator[Day]:
    """``new_day``, cleaned up with whatever the tests left."""
    d = new_day(minimal, "day-one")
    try:
        yield d
    finally:
        _clean_up(d)


def _clean_up(d: Day) -> None:
    """Every step is tried; the first failure is raised at the end."""
    kube = d.handle.cluster.kube
    failures: list[BaseException] = []

    def step(fn: Callable[..., object], *args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:
            failures.append(exc)

    if d.server:
        step(d.delete)
    for fid in d.flavors.values():
        step(d.client.call, "DELETE", f"/flavors/{fid}")
    step(lambda: request("DELETE", f"{d.glance}/v2/images/{d.image}", headers={"X-Auth-Token": d.token()}))
    for path in (
        f"/api/v1/namespaces/{NAMESPACE}/services/{VNC_SERVICE}",
        f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices/{VNC_SERVICE}-real",
    ):
        step(_delete_if_present, kube, path)
    step(_restore_db_archive, d.handle)
    for plural, name in (("novas", NOVA), ("novacomputes", POOL)):
        step(_wait_ready, d.handle, plural, name)
    if failures:
        raise failures[0]


def _wait_ready(handle: SimHandle, plural: str, name: str) -> None:
    wait_for(
        lambda: is_ready(handle, plural, name) or None,
        within=300,
        what=f"{plural}/{name} Ready after day one",
        detail=lambda: not_ready_summary(handle, plural, name),
    )


def _delete_if_present(kube: Kube, path: str) -> None:
    try:
        kube.delete(path)
    except KubeError as exc:  # absent when the console test did not get that far
        if exc.status != 404:
            raise


def _restore_db_archive(handle: SimHandle) -> None:
    """The sample's default schedule back, and the runs of the one-minute schedule gone (a finished
    run's pod is not Ready, which other modules would count against the Deployments)."""
    kube = handle.cluster.kube
    kube.patch(f"{GROUP}/namespaces/{NAMESPACE}/novas/{NOVA}", {"spec": {"dbArchive": None}})
    cronjob = f"/apis/batch/v1/namespaces/{NAMESPACE}/cronjobs/{NOVA}-db-archive"
    wait_for(
        lambda: kube.get(cronjob)["spec"]["schedule"] == "@daily" or None,
        within=60,
        what="the db-archive CronJob back on @daily",
    )
    time.sleep(2)  # a run the controller started from the old schedule is listed by now
    jobs = f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"
    for job in kube.get(f"{jobs}?labelSelector={ARCHIVE_SELECTOR}")["items"]:
        kube.delete(f"{jobs}/{job['metadata']['name']}?propagationPolicy=Background")
    wait_for(
        lambda: not pods(handle, selector=ARCHIVE_SELECTOR) or None,
        within=120,
        what="the db-archive runs' pods gone",
    )


@pytest.fixture(scope="module")
def server(day: Day) -> str:
    """The server every scenario here shares: ``networks: none``, the small flavor, ACTIVE."""
    body = {
        "server": {
            "name": "day-one",
            "imageRef": day.image,
            "flavorRef": day.flavors[SMALL["name"]],
            "networks": "none",
        }
    }
    t0 = time.monotonic()
    created = day.client.call("POST", "/servers", body, microversion="2.37")["server"]
    day.server = str(created["id"])
    shown = day.wait_status("ACTIVE", within=180)
    day.seconds["boot"] = time.monotonic() - t0
    day.project = str(shown["tenant_id"])
    return day.server


@pytest.fixture(scope="module")
def vnc(day: Day) -> Iterator[VNCStandIn]:
    """The fake driver's console address answered by ``VNCStandIn`` on the host, where the pods
    reach it through ``VNC_SERVICE`` (``RealTier.expose``)."""
    real = day.handle.real
    assert real is not None
    standin = VNCStandIn(real.host_address).start()
    try:
        real.expose(NAMESPACE, VNC_SERVICE, FAKE_CONSOLE_PORT, standin.port)
        real.alias(FAKE_CONSOLE_HOST, NAMESPACE, VNC_SERVICE)
        yield standin
    finally:
        standin.stop()


# -- scenario 2: the server, its resize and its allocations -----------------------------------------


def test_a_server_boots_on_a_pool_host_and_resizes_to_the_other_with_placement_following(
    day: Day, server: str
) -> None:
    shown = day.show()
    assert shown is not None
    assert shown["status"] == "ACTIVE"
    assert shown["flavor"]["original_name"] == SMALL["name"]
    source = shown["OS-EXT-SRV-ATTR:host"]
    assert source in POOL_HOSTS, shown
    assert day.allocated() == {source: resources(SMALL)}

    t0 = time.monotonic()
    day.client.call(
        "POST", f"/servers/{server}/action", {"resize": {"flavorRef": day.flavors[LARGE["name"]]}}
    )
    resized = day.wait_status("VERIFY_RESIZE", within=180)
    day.seconds["resize"] = time.monotonic() - t0
    target = resized["OS-EXT-SRV-ATTR:host"]
    assert target in POOL_HOSTS - {source}, resized  # not to the same host: allow_resize_to_same_host
    assert day.allocated() == {target: resources(LARGE)}  # the source's is the migration's until confirmed

    t0 = time.monotonic()
    day.client.call("POST", f"/servers/{server}/action", {"confirmResize": None})
    confirmed = day.wait_status("ACTIVE", within=120)
    assert confirmed["OS-EXT-SRV-ATTR:host"] == target
    assert confirmed["flavor"]["original_name"] == LARGE["name"]
    migrations = day.client.call("GET", f"/os-migrations?instance_uuid={server}", microversion="2.80")[
        "migrations"
    ]
    assert [
        (m["migration_type"], m["status"], m["source_compute"], m["dest_compute"]) for m in migrations
    ] == [("resize", "confirmed", source, target)]
    wait_for(
        lambda: len(day.allocations()) == 1 or None,
        within=60,
        what="the source host's allocation released by the confirm",
    )
    day.seconds["confirm"] = time.monotonic() - t0
    assert day.allocated() == {target: resources(LARGE)}
    print(f"day one, scenario 2: {source} -> {target}; seconds {day.seconds}")


# -- scenario 4: the console ---------------------------------------------------------------------------


def test_the_console_url_opens_the_servers_console_through_the_novncproxy_service(
    day: Day, server: str, vnc: VNCStandIn
) -> None:
    answer = day.client.call(
        "POST", f"/servers/{server}/remote-consoles", {"remote_console": {"protocol": "vnc", "type": "novnc"}}
    )["remote_console"]
    url = urllib.parse.urlsplit(answer["url"])
    assert (url.scheme, url.hostname, url.path) == ("https", "novnc.example.org", "/vnc_lite.html"), answer
    (path,) = urllib.parse.parse_qs(url.query)["path"]  # noVNC opens the WebSocket at "/" + path
    (token,) = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)["token"]
    address, port = service_address(day.handle, f"{NOVA}-novncproxy", 6080)
    assert http_status(f"http://{address}:{port}{url.path}") == 200  # the page the URL names

    # as the browser that loaded the page opens it: Host and Origin are the URL's (nova checks both)
    origin = f"{url.scheme}://{url.netloc}"
    upgrade, key = websocket_upgrade(address, port, "/" + path.lstrip("/"), url.netloc, origin=origin)
    try:
        assert upgrade.status == 101, (upgrade.status, upgrade.headers)
        assert upgrade.accept_matches(key), upgrade.headers
        # the greeting (or, on this driver, the close nova's CONNECT handling ends in: see consoles.py)
        assert upgrade.read_frame() in (RFB_VERSION, None)
    finally:
        upgrade.close()
    wait_for(lambda: vnc.requests or None, within=10, what="the console server reached")
    (connect,) = vnc.requests  # the proxy took the token to the instance's console, once
    assert re.fullmatch(r"CONNECT [0-9a-f-]{36} HTTP/1.1", connect), connect

    made_up = str(uuid.uuid4())
    assert made_up != token
    refused = (
        (f"/?token={made_up}", origin),  # a made-up token
        ("/" + path.lstrip("/"), "https://elsewhere.example.org"),  # the token, from another site's page
    )
    for ws_path, page in refused:
        upgrade, _ = websocket_upgrade(address, port, ws_path, url.netloc, origin=page)
        try:
            # websockify completes the handshake before nova checks token and origin; nova then closes it
            assert upgrade.status == 101, (upgrade.status, upgrade.headers)
            assert upgrade.read_frame() is None, page  # closed, no console
        finally:
            upgrade.close()
    time.sleep(1)  # a CONNECT would precede the close; give the stand-in's thread time to record one
    assert vnc.requests == [connect]  # nothing more reached the console server


# -- scenario 5: metadata --------------------------------------------------------------------------------


def _metadata(day: Day, secret: str) -> tuple[int, Any]:
    address, port = service_address(day.handle, f"{NOVA}-metadata", 8775)
    url = f"http://{address}:{port}"
    return metadata_get(
        url,
        "/openstack/latest/meta_data.json",
        instance_id=day.server,
        tenant_id=day.project,
        signature=metadata_signature(secret, day.server),
    )


def _shared_secret(handle: SimHandle) -> str:
    """The value the Nova's ``metadata.sharedSecretRef`` names, as the Secret holds it now."""
    secret = handle.cluster.kube.get(f"/api/v1/namespaces/{NAMESPACE}/secrets/{METADATA_SECRET}")
    return base64.b64decode(secret["data"]["shared_secret"]).decode()


def test_metadata_answers_the_servers_request_signed_with_the_shared_secret(day: Day, server: str) -> None:
    shared = _shared_secret(day.handle)
    status, body = _metadata(day, shared)
    assert status == 200, body
    assert body["uuid"] == server
    assert body["name"] == "day-one"
    status, body = _metadata(day, "not-" + shared)
    assert status == 403, body


def test_rotating_the_shared_secret_rolls_metadata_and_the_pool_and_only_the_new_one_signs(
    day: Day, server: str
) -> None:
    kube = day.handle.cluster.kube
    old = _shared_secret(day.handle)
    before = {p["metadata"]["name"] for p in pods(day.handle, selector=METADATA_SELECTOR)}
    templates_before, pods_before = templates(day.handle), pod_names(day.handle)
    computes_before = pods_before["pool"]
    held = {rp: a["resources"] for rp, a in day.allocations().items()}
    rotated = "rotated-" + secrets.token_urlsafe(12)
    t0 = time.monotonic()
    kube.patch(
        f"/api/v1/namespaces/{NAMESPACE}/secrets/{METADATA_SECRET}",
        {"stringData": {"shared_secret": rotated}},
    )
    deployment = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{NOVA}-metadata"

    def rolled() -> set[str] | None:
        now = pods(day.handle, selector=METADATA_SELECTOR)
        names = {p["metadata"]["name"] for p in now}
        status = kube.get(deployment)["status"]
        ready = all(
            any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])
            for p in now
        )
        done = (
            names
            and not names & before
            and ready
            and status.get("updatedReplicas") == status.get("replicas") == status.get("availableReplicas")
        )
        return names if done else None

    after = wait_for(rolled, within=240, what="the metadata pods replaced", handle=day.handle)
    day.seconds["metadata roll"] = time.monotonic() - t0
    assert after.isdisjoint(before)
    status, body = _metadata(day, old)
    assert status == 403, body
    status, body = _metadata(day, rotated)
    assert status == 200, body
    assert body["uuid"] == server

    # the compute contract carries the secret too, and its hash rolls the pool: nova-compute comes back
    # on both nodes as the same host and resource provider (its node identity is on the node)
    def pool_rolled() -> set[str] | None:
        now = pod_names(day.handle)["pool"]
        fresh = len(now) == len(computes_before) and not now & computes_before
        return now if fresh and is_ready(day.handle, "novacomputes", POOL) else None

    computes_after = wait_for(
        pool_rolled,
        within=300,
        what="the pool's pods replaced and the pool Ready",
        handle=day.handle,
        detail=lambda: not_ready_summary(day.handle, "novacomputes", POOL),
    )
    day.seconds["pool roll"] = time.monotonic() - t0
    # only the metadata API and the pool got a new pod template; the other roles kept their pods
    templates_after = templates(day.handle)
    (pool_key,) = [k for k in templates_after if k.startswith("daemonset/")]
    assert changed(templates_before, templates_after) == {"deployment/nova-metadata", pool_key}
    assert annotations_changed(templates_before, templates_after, "deployment/nova-metadata") == {
        "nova.c5c3.io/metadata-secret-hash"
    }
    pods_after = pod_names(day.handle)
    for key in DEPLOYMENTS.keys() - {"deployment/nova-metadata"}:
        assert pods_after[key] == pods_before[key], key
    rows = {s["host"]: s for s in day.client.services() if s["binary"] == "nova-compute"}
    assert set(rows) == POOL_HOSTS, rows
    assert all(s["state"] == "up" for s in rows.values()), rows
    assert {rp: a["resources"] for rp, a in day.allocations().items()} == held
    print(
        f"day one, scenario 5: metadata pods {sorted(before)} -> {sorted(after)}, pool pods "
        f"{sorted(computes_before)} -> {sorted(computes_after)}; seconds {day.seconds}"
    )


# -- scenario 2, end: delete -----------------------------------------------------------------------------


def test_deleting_the_server_releases_its_allocation(day: Day, server: str) -> None:
    assert day.allocations(), "the server holds an allocation before its deletion"
    t0 = time.monotonic()
    day.delete()
    day.seconds["delete"] = time.monotonic() - t0
    assert day.allocations() == {}
    mariadb = day.handle.real.backends.mariadb
    (row,) = mariadb.sql(f"SELECT deleted != 0 FROM instances WHERE uuid = '{server}'", database="nova")
    assert row == ["1"]  # soft-deleted: the row stays until an archive moves it


# -- scenario 6: db-archive ----------------------------------------------------------------------------


def _archive_metrics(handle: SimHandle) -> tuple[float, float]:
    """(succeeded runs, observed durations) of this Nova in the operator's metrics."""
    total = count = 0.0
    for family in text_string_to_metric_families(operator_metrics(handle)):
        for sample in family.samples:
            labels = sample.labels
            if labels.get("nova") != NOVA or labels.get("namespace") != NAMESPACE:
                continue
            if sample.name == "nova_operator_db_archive_total" and labels.get("result") == "succeeded":
                total += sample.value
            if sample.name == "nova_operator_db_archive_duration_seconds_count":
                count += sample.value
    return total, count


def _run_after(handle: SimHandle, archive: JSON, *, at_once: bool = False) -> JSON:
    """Patch ``spec.dbArchive`` with ``archive``; wait for a db-archive run begun after the CronJob
    took it to succeed, and return that Job. ``at_once``: that run is started from the CronJob's
    template as ``kubectl create job --from=cronjob/...`` does, rather than waited for at the next
    minute (the schedule's own runs are the previous test's)."""
    kube = handle.cluster.kube
    jobs = f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs?labelSelector={ARCHIVE_SELECTOR}"
    cronjob = f"/apis/batch/v1/namespaces/{NAMESPACE}/cronjobs/{NOVA}-db-archive"
    kube.patch(f"{GROUP}/namespaces/{NAMESPACE}/novas/{NOVA}", {"spec": {"dbArchive": archive}})

    def rendered() -> bool:
        spec = kube.get(cronjob)["spec"]
        (container,) = spec["jobTemplate"]["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e.get("value") for e in container.get("env") or []}
        purge = archive.get("purgeAfterDays")
        return spec["schedule"] == archive["schedule"] and env.get("PURGE_AFTER_DAYS") == (
            None if purge is None else str(purge)
        )

    wait_for(rendered, within=60, what=f"the db-archive CronJob rendered with {archive}")
    earlier = {j["metadata"]["name"] for j in kube.get(jobs)["items"]}  # begun before: the old template
    if at_once:
        _start_from_template(kube, kube.get(cronjob))

    def succeeded() -> JSON | None:
        for job in kube.get(jobs)["items"]:
            if job["metadata"]["name"] in earlier:
                continue
            if (job.get("status") or {}).get("failed"):
                raise AssertionError(f"db-archive run {job['metadata']['name']} failed: {job['status']}")
            if (job.get("status") or {}).get("succeeded"):
                return dict(job)
        return None

    return dict(wait_for(succeeded, within=240, what="a db-archive run succeeded", handle=handle))


def _start_from_template(kube: Kube, cronjob: JSON) -> None:
    """A Job of ``cronjob``'s template, owned by it (its controller counts it as a run of its own,
    so ``Forbid`` keeps its next scheduled run from starting beside it)."""
    meta, template = cronjob["metadata"], cronjob["spec"]["jobTemplate"]
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{meta['name']}-now-{int(time.time())}",
            "namespace": meta["namespace"],
            "labels": dict((template.get("metadata") or {}).get("labels") or {}),
            "annotations": {"cronjob.kubernetes.io/instantiate": "manual"},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "CronJob",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": template["spec"],
    }
    kube.post(f"/apis/batch/v1/namespaces/{meta['namespace']}/jobs", job)


def test_a_one_minute_db_archive_moves_the_deleted_server_to_the_shadow_table(day: Day, server: str) -> None:
    day.delete()  # done by the previous test when the module runs whole
    handle = day.handle
    mariadb = handle.real.backends.mariadb

    def rows(table: str) -> int:
        return int(
            mariadb.sql(f"SELECT COUNT(*) FROM {table} WHERE uuid = '{server}'", database="nova")[0][0]
        )

    assert (rows("instances"), rows("shadow_instances")) == (1, 0)
    runs_before, durations_before = _archive_metrics(handle)
    t0 = time.monotonic()
    job = _run_after(handle, {"schedule": EVERY_MINUTE})
    day.seconds["archive run"] = time.monotonic() - t0
    owner = job["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("CronJob", f"{NOVA}-db-archive")
    assert (rows("instances"), rows("shadow_instances")) == (0, 1)

    def on_schedule() -> JSON | None:
        c = conditions(handle, "novas", NOVA).get("DBArchiveReady")
        return c if c and EVERY_MINUTE in c.get("message", "") else None

    condition = wait_for(on_schedule, within=60, what="DBArchiveReady on the new schedule")
    assert (condition["status"], condition["reason"]) == ("True", "DBArchiveScheduled"), condition
    runs, durations = wait_for(
        lambda: m if (m := _archive_metrics(handle))[0] > runs_before else None,
        within=60,
        what="the run counted in nova_operator_db_archive_total",
    )
    assert runs >= runs_before + 1
    assert durations >= durations_before + 1
    print(f"day one, scenario 6: run {job['metadata']['name']}; metrics {runs} runs; seconds {day.seconds}")


def test_a_purge_after_the_archive_empties_the_shadow_table_of_the_deleted_server(
    day: Day, server: str
) -> None:
    """Issue 38 item 7: with ``purgeAfterDays: 0`` the next run purges every archived row (a run of
    the CronJob's template started at once: the previous test saw the schedule start runs)."""
    handle = day.handle
    mariadb = handle.real.backends.mariadb

    def shadow_rows(where: str = "") -> int:
        sql = f"SELECT COUNT(*) FROM shadow_instances {where}"
        return int(mariadb.sql(sql, database="nova")[0][0])

    assert shadow_rows(f"WHERE uuid = '{server}'") == 1  # archived by the previous test
    job = _run_after(handle, {"schedule": EVERY_MINUTE, "purgeAfterDays": 0}, at_once=True)
    assert shadow_rows() == 0

    def on_purge() -> JSON | None:
        c = conditions(handle, "novas", NOVA).get("DBArchiveReady")
        return c if c and "purges shadow rows deleted more than 0 days ago" in c.get("message", "") else None

    condition = wait_for(on_purge, within=60, what="DBArchiveReady naming the purge")
    assert (condition["status"], condition["reason"]) == ("True", "DBArchiveScheduled"), condition
    print(f"day one, scenario 6: purge run {job['metadata']['name']}")
