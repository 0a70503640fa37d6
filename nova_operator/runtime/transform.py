"""What an informer keeps of each object before it is stored: ``Transform`` (client-go's ``SetTransform``).

Every object an informer stores (from a LIST, a watch event, a deletion) passes the informer's
transform first. Two things are never kept, whoever watches the kind: ``metadata.managedFields``
(often the largest part of an object) and the ``kubectl.kubernetes.io/last-applied-configuration``
annotation (a second copy of what the user applied). Nobody reads them from a cache.

Beyond that, what is kept is declared by the informer's users as field trees (``Fields``): a
mapping from a field name to the subtree to keep of its value, ``ALL`` (``None``) for the whole
value. A subtree applied to a list applies to each of its elements. Each user of a shared informer
declares what it reads (``Transform.keep``); the informer keeps the union, and one user that
declares nothing (``keep(ALL)``: the default of ``Manager.informer``) keeps every object whole.
So a controller can only narrow what it stores for itself, never what another one reads.

Only the shape the tree expects is pruned: a value that is not a mapping where the tree has a
subtree (a malformed object) is kept as it is, so nothing a reader could look at is lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

Object = dict[str, Any]
Fields: TypeAlias = "Mapping[str, Fields | None]"
ALL: None = None
"""Keep the whole value (as a tree leaf) or the whole object (as what ``keep`` is given)."""

IDENTITY: Fields = {"apiVersion": ALL, "kind": ALL, "metadata": ALL}
"""Kept of every object, whatever a tree says."""
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def drop_bookkeeping(obj: Object) -> Object:
    """Drop ``metadata.managedFields`` and the last-applied annotation, in place; returns ``obj``."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict) and LAST_APPLIED in annotations:
            del annotations[LAST_APPLIED]
    return obj


def union(a: Fields | None, b: Fields | None) -> Fields | None:
    """The tree that keeps what either keeps (``ALL`` on either side keeps everything there)."""
    if a is None or b is None:
        return ALL
    merged: dict[str, Fields | None] = dict(a)
    for key, sub in b.items():
        merged[key] = union(merged[key], sub) if key in merged else sub
    return merged


def prune(value: Any, fields: Fields | None) -> Any:
    """``value`` reduced to ``fields`` (a new tree; kept leaves are shared, not copied)."""
    if fields is None:
        return value
    if isinstance(value, list):
        return [prune(item, fields) for item in value]
    if not isinstance(value, dict):
        return value  # not the shape the tree describes: keep it, nothing is guessed away
    return {key: prune(value[key], sub) for key, sub in fields.items() if key in value}


class Transform:
    """The union of what an informer's users keep; ``__call__`` turns a received object into the stored one.

    Until the first ``keep`` the transform keeps every object whole (bookkeeping aside).
    """

    def __init__(self) -> None:
        self._kept: Fields | None = ALL
        self._declared = False

    @property
    def kept(self) -> Fields | None:
        """The union of the declared trees (``ALL``: whole objects)."""
        return self._kept

    def keep(self, fields: Fields | None) -> None:
        """One user's declaration: keep ``fields`` of every object (``ALL``: the whole object).

        ``apiVersion``, ``kind`` and the whole ``metadata`` are always kept (the cache's keys, its
        indexes, resourceVersions, owner references and labels live there).
        """
        fields = union(fields, IDENTITY)
        self._kept = fields if not self._declared else union(self._kept, fields)
        self._declared = True

    def covers(self, fields: Fields | None) -> bool:
        """Whether ``keep(fields)`` would keep nothing that is not kept already."""
        return self._declared and union(self._kept, union(fields, IDENTITY)) == self._kept

    def __call__(self, obj: Object) -> Object:
        drop_bookkeeping(obj)
        if self._kept is None:
            return obj
        kept: Object = prune(obj, self._kept)
        return kept
