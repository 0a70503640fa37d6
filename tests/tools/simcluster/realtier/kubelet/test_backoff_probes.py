"""The kubelet stand-in's restart back-off and probe state machine."""

from __future__ import annotations

from simcluster.realtier.kubelet.backoff import BackOff
from simcluster.realtier.kubelet.probestate import ProbeState, Result, Timing


def test_first_restart_is_immediate_then_doubles_to_the_cap() -> None:
    b = BackOff()
    assert b.remaining("c", finished_at=0.0, now=0.0) == 0.0
    delays = []
    now = 0.0
    for _ in range(8):
        delays.append(b.next("c", now))
        now += 1
    assert delays == [10, 20, 40, 80, 160, 300, 300, 300]
    assert b.remaining("c", finished_at=now, now=now + 100) == 200


def test_back_off_resets_after_ten_quiet_minutes() -> None:
    b = BackOff()
    b.next("c", 0.0)
    b.next("c", 1.0)
    assert b.delay("c", 2.0) == 20
    assert b.remaining("c", finished_at=602.0, now=602.0) == 0.0  # 601 s since the last restart
    assert b.next("c", 602.0) == 10


def timing(success: int = 1, failure: int = 3, delay: float = 0) -> Timing:
    return Timing(
        initial_delay=delay, period=1, timeout=1, success_threshold=success, failure_threshold=failure
    )


def test_initial_results() -> None:
    assert ProbeState("readiness", timing()).result == Result.FAILURE
    assert ProbeState("liveness", timing()).result == Result.SUCCESS
    assert ProbeState("startup", timing()).result == Result.UNKNOWN


def test_readiness_flips_only_after_the_thresholds() -> None:
    p = ProbeState("readiness", timing(success=2, failure=3))
    assert not p.record(Result.SUCCESS)
    assert p.record(Result.SUCCESS)
    assert p.result == Result.SUCCESS
    assert not p.record(Result.FAILURE)
    assert not p.record(Result.FAILURE)
    assert not p.record(Result.SUCCESS)  # the run of failures is broken
    assert not p.record(Result.FAILURE)
    assert not p.record(Result.FAILURE)
    assert p.record(Result.FAILURE)
    assert p.result == Result.FAILURE
    assert not p.on_hold  # readiness never holds


def test_liveness_failure_holds_until_restart() -> None:
    p = ProbeState("liveness", timing(failure=2))
    assert p.due(0)
    p.record(Result.FAILURE)
    assert p.record(Result.FAILURE)
    assert p.on_hold
    assert not p.due(100)
    p.restarted()
    assert p.result == Result.SUCCESS
    assert p.due(0)


def test_initial_delay() -> None:
    p = ProbeState("readiness", timing(delay=5))
    assert not p.due(4.9)
    assert p.due(5)


def test_defaults_of_the_api() -> None:
    t = Timing.of({})
    assert (t.initial_delay, t.period, t.timeout, t.success_threshold, t.failure_threshold) == (
        0,
        10,
        1,
        1,
        3,
    )
