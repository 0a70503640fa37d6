"""Event handlers: they turn informer events into queue keys, and do nothing else.

Three mappings cover every watch of the operator: the object itself, the object's
controller owner (an ownerReference with ``controller: true`` of a given group and kind),
or any function from an object to keys. On an update both the old and the new object
are mapped, so a key that stops matching still gets one last reconcile.
With ``echoes`` (``runtime.echoes``), an event that only echoes a controller's own write leaves
out the key that wrote it (during that key's own pass, the decision waits for the pass's end).
Handlers receive the cache's own objects: they must not change them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from nova_operator.kube.owners import controller_ref
from nova_operator.kube.types import Object
from nova_operator.runtime.echoes import OwnWrites
from nova_operator.runtime.predicates import Predicate
from nova_operator.runtime.request import Request

Enqueue = Callable[[Request], None]
MapFunc = Callable[[Object], Iterable[Request]]


class EventHandler(Protocol):
    def on_add(self, obj: Object) -> None: ...
    def on_update(self, old: Object, new: Object) -> None: ...
    def on_delete(self, obj: Object) -> None: ...


def forgotten(handler: EventHandler, obj: Object) -> None:
    """Tell ``handler`` that its informer dropped ``obj`` unseen (no longer watched, not deleted).

    No event: a handler that keeps bookkeeping per object (``on_forget``) drops it, others are
    not called.
    """
    forget = getattr(handler, "on_forget", None)
    if forget is not None:
        forget(obj)


def object_key(obj: Object) -> Request:
    meta = obj.get("metadata") or {}
    return Request(meta.get("namespace") or "", meta.get("name", ""))


def controller_owner(obj: Object, *, group: str, kind: str) -> Request | None:
    """The key of ``obj``'s controller owner if it is a ``kind`` of ``group`` (any version)."""
    ref = controller_ref(obj)
    if ref is None or ref.get("kind") != kind or str(ref.get("apiVersion", "")).rpartition("/")[0] != group:
        return None
    return Request((obj.get("metadata") or {}).get("namespace") or "", str(ref["name"]))


class MappedHandler:
    """Enqueue the keys ``mapper`` returns for each admitted event (but an echo's writer, see ``echoes``)."""

    def __init__(
        self,
        enqueue: Enqueue,
        mapper: MapFunc,
        predicates: Sequence[Predicate] = (),
        echoes: OwnWrites | None = None,
    ) -> None:
        self._enqueue, self._map, self._predicates = enqueue, mapper, tuple(predicates)
        self._echoes = echoes

    def on_add(self, obj: Object) -> None:
        if all(p.create(obj) for p in self._predicates):
            self._emit((obj,), None, obj)

    def on_update(self, old: Object, new: Object) -> None:
        if all(p.update(old, new) for p in self._predicates):
            self._emit((old, new), old, new)

    def on_delete(self, obj: Object) -> None:
        if self._echoes is not None:
            self._echoes.forget(obj)
        if all(p.delete(obj) for p in self._predicates):
            self._emit((obj,), None, None)

    def on_forget(self, obj: Object) -> None:
        """The informer stopped watching ``obj`` (see ``forgotten``): no key, only the echo entry."""
        if self._echoes is not None:
            self._echoes.forget(obj)

    def _emit(self, objs: tuple[Object, ...], old: Object | None, new: Object | None) -> None:
        """Enqueue every key ``objs`` map to; ``new`` (None: a deletion) is what echoes are checked on."""
        seen: set[Request] = set()
        for obj in objs:
            for key in self._map(obj):
                if key in seen:
                    continue
                seen.add(key)
                if self._echoes is None or new is None or self._echoes.admit(key, old, new):
                    self._enqueue(key)


class ForgetWriter:
    """On a primary object's deletion, forget every write its key made (``OwnWrites.forget_writer``)."""

    def __init__(self, echoes: OwnWrites) -> None:
        self._echoes = echoes

    def on_add(self, obj: Object) -> None:
        return None

    def on_update(self, old: Object, new: Object) -> None:
        return None

    def on_delete(self, obj: Object) -> None:
        self._echoes.forget_writer(object_key(obj))


def enqueue_for_object(
    enqueue: Enqueue, *predicates: Predicate, echoes: OwnWrites | None = None
) -> MappedHandler:
    return MappedHandler(enqueue, lambda obj: [object_key(obj)], predicates, echoes)


def enqueue_for_owner(
    enqueue: Enqueue,
    *,
    group: str,
    kind: str,
    predicates: Sequence[Predicate] = (),
    echoes: OwnWrites | None = None,
) -> MappedHandler:
    def owner(obj: Object) -> list[Request]:
        key = controller_owner(obj, group=group, kind=kind)
        return [key] if key is not None else []

    return MappedHandler(enqueue, owner, predicates, echoes)


def enqueue_mapped(
    enqueue: Enqueue, mapper: MapFunc, *predicates: Predicate, echoes: OwnWrites | None = None
) -> MappedHandler:
    return MappedHandler(enqueue, mapper, predicates, echoes)
