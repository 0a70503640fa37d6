"""Kubernetes Events on the CR a controller reconciles (core/v1, like client-go's recorder).

Identical events (same object, type, reason and message) are folded into one Event whose
``count`` and ``lastTimestamp`` are patched, as client-go's correlator does, so a reason
emitted on every pass does not flood the namespace. Emission never fails a reconcile:
API errors are logged and dropped. Callers must never put a credential into a message.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

import structlog

from nova_operator.clock import utcnow
from nova_operator.kube import errors
from nova_operator.kube.client import Kube
from nova_operator.kube.resources import EVENTS

EventType = Literal["Normal", "Warning"]


class EventSink(Protocol):
    """What a pass needs of an event recorder: ``EventRecorder``, or a test's list."""

    async def emit(self, obj: Mapping[str, Any], type_: EventType, reason: str, message: str) -> None: ...


_MAX_MESSAGE = 1024
_CACHE_SIZE = 4096

log = structlog.get_logger(__name__)


def _rfc3339(now: datetime) -> str:
    return now.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Seen:
    name: str
    count: int


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
        self._serial = itertools.count()

    async def emit(self, obj: Mapping[str, Any], type_: EventType, reason: str, message: str) -> None:
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        message = message[:_MAX_MESSAGE]
        key = (str(meta.get("uid", "")), type_, reason, message)
        now = _rfc3339(self._now())
        seen = self._seen.get(key)
        try:
            if seen is not None:
                try:
                    await self._kube.patch(
                        EVENTS, seen.name, {"count": seen.count + 1, "lastTimestamp": now}, namespace
                    )
                    seen.count += 1
                    self._seen.move_to_end(key)
                    return
                except errors.NotFound:
                    del self._seen[key]  # expired (events have a TTL): start a new one
            name = f"{meta.get('name', 'object')}.{int(self._now().timestamp() * 1e9):x}{next(self._serial)}"
            await self._kube.create(EVENTS, self._event(obj, name, type_, reason, message, now), namespace)
            self._seen[key] = _Seen(name, 1)
            if len(self._seen) > _CACHE_SIZE:
                self._seen.popitem(last=False)
        except errors.KubeError as exc:
            log.warning("event not recorded", reason=reason, error=str(exc))

    def forget(self, uid: str) -> None:
        """Drop the aggregation state of a deleted object."""
        for key in [k for k in self._seen if k[0] == uid]:
            del self._seen[key]

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
