"""Filters an event passes before a handler enqueues anything.

A ``Predicate`` answers for create, update and delete separately (default: admit). The
common ones for a primary kind: ``ignore_status_only`` admits an update only on a change
of generation, labels or annotations, or when deletion starts, so a controller's own
status writes do not wake it. For a watched child, ``status_view_changed(view)`` admits an
update unless all it changed is status outside ``view`` (what the reconciler reads of it), so
the status writes of another controller (a Deployment's rollout: 5 to 8 of them) wake the
owner only when something it reads moved.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nova_operator.kube.types import Object


def _yes(*_: Object) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class Predicate:
    create: Callable[[Object], bool] = _yes
    update: Callable[[Object, Object], bool] = _yes
    delete: Callable[[Object], bool] = _yes


def _meta(obj: Object) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


generation_changed = Predicate(
    update=lambda old, new: _meta(old).get("generation") != _meta(new).get("generation")
)
labels_changed = Predicate(update=lambda old, new: _meta(old).get("labels") != _meta(new).get("labels"))
annotations_changed = Predicate(
    update=lambda old, new: _meta(old).get("annotations") != _meta(new).get("annotations")
)
deletion_started = Predicate(
    update=lambda old, new: "deletionTimestamp" not in _meta(old) and "deletionTimestamp" in _meta(new)
)


def any_of(*preds: Predicate) -> Predicate:
    return Predicate(
        create=lambda o: any(p.create(o) for p in preds),
        update=lambda old, new: any(p.update(old, new) for p in preds),
        delete=lambda o: any(p.delete(o) for p in preds),
    )


def all_of(*preds: Predicate) -> Predicate:
    return Predicate(
        create=lambda o: all(p.create(o) for p in preds),
        update=lambda old, new: all(p.update(old, new) for p in preds),
        delete=lambda o: all(p.delete(o) for p in preds),
    )


ignore_status_only = any_of(generation_changed, labels_changed, annotations_changed, deletion_started)


_VOLATILE_META = ("resourceVersion", "managedFields")


def _without_status(obj: Object) -> Object:
    """``obj`` minus ``status`` and the metadata every write changes (the resourceVersion)."""
    meta = {k: v for k, v in _meta(obj).items() if k not in _VOLATILE_META}
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": meta}


def status_view_changed(view: Callable[[Object], Any]) -> Predicate:
    """Admit an update unless only status fields outside ``view(obj)`` changed.

    ``view`` returns the part of an object's status the reconciler reads (any comparable value;
    ``lambda _: None`` when it reads none). Every change outside ``status`` is admitted (spec,
    labels, annotations, owner references, the start of deletion), and so is a resync, which
    hands the same object twice: a resync exists to reconcile again whatever changed.
    """

    def update(old: Object, new: Object) -> bool:
        if old is new or _meta(old).get("resourceVersion") == _meta(new).get("resourceVersion"):
            return True
        return view(old) != view(new) or _without_status(old) != _without_status(new)

    return Predicate(update=update)


def label_selector(match_labels: Mapping[str, str]) -> Predicate:
    """Admit objects whose labels include ``match_labels`` (on update: old or new)."""

    def matches(obj: Object) -> bool:
        labels = _meta(obj).get("labels") or {}
        return all(labels.get(k) == v for k, v in match_labels.items())

    return Predicate(create=matches, update=lambda old, new: matches(old) or matches(new), delete=matches)
