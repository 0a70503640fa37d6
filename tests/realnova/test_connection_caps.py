"""Connection caps on the real Nova (issue 25, scenario 5), on the minimal sample (3 API replicas).

200 concurrent API calls (server lists and flavor shows, all started together) while servers build
(the scheduler and the conductor at work) get no error, and no pod logs MariaDB's
``ER_TOO_MANY_USER_CONNECTIONS`` (1203): the ``User``'s ``maxUserConnections`` the operator renders
is what the rendered pools can open (``docs/operations.md``, "Database connections"). A sampler
counts each user's connections on the real server all along; their peaks stay within the caps.
"""

from __future__ import annotations

import concurrent.futures
import os
import pathlib
import re
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator

import pytest
from simcluster import SimHandle
from simcluster.realtier.services.mariadb import MariaDBServer

from nova_operator.models.nova import Nova
from nova_operator.renderers.mariadb import max_user_connections
from tests.realnova.cloud import request, upload_image
from tests.realnova.realcluster import GROUP, NAMESPACE, NOVA, OpenStackClient, compute_url, wait_for
from tests.realnova.rollouts import live_pods

pytestmark = pytest.mark.realnova

BURST = 200
BUILDS = 4
FLAVOR = {"name": "caps.tiny", "ram": 64, "vcpus": 1, "disk": 1}
USERS = {"api": "nova-api", "cell": "nova"}  # the MariaDB accounts of the minimal Nova's two blocks
TOO_MANY = re.compile(rb"\b1203\b|max_user_connections")


class Sampler(threading.Thread):
    """Each user's connections on the server (``PROCESSLIST``), every 0.2 s; the peaks."""

    def __init__(self, mariadb: MariaDBServer) -> None:
        super().__init__(daemon=True)
        self.mariadb = mariadb
        self.peaks: Counter[str] = Counter()
        self.samples = 0
        self.stop = threading.Event()

    def run(self) -> None:
        users = ", ".join(f"'{u}'" for u in USERS.values())
        while not self.stop.is_set():
            rows = self.mariadb.sql(
                "SELECT USER, COUNT(*) FROM information_schema.PROCESSLIST "
                f"WHERE USER IN ({users}) GROUP BY USER"
            )
            for user, count in rows:
                self.peaks[user] = max(self.peaks[user], int(count))
            self.samples += 1
            self.stop.wait(0.2)


def _call(url: str, token: str) -> int:
    req = urllib.request.Request(
        url, headers={"X-Auth-Token": token, "OpenStack-API-Version": "compute 2.95"}
    )
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            resp.read()
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError as exc:
        return -1 if "timed out" not in str(exc) else -2


def _log_sizes(root: pathlib.Path) -> dict[pathlib.Path, int]:
    return {p: p.stat().st_size for p in root.rglob("containers/*/*.log")}


def _errors_logged(root: pathlib.Path, since: dict[pathlib.Path, int], last: int = 5) -> dict[str, list[str]]:
    """The last ``last`` ERROR lines each container logged after ``since``: what a failed build says."""
    found: dict[str, list[str]] = {}
    for path in root.rglob("containers/*/*.log"):
        with path.open("rb") as f:
            f.seek(since.get(path, 0))
            lines = [line.decode(errors="replace").rstrip() for line in f if b" ERROR " in line]
        if lines:
            found[path.parent.name] = [line[:600] for line in lines[-last:]]
    return found


def _refusals_logged(root: pathlib.Path, since: dict[pathlib.Path, int]) -> dict[str, int]:
    """Lines naming error 1203 that the pods logged after ``since`` (offsets by file), by container."""
    found: Counter[str] = Counter()
    for path in root.rglob("containers/*/*.log"):
        with path.open("rb") as f:
            f.seek(since.get(path, 0))
            found[path.parent.name] += sum(1 for line in f if TOO_MANY.search(line))
    return {k: v for k, v in found.items() if v}


@pytest.fixture(scope="module")
def cloud(minimal: SimHandle) -> Iterator[tuple[OpenStackClient, str, str]]:
    assert minimal.real is not None
    client = OpenStackClient(minimal, compute_url(minimal, NOVA))
    osv = minimal.real.openstack
    image = upload_image(osv.glance_url, client.token(), "caps", os.urandom(64 * 1024))
    flavor = client.call("POST", "/flavors", {"flavor": FLAVOR})["flavor"]["id"]
    try:
        yield client, image, flavor
    finally:
        client.call("DELETE", f"/flavors/{flavor}")
        request("DELETE", f"{osv.glance_url}/v2/images/{image}", headers={"X-Auth-Token": client.token()})


def test_a_burst_of_200_api_calls_while_servers_build_stays_within_the_connection_caps(
    minimal: SimHandle, cloud: tuple[OpenStackClient, str, str]
) -> None:
    client, image, flavor = cloud
    handle = minimal
    assert handle.real is not None
    mariadb = handle.real.backends.mariadb
    nova = Nova.model_validate(handle.cluster.kube.get(f"{GROUP}/namespaces/{NAMESPACE}/novas/{NOVA}"))
    assert len(live_pods(handle, "api")) == 3
    caps = {user: max_user_connections(nova, block) for block, user in USERS.items()}  # type: ignore[arg-type]
    assert {user: mariadb.max_user_connections(user) for user in USERS.values()} == caps
    idle = {user: mariadb.connections_of(user) for user in USERS.values()}

    sampler = Sampler(mariadb)
    sampler.start()
    logs = _log_sizes(handle.workdir)
    token = client.token()
    base = f"{client.compute}/v2.1"
    urls = [f"{base}/servers/detail" if i % 2 == 0 else f"{base}/flavors/{flavor}" for i in range(BURST)]
    servers: list[str] = []
    statuses: Counter[int] = Counter()
    t0 = time.monotonic()
    try:
        for i in range(BUILDS):  # the scheduler and the conductor at work during the burst
            body = {
                "server": {"name": f"caps-{i}", "imageRef": image, "flavorRef": flavor, "networks": "none"}
            }
            servers.append(client.call("POST", "/servers", body, microversion="2.37")["server"]["id"])
        start = threading.Barrier(BURST)

        def one(url: str) -> int:
            start.wait()
            return _call(url, token)

        with concurrent.futures.ThreadPoolExecutor(max_workers=BURST) as pool:
            statuses.update(pool.map(one, urls))
        burst_seconds = time.monotonic() - t0

        def built() -> dict[str, str] | None:
            states = {s: client.call("GET", f"/servers/{s}")["server"]["status"] for s in servers}
            return states if all(v in ("ACTIVE", "ERROR") for v in states.values()) else None

        states = wait_for(built, within=240, what="the servers built", handle=handle)
        faults = {s: client.fault(s) for s, state in states.items() if state == "ERROR"}
        errors = _errors_logged(handle.workdir, logs) if faults else {}
    finally:
        sampler.stop.set()
        sampler.join()
        for sid in servers:
            client.call("DELETE", f"/servers/{sid}")
    refusals = _refusals_logged(handle.workdir, logs)
    print(
        f"connection caps: burst {BURST} calls in {burst_seconds:.1f} s, statuses {dict(statuses)}; servers "
        f"{states}; idle {idle}, peaks {dict(sampler.peaks)} ({sampler.samples} samples), caps {caps}; "
        f"1203 logged {refusals}"
    )
    assert statuses == Counter({200: BURST})
    assert set(states.values()) == {"ACTIVE"}, (faults, errors)
    assert refusals == {}
    for user, cap in caps.items():
        assert 0 < sampler.peaks[user] <= cap, (user, sampler.peaks[user], cap)

    def deleted() -> bool | None:
        left = [s for s in servers if _call(f"{base}/servers/{s}", token) != 404]
        return not left or None

    wait_for(deleted, within=180, what="the burst's servers deleted", handle=handle)
