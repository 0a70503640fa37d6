"""Issue 36 §5, "Unbounded deletes and events": the recorder's spam filter and aggregation.

The recorder sends what client-go's ``EventCorrelator`` would: a token bucket per (object, reason)
and similar events (same object, type and reason, other messages) folded into one with a count.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast

from nova_operator.kube.client import Kube
from nova_operator.runtime.events import (
    AGGREGATE_MAX,
    COMBINED,
    SPAM_BURST,
    SPAM_REFILL,
    EventRecorder,
)


def nova(name: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
        "kind": "Nova",
        "metadata": {"name": name, "namespace": "tenant", "uid": uid},
    }


NOVA, OTHER = nova("nova", "uid-1"), nova("other", "uid-2")


class EventsAPI:
    """Records the Event requests and keeps the Events as the API server would."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.events: dict[str, dict[str, Any]] = {}

    async def create(self, ref: Any, body: dict[str, Any], namespace: str) -> dict[str, Any]:
        self.requests.append("create")
        self.events[body["metadata"]["name"]] = dict(body)
        return body

    async def patch(self, ref: Any, name: str, body: dict[str, Any], namespace: str) -> dict[str, Any]:
        self.requests.append("patch")
        self.events[name].update(body)
        return self.events[name]


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 6, 7, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def recorder() -> tuple[EventRecorder, EventsAPI, Clock]:
    api, clock = EventsAPI(), Clock()
    return EventRecorder(cast(Kube, api), "nova-controller", now=clock), api, clock


async def test_a_reason_repeated_for_thousands_of_records_sends_a_bounded_number_of_requests() -> None:
    rec, api, _clock = recorder()
    for index in range(3000):
        await rec.emit(NOVA, "Normal", "StaleServiceDeleted", f"deleted the record of host h-{index}")
    assert len(api.requests) == SPAM_BURST, f"{len(api.requests)} Event requests for 3,000 events"
    assert rec.dropped == 3000 - SPAM_BURST


async def test_the_bucket_is_per_object_and_reason_and_refills() -> None:
    rec, api, clock = recorder()
    for _ in range(SPAM_BURST + 5):
        await rec.emit(NOVA, "Normal", "R", "same")
    assert len(api.requests) == SPAM_BURST
    await rec.emit(NOVA, "Normal", "OtherReason", "same")  # another reason: its own bucket
    await rec.emit(OTHER, "Normal", "R", "same")  # another object: its own bucket
    assert len(api.requests) == SPAM_BURST + 2
    await rec.emit(NOVA, "Normal", "R", "same")
    assert len(api.requests) == SPAM_BURST + 2  # still empty
    clock.now += timedelta(seconds=SPAM_REFILL)
    await rec.emit(NOVA, "Normal", "R", "same")  # one token back
    assert len(api.requests) == SPAM_BURST + 3
    (same,) = [e for e in api.events.values() if e["involvedObject"]["uid"] == "uid-1" and e["reason"] == "R"]
    assert same["count"] == SPAM_BURST + 1  # identical events: one Event, counted


async def test_similar_events_are_combined_into_one_with_a_count() -> None:
    rec, api, clock = recorder()
    for index in range(20):
        clock.now += timedelta(seconds=1)
        await rec.emit(NOVA, "Normal", "AggregateDeleted", f"deleted aggregate a-{index}")
    assert len(api.events) == AGGREGATE_MAX + 1
    (combined,) = [e for e in api.events.values() if e["message"].startswith(COMBINED)]
    assert combined["count"] == 20 - AGGREGATE_MAX
    assert combined["message"] == f"{COMBINED}deleted aggregate a-19"  # the latest message
    assert api.requests.count("create") == AGGREGATE_MAX + 1


async def test_forget_drops_every_state_of_an_object() -> None:
    rec, api, _clock = recorder()
    for _ in range(SPAM_BURST):
        await rec.emit(NOVA, "Normal", "R", "m")
    rec.forget("uid-1")
    await rec.emit(NOVA, "Normal", "R", "m")
    assert api.requests.count("create") == 2  # a fresh bucket, a fresh Event
