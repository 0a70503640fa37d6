"""Request counts and thin client wrappers for the pass-kit tests (not a test module).

Counts come from the client's own ``nova_operator_api_requests_total``; the wrappers around the
real ``Kube`` only record or inject, the answers are kube-apiserver's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from nova_operator.kube import Kube
from nova_operator.kube.errors import Conflict
from nova_operator.kube.resources import ResourceRef
from nova_operator.kube.types import Object
from nova_operator.metrics import WRITE_VERBS, Metrics

Sent = Counter[tuple[str, str, str]]


def sent(kube: Kube) -> Sent:
    """Every request ``kube`` sent so far, by (verb, resource, HTTP code)."""
    found: Sent = Counter()
    for metric in kube.metrics.api_requests.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total") and sample.value:
                key = (sample.labels["verb"], sample.labels["resource"], sample.labels["code"])
                found[key] += int(sample.value)
    return found


def since(kube: Kube, before: Sent) -> Sent:
    """The requests ``kube`` sent after ``before`` was taken."""
    return sent(kube) - before


def writes(kube: Kube) -> int:
    """Write requests sent, whatever the answer."""
    return kube.metrics.api_request_count(WRITE_VERBS)


def gets(kube: Kube) -> int:
    return kube.metrics.api_request_count(frozenset({"get"}))


def managers(obj: Object) -> list[tuple[str, str, str]]:
    """(manager, operation, subresource) of each ``managedFields`` entry."""
    entries = obj["metadata"].get("managedFields") or []
    return sorted((e["manager"], e["operation"], e.get("subresource", "")) for e in entries)


class ApplyRecorder(Kube):
    """The real client, recording (field manager, force, answer) of every server-side apply, and
    refusing the next ``conflicts`` applies with a Conflict before they are sent (the injection
    stands in for a create race; nothing else is changed)."""

    applies: list[tuple[str, bool, str]]
    conflicts: int

    @classmethod
    def of(cls, kube: Kube) -> ApplyRecorder:
        """Over ``kube``'s connection, with request metrics of its own (only its requests count)."""
        wrapped = cls(kube._api, metrics=Metrics(), timeout=kube.timeout)
        wrapped.applies, wrapped.conflicts = [], 0
        return wrapped

    async def close(self) -> None:  # the wrapped client owns the connection
        pass

    async def apply(
        self,
        ref: ResourceRef,
        body: Mapping[str, Any],
        *,
        field_manager: str,
        namespace: str | None = None,
        force: bool = True,
        subresource: str | None = None,
    ) -> Object:
        if self.conflicts:
            self.conflicts -= 1
            self.applies.append((field_manager, force, "injected 409"))
            raise Conflict("injected: the object was created meanwhile")
        try:
            live = await super().apply(
                ref,
                body,
                field_manager=field_manager,
                namespace=namespace,
                force=force,
                subresource=subresource,
            )
        except Conflict:
            self.applies.append((field_manager, force, "409"))
            raise
        self.applies.append((field_manager, force, "200"))
        return live
