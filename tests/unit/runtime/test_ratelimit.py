"""Rate limiters: per-key exponential backoff, the global token bucket, and their max."""

from __future__ import annotations

import pytest

from nova_operator.clock import FakeClock
from nova_operator.runtime.ratelimit import ItemExponential, MaxOf, TokenBucket, default_rate_limiter


def test_item_backoff_doubles_from_5ms_and_caps_at_30s() -> None:
    limiter = ItemExponential()
    delays = [limiter.when("a") for _ in range(16)]
    assert delays[:5] == pytest.approx([0.005, 0.01, 0.02, 0.04, 0.08])
    assert delays[12] == pytest.approx(0.005 * 2**12)  # 20.48 s: still below the cap
    assert delays[13:] == [30.0, 30.0, 30.0]
    assert limiter.num_requeues("a") == 16


def test_item_backoff_is_per_key_and_forget_resets_it() -> None:
    limiter = ItemExponential()
    limiter.when("a")
    limiter.when("a")
    assert limiter.when("b") == pytest.approx(0.005)
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == pytest.approx(0.005)


def test_item_backoff_never_overflows_after_many_failures() -> None:
    limiter = ItemExponential()
    for _ in range(2000):
        delay = limiter.when("a")
    assert delay == 30.0


def test_token_bucket_allows_a_burst_of_100_then_10_per_second() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10, 100, clock=clock)
    assert [bucket.when(i) for i in range(100)] == [0.0] * 100
    # The bucket is empty: each further reservation is 0.1 s later than the previous one.
    assert [bucket.when(i) for i in range(3)] == pytest.approx([0.1, 0.2, 0.3])


def test_token_bucket_refills_with_time_but_not_beyond_the_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10, 100, clock=clock)
    for i in range(100):
        bucket.when(i)
    clock.advance(0.5)  # five tokens back
    assert [bucket.when(i) for i in range(5)] == [0.0] * 5
    assert bucket.when("x") == pytest.approx(0.1)
    clock.advance(3600)
    assert [bucket.when(i) for i in range(100)] == [0.0] * 100
    assert bucket.when("y") > 0


def test_default_limiter_is_the_max_of_backoff_and_bucket() -> None:
    clock = FakeClock()
    limiter = default_rate_limiter(clock=clock)
    assert isinstance(limiter, MaxOf)
    assert limiter.when("a") == pytest.approx(0.005)  # bucket full: the backoff decides
    for i in range(200):  # drain the bucket with other keys
        limiter.when(f"k{i}")
    # One failure of a fresh key now waits for the bucket, far longer than 5 ms.
    assert limiter.when("fresh") == pytest.approx(10.2)  # 202nd token: 102 over the burst, at 10/s
    assert limiter.num_requeues("a") == 1
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
