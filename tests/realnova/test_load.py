"""The load scenario (issue 36): a real Nova's bring-up and its release upgrade with a busy process
per core beside them, at the cluster's own priority, while the operator holds its Lease.

A Nova of its own (``nova-load``, pool ``load`` on ``compute-2``) is created at 2025.2 once the hogs
run, reaches Ready with its pool, and is upgraded to 2026.1 (expand, migrate, roll, contract; the pool
follows). Throughout, a watcher reads the operator's Lease from the API server: the holder never
changes and its renewals never stop for the renew deadline. At the end the operator is the process
the tier started, its log holds no lost Lease, its ``lost`` renewal series did not move, and the test
prints the worst event-loop lag and Lease renewal latency of the scenario, from the operator's own
histograms and from the Lease's renew times.

``make test-realnova`` runs it (marker ``long``: it takes about as long as the tier's other upgrade).
"""

from __future__ import annotations

import datetime
import itertools
import os
import pathlib
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from prometheus_client.parser import text_string_to_metric_families
from simcluster import SimHandle
from simcluster.platform.controlplane import REPO

from tests.realnova.own_nova import NOVAS, OwnNova, wait_ready
from tests.realnova.realcluster import (
    NAMESPACE,
    SAMPLES,
    TierOperator,
    is_ready,
    not_ready_summary,
    operator_metrics,
    pods,
    wait_for,
)

pytestmark = [pytest.mark.realnova, pytest.mark.long]  # make test-realnova

OWN = OwnNova("nova-load", "load")
LEASE = "/apis/coordination.k8s.io/v1/namespaces/nova-system/leases/nova-operator-leader"
RENEW_DEADLINE = 10.0  # the operator's default --leader-elect-renew-deadline
LAG = "nova_operator_event_loop_lag_seconds"
RENEWAL = "nova_operator_leader_election_renewal_duration_seconds"


class Hogs:
    """One busy process per core, at this process's priority (the cluster's: every part of it is
    started by this test session and inherits it)."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Hogs:
        for _ in range(os.cpu_count() or 1):
            self.procs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()


class LeaseWatch(threading.Thread):
    """Reads the Lease twice a second: every holder seen, and every distinct renew time."""

    def __init__(self, handle: SimHandle) -> None:
        super().__init__(name="lease-watch", daemon=True)
        self.handle = handle
        self.holders: set[str] = set()
        self.transitions: set[int] = set()
        self.renewals: set[datetime.datetime] = set()
        self.errors: list[str] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                spec = self.handle.cluster.kube.get(LEASE)["spec"]
            except Exception as exc:  # the API server slow under the hogs: counted, not fatal
                self.errors.append(type(exc).__name__)
            else:
                self.holders.add(str(spec.get("holderIdentity")))
                self.transitions.add(int(spec.get("leaseTransitions") or 0))
                renewed = str(spec["renewTime"]).replace("Z", "+00:00")
                self.renewals.add(datetime.datetime.fromisoformat(renewed))
            self._halt.wait(0.5)

    def stop(self) -> None:
        self._halt.set()
        self.join(30)

    def worst_gap(self) -> float:
        """The longest time between two renewals seen (the retry period when nothing waits)."""
        times = sorted(self.renewals)
        return max(((b - a).total_seconds() for a, b in itertools.pairwise(times)), default=0.0)


def _buckets(text: str, name: str, **labels: str) -> dict[float, float]:
    """The cumulative bucket counts of histogram ``name`` (series matching ``labels``), by bound."""
    out: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != name:
            continue
        for sample in family.samples:
            if sample.name != f"{name}_bucket":
                continue
            if any(sample.labels.get(k) != v for k, v in labels.items()):
                continue
            bound = float(sample.labels["le"])
            out[bound] = out.get(bound, 0.0) + sample.value
    return out


def worst_bound(before: dict[float, float], after: dict[float, float]) -> tuple[float, float] | None:
    """The bucket ``(lower, upper]`` that holds the largest observation made between the two
    readings of a histogram, or None when nothing was observed."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    if not counts or counts[-1] == 0:
        return None
    for i, count in enumerate(counts):
        if count == counts[-1]:
            return (bounds[i - 1] if i else 0.0, bounds[i])
    raise AssertionError("a cumulative histogram ends on its largest count")


@dataclass
class Run:
    seconds: dict[str, float] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)


@pytest.fixture(scope="module")
def loaded(cluster: SimHandle) -> Iterator[tuple[SimHandle, Run]]:
    # the samples' shared Secrets (service user, metadata proxy) and the backing services' objects,
    # as the minimal sample finds them; its own Nova and pool are not needed here
    cluster.apply(
        SAMPLES / "secrets.yaml",
        REPO / "tools" / "simcluster" / "samples" / "dependencies.yaml",
        namespace=NAMESPACE,
    )
    OWN.provision(cluster)
    try:
        yield cluster, Run()
    finally:
        OWN.tear_down(cluster)


def test_a_bring_up_and_an_upgrade_beside_a_busy_process_per_core_keep_the_lease(
    loaded: tuple[SimHandle, Run], tmp_path: pathlib.Path
) -> None:
    handle, run = loaded
    operator = TierOperator(handle)
    assert operator.alive, "the tier's operator is not running"
    wait_for(lambda: handle.cluster.kube.get(LEASE), within=60, what="the operator's Lease", handle=handle)
    first = operator_metrics(handle)
    watch = LeaseWatch(handle)
    watch.start()
    try:
        with Hogs():
            t0 = time.monotonic()
            OWN.create(handle, "2025.2", tmp_path)
            wait_ready(handle, "novas", OWN.name, 600, "the loaded Nova Ready at 2025.2")
            run.seconds["Nova Ready"] = time.monotonic() - t0
            wait_ready(handle, "novacomputes", OWN.pool, 300, "the loaded pool Ready")
            run.seconds["pool Ready"] = time.monotonic() - t0

            t1 = time.monotonic()
            OWN.patch_release(handle, "2026.1")

            def upgraded() -> bool:
                status = handle.cluster.kube.get(f"{NOVAS}/{OWN.name}").get("status") or {}
                phase = status.get("upgradePhase") or ""
                if phase:
                    run.phases.setdefault(str(phase), round(time.monotonic() - t1))
                done = status.get("installedRelease") == "2026.1" and not phase
                return done and is_ready(handle, "novas", OWN.name)

            wait_for(
                upgraded,
                within=1500,
                what="the loaded upgrade 2025.2 -> 2026.1 complete",
                handle=handle,
                detail=lambda: not_ready_summary(handle, "novas", OWN.name),
            )
            run.seconds["upgraded"] = time.monotonic() - t1

            def pool_followed() -> bool:
                now = pods(handle, selector=f"app.kubernetes.io/instance={OWN.pool}")
                images = {c["image"] for p in now for c in p["spec"]["containers"]}
                on_2026_1 = images == {"ghcr.io/c5c3/nova-compute:2026.1"}
                return on_2026_1 and is_ready(handle, "novacomputes", OWN.pool)

            wait_for(pool_followed, within=400, what="the loaded pool on 2026.1 and Ready", handle=handle)
            run.seconds["pool upgraded"] = time.monotonic() - t1
    finally:
        watch.stop()
    last = operator_metrics(handle)

    lag = worst_bound(_buckets(first, LAG), _buckets(last, LAG))
    renewed = worst_bound(
        _buckets(first, RENEWAL, result="renewed"), _buckets(last, RENEWAL, result="renewed")
    )
    lost = _buckets(last, RENEWAL, result="lost")
    print(
        f"load: seconds { ({k: round(v, 1) for k, v in run.seconds.items()}) }; phases at {run.phases}; "
        f"worst event-loop lag in {lag} s; worst renewal in {renewed} s (operator's histograms); "
        f"longest gap between renewals {watch.worst_gap():.2f} s over {len(watch.renewals)} renewals "
        f"(the Lease); Lease reads failed {len(watch.errors)}"
    )

    assert list(run.phases) == ["Expanding", "Migrating", "RollingUpdate", "Contracting"], run.phases
    assert set(OWN.images(handle).values()) == {"ghcr.io/c5c3/nova:2026.1"}
    # the operator held its Lease throughout: the same process, one holder, no transition, no loss
    assert operator.alive, operator.log_text()[-3000:]
    assert len(watch.holders) == 1, watch.holders
    assert len(watch.transitions) == 1, watch.transitions
    assert watch.worst_gap() < RENEW_DEADLINE, watch.worst_gap()
    assert max(lost.values(), default=0.0) == 0.0, lost
    assert "lost the lease" not in operator.log_text()
    # both histograms observed the scenario
    assert renewed is not None
    assert lag is not None
