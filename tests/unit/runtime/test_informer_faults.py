"""The informer under faults, on a fake clock: every step of a watch is bounded, every restart paced.

The API is scripted; time moves only when ``drive`` advances the fake clock to the next timer the
informer waits on, so a test can count requests over minutes of simulated time in milliseconds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from nova_operator.clock import FakeClock
from nova_operator.kube.errors import Gone, TooManyRequests, Unreachable
from nova_operator.kube.resources import CONFIGMAPS, ResourceRef
from nova_operator.metrics import Metrics
from nova_operator.runtime.informer import Informer
from nova_operator.settings import WatchSettings

# Production values (backoff 0.8 s doubling to 30 s, 70 s inactivity, 30 s open, 1 s shortest watch).
PROD = dataclasses.replace(WatchSettings(), resync_period=None)


def cm(name: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}, "data": {}}


class Event:
    def __init__(self, type: str, object: dict[str, Any]) -> None:
        self.type, self.object = type, object


class Stream:
    """One watch: ``open`` says how opening behaves, ``events`` what the stream then yields."""

    def __init__(self, api: API, open: str | Exception, events: list[Any]) -> None:
        self.api, self.open, self.events = api, open, events

    async def __aenter__(self) -> Stream:
        if isinstance(self.open, Exception):
            raise self.open
        if self.open == "hang":  # connect or headers never come (a proxy that stopped forwarding)
            await asyncio.Event().wait()
        self.api.opened += 1
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.api.closed += 1

    def __aiter__(self) -> Stream:
        return self

    async def __anext__(self) -> Event:
        if not self.events:
            raise StopAsyncIteration
        item = self.events.pop(0)
        if item == "hang":
            await asyncio.Event().wait()
        if isinstance(item, Exception):
            raise item
        assert isinstance(item, Event)
        return item


class API:
    """``behave(n)`` gives the n-th watch's (open, events); the list is always the same object."""

    def __init__(self, clock: FakeClock, behave: Callable[[int], tuple[str | Exception, list[Any]]]) -> None:
        self.clock, self.behave = clock, behave
        self.list_times: list[float] = []
        self.watch_times: list[float] = []
        self.opened = self.closed = 0

    async def list(self, ref: ResourceRef, namespace: str | None = None, **kw: Any) -> dict[str, Any]:
        self.list_times.append(self.clock.now())
        return {"metadata": {"resourceVersion": "10"}, "items": [cm("a", "10")]}

    def watch(self, ref: ResourceRef, namespace: str | None = None, **kw: Any) -> Stream:
        self.watch_times.append(self.clock.now())
        open_, events = self.behave(len(self.watch_times) - 1)
        return Stream(self, open_, list(events))


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def drive(clock: FakeClock, seconds: float) -> None:
    """Run the loop, advancing the fake clock timer by timer, for ``seconds`` of fake time."""
    end = clock.now() + seconds
    await settle()
    while (due := clock.next_due()) is not None and due <= end:
        clock.advance(max(0.0, due - clock.now()))
        await settle()
    clock.advance(max(0.0, end - clock.now()))
    await settle()


@pytest.fixture
async def running() -> AsyncIterator[Callable[..., Informer]]:
    tasks: list[asyncio.Task[None]] = []

    def start(api: API, settings: WatchSettings = PROD, metrics: Metrics | None = None) -> Informer:
        informer = Informer(api, CONFIGMAPS, settings=settings, metrics=metrics, clock=api.clock)
        tasks.append(asyncio.create_task(informer.run()))
        return informer

    yield start
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def restarts(metrics: Metrics, reason: str) -> float:
    value = metrics.registry.get_sample_value(
        "nova_operator_informer_watch_restarts_total", {"resource": "configmaps", "reason": reason}
    )
    return value or 0.0


def gaps(times: list[float]) -> list[float]:
    return [round(b - a, 3) for a, b in itertools.pairwise(times)]


def assert_client_go_backoff(intervals: list[float]) -> None:
    """0.8 s doubling to a 30 s cap, each with up to 20% jitter on top."""
    expected = 0.8
    for gap in intervals:
        assert expected <= gap <= expected * 1.2 + 1e-6, intervals
        expected = min(expected * 2, 30.0)


async def test_a_watch_whose_open_hangs_times_out_and_is_retried_with_backoff(
    running: Callable[..., Informer],
) -> None:
    clock = FakeClock()
    api = API(clock, lambda n: ("hang", []) if n < 3 else ("ok", ["hang"]))
    metrics = Metrics()
    running(api, metrics=metrics)
    await drive(clock, 29.9)
    assert len(api.watch_times) == 1  # still opening: bounded, not yet over
    await drive(clock, 0.2)
    assert restarts(metrics, "open_timeout") == 1
    await drive(clock, 80)  # the fourth open comes before 97 s, its silence would end after 166 s
    assert restarts(metrics, "open_timeout") == 3
    assert api.opened == 1  # the fourth open worked and the stream is being read
    # open 30 s, back off 0.8 s, open 30 s, back off 1.6 s, ...
    assert_client_go_backoff([g - 30.0 for g in gaps(api.watch_times)])
    assert len(api.list_times) == 1  # re-opened from the last resourceVersion, no relist


async def test_a_stream_silent_for_the_inactivity_timeout_is_reopened(
    running: Callable[..., Informer],
) -> None:
    clock = FakeClock()
    api = API(clock, lambda n: ("ok", [Event("BOOKMARK", {"metadata": {"resourceVersion": "12"}}), "hang"]))
    metrics = Metrics()
    running(api, metrics=metrics)
    await drive(clock, 69.9)
    assert restarts(metrics, "inactive") == 0
    await drive(clock, 0.2)
    assert restarts(metrics, "inactive") == 1
    assert api.closed == 1  # the dead stream is closed, not leaked
    assert len(api.watch_times) == 2
    assert gaps(api.watch_times) == [70.0]


async def test_a_watch_that_ends_at_once_is_backed_off_like_client_go(
    running: Callable[..., Informer],
) -> None:
    # The issue: 921 WATCH requests in 3 s against a server that closes every watch immediately.
    clock = FakeClock()
    api = API(clock, lambda n: ("ok", []))
    metrics = Metrics()
    running(api, metrics=metrics)
    await drive(clock, 120)
    watches = len(api.watch_times)
    assert 7 <= watches <= 9, watches  # 0.8+1.6+3.2+6.4+12.8+25.6+30+30... in two minutes
    assert_client_go_backoff(gaps(api.watch_times))
    assert restarts(metrics, "short") == watches
    assert len(api.list_times) == 1


async def test_a_watch_that_ends_at_once_but_delivered_events_is_reopened_at_once(
    running: Callable[..., Informer],
) -> None:
    clock = FakeClock()
    api = API(
        clock, lambda n: ("ok", [Event("MODIFIED", cm("a", str(11 + n)))]) if n < 3 else ("ok", ["hang"])
    )
    running(api)
    await drive(clock, 0.5)
    assert len(api.watch_times) == 4
    assert gaps(api.watch_times) == [0.0, 0.0, 0.0]


async def test_relists_after_410_are_paced(running: Callable[..., Informer]) -> None:
    # The issue: 813 full LISTs in 1 s when every watch answered 410.
    clock = FakeClock()
    api = API(clock, lambda n: ("ok", [Gone("too old resource version")]))
    metrics = Metrics()
    running(api, metrics=metrics)
    await drive(clock, 120)
    lists = len(api.list_times)
    assert 8 <= lists <= 10, lists  # the first list, then one per backoff step
    assert_client_go_backoff(gaps(api.list_times))
    value = metrics.registry.get_sample_value(
        "nova_operator_informer_relists_total", {"resource": "configmaps"}
    )
    assert value == lists
    assert restarts(metrics, "gone") == lists


async def test_410_on_opening_is_paced_too(running: Callable[..., Informer]) -> None:
    clock = FakeClock()
    api = API(clock, lambda n: (Gone("too old"), []))
    running(api)
    await drive(clock, 60)
    assert len(api.list_times) <= 8
    assert_client_go_backoff(gaps(api.list_times))


async def test_a_retry_after_on_a_watch_is_waited_out(running: Callable[..., Informer]) -> None:
    clock = FakeClock()
    busy = TooManyRequests("slow down")
    busy.retry_after = 7.0
    api = API(clock, lambda n: (busy, []) if n < 2 else ("ok", ["hang"]))
    running(api)
    await drive(clock, 30)
    assert gaps(api.watch_times) == [7.0, 7.0]  # the server's 7 s, not the 0.8 s backoff


async def test_backoff_starts_over_after_a_watch_that_worked_for_a_while(
    running: Callable[..., Informer],
) -> None:
    clock = FakeClock()
    scripts: dict[int, tuple[str | Exception, list[Any]]] = {3: ("ok", ["hang"])}  # silent after 70 s
    api = API(clock, lambda n: scripts.get(n, ("ok", [])))
    running(api)
    await drive(clock, 90)
    g = gaps(api.watch_times)
    assert len(g) >= 5, g
    assert_client_go_backoff(g[:3])  # three short watches: 0.8, 1.6, 3.2 s
    assert g[3] == 70.0  # the fourth worked (opened, then went silent): re-opened at once after it
    assert_client_go_backoff(g[4:])  # and the backoff of the next short ones starts over at 0.8 s


async def test_a_reflector_that_hears_nothing_is_reported_stale(running: Callable[..., Informer]) -> None:
    clock = FakeClock()
    outage = {"on": False}
    api = API(clock, lambda n: ("hang", []) if outage["on"] else ("ok", ["hang"]))
    informer = running(api)
    await drive(clock, 10)
    assert informer.stale(210) == []
    outage["on"] = True  # the next re-open hangs: the proxy stopped forwarding
    await drive(clock, 195)  # t=205: the stream opened at t=0 went silent at 70, re-opens hang since
    assert informer.stale(210) == []
    await drive(clock, 10)
    assert informer.stale(210) == ["configmaps"]
    outage["on"] = False
    await drive(clock, 70)  # at most one open timeout and one (capped) backoff later
    assert informer.stale(210) == []


async def test_a_watch_whose_connection_breaks_after_events_is_reopened_at_once(
    running: Callable[..., Informer],
) -> None:
    # Issue 26 item 13: client-go takes a stream broken under it for an ended one and re-opens at once.
    clock = FakeClock()
    broken = Unreachable("watch /api/v1/configmaps: Connection reset by peer")
    api = API(
        clock,
        lambda n: ("ok", [Event("MODIFIED", cm("a", str(11 + n))), broken]) if n < 3 else ("ok", ["hang"]),
    )
    metrics = Metrics()
    running(api, metrics=metrics)
    await drive(clock, 0.5)
    assert len(api.watch_times) == 4
    assert gaps(api.watch_times) == [0.0, 0.0, 0.0]
    assert restarts(metrics, "error") == 3
    assert len(api.list_times) == 1  # from the last resourceVersion, no relist


async def test_a_watch_whose_connection_breaks_at_once_is_backed_off(
    running: Callable[..., Informer],
) -> None:
    clock = FakeClock()
    broken = Unreachable("watch /api/v1/configmaps: Connection reset by peer")
    api = API(clock, lambda n: ("ok", [broken]))
    running(api)
    await drive(clock, 60)
    assert_client_go_backoff(gaps(api.watch_times))
