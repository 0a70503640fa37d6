"""Kubernetes Events on the CR a controller reconciles (core/v1, like client-go's recorder).

What reaches the API server is bounded as client-go's ``EventCorrelator`` bounds it, whatever a
tenant's cluster or OpenStack makes a pass report (issue 36: 3,000 deleted service records made
3,000 Events per look):

- **spam filter**: a token bucket per (object, reason), ``SPAM_BURST`` events at once, then one per
  ``SPAM_REFILL`` seconds (client-go: 25, then one per 5 min). An event without a token is dropped
  (logged at debug level, counted in ``dropped``) before any request is sent.
- **aggregation**: once ``AGGREGATE_MAX`` events of one object, type and reason with different
  messages were seen within ``AGGREGATE_WINDOW`` seconds, the next ones are folded into one Event
  whose message is ``(combined from similar events): <the latest message>``.
- **deduplication**: identical events (same object, type, reason and message; or the one combined
  Event) are one Event whose ``count``, ``lastTimestamp`` (and, combined, ``message``) are patched.

Emission never fails a reconcile: API errors are logged and dropped. Callers must never put a
credential into a message.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal, Protocol

import structlog

from nova_operator.clock import utcnow
from nova_operator.kube import errors
from nova_operator.kube.client import Kube
from nova_operator.kube.resources import EVENTS
from nova_operator.timestamps import rfc3339

EventType = Literal["Normal", "Warning"]


class EventSink(Protocol):
    """What a pass needs of an event recorder: ``EventRecorder``, or a test's list."""

    async def emit(self, obj: Mapping[str, Any], type_: EventType, reason: str, message: str) -> None: ...


_MAX_MESSAGE = 1024
_CACHE_SIZE = 4096
SPAM_BURST: Final = 25
"""Events one (object, reason) may record at once (client-go's spam filter burst)."""
SPAM_REFILL: Final = 300.0
"""Seconds per token the bucket of an (object, reason) regains (client-go: qps 1/300)."""
AGGREGATE_MAX: Final = 10
"""Distinct messages of one (object, type, reason) recorded as they are before the rest are combined."""
AGGREGATE_WINDOW: Final = 600.0
"""Seconds after the last similar event that the aggregation of an (object, type, reason) is forgotten."""
COMBINED: Final = "(combined from similar events): "

log = structlog.get_logger(__name__)


@dataclass
class _Seen:
    name: str
    count: int


@dataclass
class _Bucket:
    tokens: float
    at: float  # seconds (the recorder's clock) of the last refill

    def take(self, now: float) -> bool:
        self.tokens = min(float(SPAM_BURST), self.tokens + max(0.0, now - self.at) / SPAM_REFILL)
        self.at = now
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True


@dataclass
class _Similar:
    messages: set[str]
    at: float  # seconds (the recorder's clock) of the last similar event


def _bounded(cache: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    cache[key] = value
    cache.move_to_end(key)
    if len(cache) > _CACHE_SIZE:
        cache.popitem(last=False)


class EventRecorder:
    """Emits Events for one reporting component (``nova-controller``, ``novacompute-controller``)."""

    def __init__(
        self,
        kube: Kube,
        component: str,
        *,
        instance: str = "",
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        self._kube = kube
        self.component = component
        self._instance = instance or component
        self._now = now
        self._seen: OrderedDict[tuple[str, str, str, str], _Seen] = OrderedDict()
        self._buckets: OrderedDict[tuple[str, str], _Bucket] = OrderedDict()
        self._similar: OrderedDict[tuple[str, str, str], _Similar] = OrderedDict()
        self._serial = itertools.count()
        self.dropped = 0
        """Events the spam filter dropped (since start)."""

    def _allowed(self, uid: str, reason: str, now: float) -> bool:
        """The spam filter: whether the bucket of (object, reason) has a token (taking it)."""
        key = (uid, reason)
        bucket = self._buckets.get(key) or _Bucket(float(SPAM_BURST), now)
        allowed = bucket.take(now)
        _bounded(self._buckets, key, bucket)
        return allowed

    def _aggregate(
        self, uid: str, type_: EventType, reason: str, message: str, now: float
    ) -> tuple[str, str]:
        """The message to record and its deduplication key part: the message itself, or, past
        ``AGGREGATE_MAX`` distinct messages within the window, the combined one."""
        key = (uid, type_, reason)
        similar = self._similar.get(key)
        if similar is None or now - similar.at > AGGREGATE_WINDOW:
            similar = _Similar(set(), now)
        similar.at = now
        _bounded(self._similar, key, similar)
        if message in similar.messages:
            return message, message
        if len(similar.messages) < AGGREGATE_MAX:
            similar.messages.add(message)
            return message, message
        return (COMBINED + message)[:_MAX_MESSAGE], COMBINED

    async def emit(self, obj: Mapping[str, Any], type_: EventType, reason: str, message: str) -> None:
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        uid = str(meta.get("uid", ""))
        clock = self._now()
        seconds = clock.timestamp()
        if not self._allowed(uid, reason, seconds):
            self.dropped += 1
            log.debug("event dropped by the spam filter", reason=reason, name=meta.get("name"))
            return
        message, part = self._aggregate(uid, type_, reason, message[:_MAX_MESSAGE], seconds)
        key = (uid, type_, reason, part)
        now = rfc3339(clock)
        seen = self._seen.get(key)
        try:
            if seen is not None:
                try:
                    change: dict[str, Any] = {"count": seen.count + 1, "lastTimestamp": now}
                    if part == COMBINED:
                        change["message"] = message
                    await self._kube.patch(EVENTS, seen.name, change, namespace)
                    seen.count += 1
                    self._seen.move_to_end(key)
                    return
                except errors.NotFound:
                    del self._seen[key]  # expired (events have a TTL): start a new one
            name = f"{meta.get('name', 'object')}.{int(seconds * 1e9):x}{next(self._serial)}"
            await self._kube.create(EVENTS, self._event(obj, name, type_, reason, message, now), namespace)
            _bounded(self._seen, key, _Seen(name, 1))
        except errors.KubeError as exc:
            log.warning("event not recorded", reason=reason, error=str(exc))

    def forget(self, uid: str) -> None:
        """Drop the deduplication, aggregation and spam-filter state of a deleted object."""
        caches: tuple[OrderedDict[Any, Any], ...] = (self._seen, self._buckets, self._similar)
        for cache in caches:
            for key in [k for k in cache if k[0] == uid]:
                del cache[key]

    def _event(
        self, obj: Mapping[str, Any], name: str, type_: EventType, reason: str, message: str, now: str
    ) -> dict[str, Any]:
        meta = obj.get("metadata") or {}
        involved = {
            "apiVersion": obj.get("apiVersion", ""),
            "kind": obj.get("kind", ""),
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "uid": meta.get("uid", ""),
        }
        if meta.get("resourceVersion"):
            involved["resourceVersion"] = meta["resourceVersion"]
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": meta.get("namespace") or "default"},
            "involvedObject": involved,
            "type": type_,
            "reason": reason,
            "message": message,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self._instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
