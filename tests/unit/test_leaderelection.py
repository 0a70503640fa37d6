"""The Lease algorithm against an in-memory API: acquire, respect a live holder, expiry, release."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import http.server
import json
import threading
import time
from typing import Any, cast

import pytest
import structlog
from kubernetes_asyncio import client as k8s_client

from nova_operator.clock import Clock, FakeClock, LoopClock
from nova_operator.kube import Kube
from nova_operator.kube.config import api_client
from nova_operator.kube.errors import Conflict, KubeError, NotFound
from nova_operator.kube.resources import LEASES, ResourceRef
from nova_operator.metrics import Metrics
from nova_operator.runtime import Request, Result
from nova_operator.runtime.leaderelection import LeaderElectionLost, LeaderElector
from nova_operator.runtime.manager import Manager
from nova_operator.settings import LeaderElectionSettings, ServerSettings, Settings


class LeaseAPI:
    """One namespace of Leases with resourceVersion preconditions, as the API server enforces them."""

    def __init__(self) -> None:
        self.leases: dict[str, dict[str, Any]] = {}
        self.rv = 0
        self.fail_next: Exception | None = None

    def _bump(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        return copy.deepcopy(obj)

    async def get(self, ref: ResourceRef, name: str, namespace: str | None = None) -> dict[str, Any]:
        if self.fail_next is not None:
            exc, self.fail_next = self.fail_next, None
            raise exc
        if name not in self.leases:
            raise NotFound(name)
        return copy.deepcopy(self.leases[name])

    async def create(
        self, ref: ResourceRef, body: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        name = body["metadata"]["name"]
        if name in self.leases:
            raise Conflict("exists")
        self.leases[name] = copy.deepcopy(body)
        return self._bump(self.leases[name])

    async def replace(
        self, ref: ResourceRef, body: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        name = body["metadata"]["name"]
        if self.leases[name]["metadata"]["resourceVersion"] != body["metadata"]["resourceVersion"]:
            raise Conflict("stale")
        self.leases[name] = copy.deepcopy(body)
        return self._bump(self.leases[name])

    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.leases["lease"]["spec"]
        return spec


def elector(api: LeaseAPI, identity: str, clock: Clock, metrics: Metrics | None = None) -> LeaderElector:
    settings = LeaderElectionSettings(
        namespace="ns", name="lease", identity=identity, lease_duration=15, renew_deadline=10, retry_period=2
    )
    return LeaderElector(cast(Kube, api), settings, metrics=metrics, clock=clock)


async def test_the_first_candidate_creates_the_lease_and_holds_it() -> None:
    api, clock = LeaseAPI(), FakeClock()
    a = elector(api, "a", clock)
    assert await a.try_acquire_or_renew()
    spec = api.spec()
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"], spec["leaseTransitions"]) == ("a", 15, 0)
    renewed_at = spec["renewTime"]
    await asyncio.sleep(0.001)
    assert await a.try_acquire_or_renew()  # renewal
    assert api.spec()["holderIdentity"] == "a"
    assert api.spec()["renewTime"] >= renewed_at


async def test_a_live_holder_is_respected_until_its_record_stops_changing_for_a_lease_duration() -> None:
    api, clock = LeaseAPI(), FakeClock()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    clock.advance(14)
    assert await a.try_acquire_or_renew()  # a renews: the record changes, b's expiry restarts
    clock.advance(14)
    assert not await b.try_acquire_or_renew()
    clock.advance(15.1)  # a is silent for longer than the lease duration, on b's own clock
    assert await b.try_acquire_or_renew()
    assert (api.spec()["holderIdentity"], api.spec()["leaseTransitions"]) == ("b", 1)
    assert not await a.try_acquire_or_renew()  # a sees b's fresh record


async def test_a_conflicting_write_loses_the_race() -> None:
    api, clock = LeaseAPI(), FakeClock()
    a = elector(api, "a", clock)
    assert await a.try_acquire_or_renew()
    original_replace = api.replace

    async def someone_else_first(ref: ResourceRef, body: dict[str, Any], namespace: str | None = None) -> Any:
        api.leases["lease"]["metadata"]["resourceVersion"] = "999"
        return await original_replace(ref, body, namespace)

    api.replace = someone_else_first  # type: ignore[method-assign]
    assert not await a.try_acquire_or_renew()


async def test_run_leads_then_releases_so_a_successor_need_not_wait() -> None:
    api, clock = LeaseAPI(), FakeClock()
    metrics = Metrics()
    a = elector(api, "a", clock, metrics)
    seen: list[bool] = []

    async def lead() -> None:
        seen.append(a.is_leader)
        assert (
            metrics.registry.get_sample_value(
                "nova_operator_leader_election_master_status", {"name": "lease"}
            )
            == 1
        )

    await a.run(lead)
    assert seen == [True]
    assert not a.is_leader
    assert api.spec()["holderIdentity"] is None
    assert api.spec()["leaseDurationSeconds"] == 1
    b = elector(api, "b", clock)
    assert await b.try_acquire_or_renew()  # no expiry wait after a release


async def test_renewals_failing_past_the_deadline_lose_the_lease_and_cancel_lead() -> None:
    api = LeaseAPI()
    settings = LeaderElectionSettings(
        namespace="ns", name="lease", identity="a", lease_duration=0.5, renew_deadline=0.2, retry_period=0.01
    )
    a = LeaderElector(cast(Kube, api), settings)
    cancelled = asyncio.Event()

    async def lead() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def steal() -> None:
        await asyncio.sleep(0.02)
        api.leases["lease"]["spec"]["holderIdentity"] = "intruder"
        api.leases["lease"]["metadata"]["resourceVersion"] = "x"

    thief = asyncio.create_task(steal())
    with pytest.raises(LeaderElectionLost):
        await asyncio.wait_for(a.run(lead), 5)
    await thief
    assert cancelled.is_set()
    assert api.spec()["holderIdentity"] == "intruder"  # a lost lease is not "released"


def test_renew_deadline_must_be_shorter_than_the_lease() -> None:
    with pytest.raises(ValueError, match="renew deadline"):
        LeaderElector(cast(Kube, LeaseAPI()), LeaderElectionSettings(lease_duration=10, renew_deadline=10))


def test_the_lease_resource_is_coordination_v1() -> None:
    assert (LEASES.group, LEASES.version, LEASES.plural) == ("coordination.k8s.io", "v1", "leases")


class ManagedLeaseAPI(LeaseAPI):
    """The Lease API plus what a ``Manager`` reads of its ``Kube``."""

    def __init__(self) -> None:
        super().__init__()
        self.metrics = Metrics()


def manager_settings(identity: str, drain_timeout: float) -> Settings:
    return Settings(
        leader_election=LeaderElectionSettings(
            namespace="ns",
            name="lease",
            identity=identity,
            lease_duration=15,
            renew_deadline=10,
            retry_period=2,
        ),
        servers=ServerSettings(metrics_bind_address="0", health_probe_bind_address="0"),
        shutdown_timeout=drain_timeout,
    )


async def test_on_stop_the_lease_is_released_after_the_drain_timeout_not_later() -> None:
    api = ManagedLeaseAPI()
    started = asyncio.Event()

    class Stuck:
        async def reconcile(self, request: Request) -> Result:
            started.set()
            await asyncio.sleep(3600)
            return Result()

    manager = Manager(cast(Kube, api), manager_settings("a", drain_timeout=0.3))
    manager.controller("stuck", Stuck()).enqueue(Request("ns", "x"))
    task = asyncio.create_task(manager.run())
    await asyncio.wait_for(started.wait(), 2)
    assert api.spec()["holderIdentity"] == "a"
    stopped = time.monotonic()
    manager.stop()
    while api.spec()["holderIdentity"] is not None:
        await asyncio.sleep(0.01)
        assert time.monotonic() - stopped < 1.5
    released_after = time.monotonic() - stopped
    assert 0.3 <= released_after < 1.0  # the drain timeout, then cancel and release at once
    await asyncio.wait_for(task, 2)


async def test_on_stop_the_lease_is_released_as_soon_as_the_workers_finish() -> None:
    api = ManagedLeaseAPI()
    started = asyncio.Event()

    class Quick:
        async def reconcile(self, request: Request) -> Result:
            started.set()
            await asyncio.sleep(0.05)
            return Result()

    manager = Manager(cast(Kube, api), manager_settings("a", drain_timeout=10))
    manager.controller("quick", Quick()).enqueue(Request("ns", "x"))
    task = asyncio.create_task(manager.run())
    await asyncio.wait_for(started.wait(), 2)
    stopped = time.monotonic()
    manager.stop()
    await asyncio.wait_for(task, 2)
    assert api.spec()["holderIdentity"] is None
    assert time.monotonic() - stopped < 0.5  # not the 10 s drain timeout


async def test_a_standby_takes_a_released_lease_within_a_second_and_stops_trying_at_once() -> None:
    api = ManagedLeaseAPI()
    leader = elector(api, "a", LoopClock())
    assert await leader.try_acquire_or_renew()
    standby = Manager(cast(Kube, api), manager_settings("b", drain_timeout=1))
    task = asyncio.create_task(standby.run())
    await asyncio.sleep(2.5)
    assert api.spec()["holderIdentity"] == "a"  # a live holder is respected
    await leader._release()
    released = time.monotonic()
    while api.spec()["holderIdentity"] != "b":
        await asyncio.sleep(0.01)
        assert time.monotonic() - released < 2
    assert time.monotonic() - released <= 1.3  # polls every 0.8-1.2 s: well within the 2 s asked
    standby.stop()
    await asyncio.wait_for(task, 2)

    waiting = Manager(cast(Kube, api), manager_settings("c", drain_timeout=10))
    api.leases["lease"]["spec"]["holderIdentity"] = "someone"  # held: c can only wait for it
    api.leases["lease"]["metadata"]["resourceVersion"] = "y"
    task = asyncio.create_task(waiting.run())
    await asyncio.sleep(0.1)
    stopped = time.monotonic()
    waiting.stop()
    await asyncio.wait_for(task, 1)
    assert time.monotonic() - stopped < 0.2


# -- renewal: retried every retry period until the renew deadline, each attempt bounded ------------


class ScriptedLeaseAPI(LeaseAPI):
    """``steps`` scripts the next requests (GET or PUT, in the order they are sent): an exception
    to raise, or "hang" (never answered until cancelled). Every request is recorded as (started at,
    verb, how it ended, ended at) on the fake clock."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock
        self.steps: list[Exception | str] = []
        self.log: list[tuple[float, str, str, float]] = []

    async def _scripted(self, verb: str) -> float:
        started = self.clock.now()
        step = self.steps.pop(0) if self.steps else "ok"
        try:
            if step == "hang":
                await asyncio.Event().wait()
            if isinstance(step, Exception):
                raise step
        except asyncio.CancelledError:
            self.log.append((started, verb, "abandoned", self.clock.now()))
            raise
        except KubeError:
            self.log.append((started, verb, "error", self.clock.now()))
            raise
        return started

    async def get(self, ref: ResourceRef, name: str, namespace: str | None = None) -> dict[str, Any]:
        started = await self._scripted("get")
        self.log.append((started, "get", "ok", self.clock.now()))
        return await super().get(ref, name, namespace)

    async def replace(
        self, ref: ResourceRef, body: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        started = await self._scripted("put")
        try:
            done = await super().replace(ref, body, namespace)
        except Conflict:
            self.log.append((started, "put", "conflict", self.clock.now()))
            raise
        self.log.append((started, "put", "ok", self.clock.now()))
        return done


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def drive(clock: FakeClock, seconds: float, step: float = 0.25) -> None:
    """Move the fake clock ``seconds`` ahead in small steps, letting the loop run after each."""
    for _ in range(round(seconds / step)):
        clock.advance(step)
        await settle()


class Leading:
    """A leader elected on a fake clock, its ``lead()`` waiting until cancelled."""

    def __init__(self) -> None:
        self.clock = FakeClock(start=0.0)
        self.api = ScriptedLeaseAPI(self.clock)
        self.metrics = Metrics()
        self.elector = elector(self.api, "a", self.clock, self.metrics)
        self.cancelled = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def lead(self) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise

    async def start(self) -> None:
        self.task = asyncio.create_task(self.elector.run(self.lead))
        await settle()
        assert self.elector.is_leader
        self.api.log.clear()  # the acquisition's requests

    def renewals(self, result: str) -> tuple[float, float]:
        """(count, sum of seconds) of the renewal histogram for ``result``."""
        labels = {"name": "lease", "result": result}
        sample = self.metrics.registry.get_sample_value
        count = sample("nova_operator_leader_election_renewal_duration_seconds_count", labels) or 0.0
        total = sample("nova_operator_leader_election_renewal_duration_seconds_sum", labels) or 0.0
        return count, total

    async def stop(self) -> None:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


async def test_a_renewal_is_one_put_of_the_lease_the_last_write_returned() -> None:
    """client-go's fast path: while it leads, no GET: one request per renewal on a slow server."""
    s = Leading()
    await s.start()
    await drive(s.clock, 6.0)  # due at t=2, 4 and 6
    assert s.api.log == [(2.0, "put", "ok", 2.0), (4.0, "put", "ok", 4.0), (6.0, "put", "ok", 6.0)]
    assert s.api.spec()["holderIdentity"] == "a"
    assert s.renewals("renewed")[0] == 3.0
    await s.stop()


async def test_a_lease_changed_by_another_writer_is_read_and_renewed_in_the_same_attempt() -> None:
    s = Leading()
    await s.start()
    s.api.leases["lease"]["metadata"]["labels"] = {"touched": "yes"}
    s.api._bump(s.api.leases["lease"])  # another writer's update: our held version is stale
    await drive(s.clock, 2.0)
    # the PUT on the stale version is refused (409), then a GET and a PUT on what it read
    answers = [(verb, how) for _, verb, how, _ in s.api.log]
    assert answers == [("put", "conflict"), ("get", "ok"), ("put", "ok")]
    assert s.elector.is_leader
    assert s.api.leases["lease"]["metadata"]["labels"] == {"touched": "yes"}  # kept, not overwritten
    assert s.renewals("renewed") == (1.0, 0.0)
    await drive(s.clock, 2.0)
    assert s.api.log[3:] == [(4.0, "put", "ok", 4.0)]  # back on the fast path
    await s.stop()


async def test_a_refused_fast_renewal_falls_back_to_a_read_in_the_same_attempt() -> None:
    s = Leading()
    await s.start()
    s.api.steps = [KubeError("etcd request timed out", status=500)]
    await drive(s.clock, 2.0)
    assert s.api.log == [(2.0, "put", "error", 2.0), (2.0, "get", "ok", 2.0), (2.0, "put", "ok", 2.0)]
    assert s.elector.is_leader
    assert s.renewals("renewed") == (1.0, 0.0)
    await s.stop()


async def test_a_renewal_that_fails_once_is_retried_a_retry_period_later_and_the_lease_is_kept() -> None:
    s = Leading()
    await s.start()
    s.api.steps = [KubeError("etcd request timed out", status=500) for _ in range(2)]
    with structlog.testing.capture_logs() as logs:
        await drive(s.clock, 2.0)  # due at t=2: the PUT and the read after it are refused
        assert s.api.log == [(2.0, "put", "error", 2.0), (2.0, "get", "error", 2.0)]
        await drive(s.clock, 2.0)  # one retry period later, the second attempt renews
    assert s.api.log[2:] == [(4.0, "get", "ok", 4.0), (4.0, "put", "ok", 4.0)]
    assert s.elector.is_leader
    assert not s.cancelled.is_set()
    assert s.renewals("renewed") == (1.0, 2.0)  # renewed 2 s after it was due
    assert s.renewals("lost") == (0.0, 0.0)
    failed = [e for e in logs if e["event"] == "lease renewal failed"]
    assert len(failed) == 1
    assert failed[0]["phase"] == "API error 500"
    assert failed[0]["attempt"] == 1
    await s.stop()


async def test_renewals_failing_past_the_deadline_lose_the_lease_after_one_attempt_per_retry_period() -> None:
    s = Leading()
    await s.start()
    s.api.steps = [KubeError("unavailable", status=503) for _ in range(20)]
    await drive(s.clock, 11.75)  # due at t=2, the deadline at t=12
    assert not s.cancelled.is_set()
    await drive(s.clock, 0.5)
    assert s.task is not None
    assert s.task.done()
    with pytest.raises(LeaderElectionLost):
        s.task.result()
    assert s.cancelled.is_set()
    # one attempt per retry period: the first a PUT and its fallback read, then reads alone
    assert [started for started, verb, _, _ in s.api.log if verb == "get"] == [2.0, 4.0, 6.0, 8.0, 10.0]
    assert [started for started, verb, _, _ in s.api.log if verb == "put"] == [2.0]
    assert s.renewals("lost") == (1.0, 10.0)
    assert not s.elector.is_leader


async def test_a_hung_request_is_abandoned_and_the_next_attempt_keeps_the_lease() -> None:
    s = Leading()
    await s.start()
    s.api.steps = ["hang"]
    await drive(s.clock, 8.0)  # due at t=2; the attempt's own timeout is half the renew deadline
    assert s.api.log == [(2.0, "put", "abandoned", 7.0), (7.0, "put", "ok", 7.0)]
    assert s.elector.is_leader
    assert not s.cancelled.is_set()
    assert s.renewals("renewed") == (1.0, 5.0)
    await s.stop()


async def test_a_hung_request_is_abandoned_at_the_remaining_deadline_and_the_lease_is_lost() -> None:
    s = Leading()
    await s.start()
    s.api.steps = [KubeError("refused", status=500), KubeError("refused", status=500), "hang", "hang"]
    with structlog.testing.capture_logs() as logs:
        await drive(s.clock, 12.5)
    # due at t=2, deadline t=12: refused at 2; retried at 4, abandoned at 9 (its 5 s);
    # retried at once, and that one abandoned at 12, when the deadline had 3 s left for it
    assert s.api.log == [
        (2.0, "put", "error", 2.0),
        (2.0, "get", "error", 2.0),
        (4.0, "get", "abandoned", 9.0),
        (9.0, "get", "abandoned", 12.0),
    ]
    assert s.task is not None
    assert s.task.done()
    with pytest.raises(LeaderElectionLost):
        s.task.result()
    assert s.cancelled.is_set()
    phases = [e["phase"] for e in logs if e["event"] == "lease renewal failed"]
    assert phases[0].startswith("API error 500")
    assert phases[1].startswith("no answer within 5 s")
    assert phases[2].startswith("no answer within 3 s")
    latencies = [e["latency"] for e in logs if e["event"] == "lease renewal failed"]
    assert latencies == [0.0, 5.0, 3.0]
    assert any(e["event"] == "lost the lease: no renewal within the deadline" for e in logs)


# -- the Lease on a loop of its own ------------------------------------------------------------------


class LeaseServer(http.server.ThreadingHTTPServer):
    """One Lease over HTTP on a thread of its own (it answers while the test's event loop is held);
    ``writes`` holds the monotonic time of every create and update."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), LeaseHandler)
        self.lease: dict[str, Any] | None = None
        self.rv = 0
        self.writes: list[float] = []
        self.lock = threading.Lock()
        threading.Thread(target=self.serve_forever, daemon=True).start()


class LeaseHandler(http.server.BaseHTTPRequestHandler):
    server: LeaseServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        with self.server.lock:
            lease = self.server.lease
        if lease is None:
            self._answer(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
        else:
            self._answer(200, lease)

    def _write(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            current = self.server.lease
            if (
                current is not None
                and body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]
            ):
                self._answer(409, {"kind": "Status", "code": 409, "reason": "Conflict"})
                return
            self.server.rv += 1
            body["metadata"]["resourceVersion"] = str(self.server.rv)
            self.server.lease = body
            self.server.writes.append(time.monotonic())
        self._answer(200, body)

    do_POST = _write
    do_PUT = _write


async def test_the_lease_is_renewed_while_the_operators_event_loop_is_held() -> None:
    """The renew loop runs on a loop and thread of its own: a caller's loop held for longer than
    the renew deadline (a large List decoded, a busy machine) does not stop the renewals."""
    server = LeaseServer()
    cfg = k8s_client.Configuration()
    cfg.host = f"http://127.0.0.1:{server.server_address[1]}"
    kube = Kube(api_client(cfg), metrics=Metrics())
    settings = LeaderElectionSettings(
        namespace="ns", name="lease", identity="a", lease_duration=6, renew_deadline=4, retry_period=0.5
    )
    a = LeaderElector(kube, settings, own_connections=True)
    leading = asyncio.Event()
    held: list[float] = []

    async def lead() -> None:
        leading.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(a.run(lead))
    try:
        await asyncio.wait_for(leading.wait(), 10)
        start = time.monotonic()
        time.sleep(6)  # noqa: ASYNC251 - the caller's loop held for longer than the renew deadline
        held = [start, time.monotonic()]
        await asyncio.sleep(0.5)
        assert not task.done()  # not lost
        assert a.is_leader
        during = [t for t in server.writes if held[0] < t < held[1]]
        assert len(during) >= 2  # renewed while the loop was held
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await kube.close()
        server.shutdown()
    assert server.lease is not None
    assert server.lease["spec"]["holderIdentity"] is None  # released on cancel, from its own loop
    assert a._kube is kube  # its own connections closed with its thread; a next run makes new ones


async def test_an_attempt_whose_timeout_ran_late_names_the_event_loop_as_its_phase() -> None:
    s = Leading()
    await s.start()
    s.api.steps = ["hang"]
    with structlog.testing.capture_logs() as logs:
        await drive(s.clock, 2.0)  # due at t=2: the attempt hangs, its timeout due at t=7
        s.clock.advance(5.0 + 3.0)  # the loop runs again 3 s after that timeout was due
        await settle()
    failed = [e for e in logs if e["event"] == "lease renewal failed"]
    assert len(failed) == 1
    assert failed[0]["phase"].startswith("waiting for the event loop (held 3 s")
    assert failed[0]["latency"] == 8.0
    await s.stop()
