"""Request counts and thin client wrappers for the pass-kit tests (not a test module).

Counts come from the client's own ``nova_operator_api_requests_total``; the wrappers around the
real ``Kube`` only record or inject, the answers are kube-apiserver's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from nova_operator.kube import Kube
from nova_operator.kube.errors import Conflict, KubeError
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


Call = tuple[str, str, str, str]
"""(verb, resource, name or namespace, HTTP code) of one request."""


class Recorder(Kube):
    """The real client over ``kube``'s connection, with request metrics of its own, recording every
    request (``calls``) and every server-side apply's (field manager, force, answer) (``applies``).
    It refuses the next ``conflicts`` applies with a Conflict before they are sent (standing in for a
    create race) and every request of a verb in ``refuse`` with that error (a refusal the test cannot
    provoke from the server); it changes nothing else: every other answer is kube-apiserver's."""

    calls: list[Call]
    applies: list[tuple[str, bool, str]]
    conflicts: int
    refuse: dict[str, KubeError]  # verb -> the error its requests get, unsent

    @classmethod
    def of(cls, kube: Kube) -> Recorder:
        wrapped = cls(kube._api, metrics=Metrics(), timeout=kube.timeout)
        wrapped.calls, wrapped.applies, wrapped.conflicts, wrapped.refuse = [], [], 0, {}
        return wrapped

    async def close(self) -> None:  # the wrapped client owns the connection
        pass

    def called(self, name: str | None = None) -> list[tuple[str, str, str]]:
        """(verb, resource, code) of the calls so far (those naming ``name`` only, when given)."""
        return [(v, r, c) for v, r, n, c in self.calls if name is None or n == name]

    async def _send(self, verb: str, resource: str, method: str, path: str, **kw: Any) -> Any:
        """Recorded in the order sent; the code is filled in when the answer comes."""
        name = path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        at = len(self.calls)
        if verb in self.refuse:
            self.calls.append((verb, resource, name, "injected"))
            raise self.refuse[verb]
        self.calls.append((verb, resource, name, "pending"))
        try:
            resp = await super()._send(verb, resource, method, path, **kw)
        except KubeError as exc:
            self.calls[at] = (verb, resource, name, str(exc.status or type(exc).__name__))
            raise
        self.calls[at] = (verb, resource, name, str(resp.status))
        return resp

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
