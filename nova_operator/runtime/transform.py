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

A declaration may hold for some objects only (``keep(fields, when=predicate)``, client-go has no
such thing: its informers keep every object whole): ``fields`` are kept of the objects the
predicate admits, asked when the object arrives. An object that no declaration covers is stored
as a reference (``REFERENCE``: name, namespace, uid, resourceVersion, owners) and marked as
*withheld*: its cache entry says so and a reader that needs its content reads it from the API
server (``Cache.answers``, ``Cache.fill``). This is how a Secret informer keeps the data of the
Secrets its users read and not the data of every Secret of a namespace: what it holds is bounded
by what the users name, not by what the namespace stores. A predicate that fails is taken as
"admitted" (the object is kept whole rather than lost to a reader).

Only the shape the tree expects is pruned: a value that is not a mapping where the tree has a
subtree (a malformed object) is kept as it is, so nothing a reader could look at is lost.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

import structlog

from nova_operator.kube.types import Object

Fields: TypeAlias = "Mapping[str, Fields | None]"
ALL: None = None
"""Keep the whole value (as a tree leaf) or the whole object (as what ``keep`` is given)."""

IDENTITY: Fields = {"apiVersion": ALL, "kind": ALL, "metadata": ALL}
"""Kept of every object, whatever a tree says."""
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
REFERENCE: Fields = {
    "apiVersion": ALL,
    "kind": ALL,
    "metadata": {
        "name": ALL,
        "namespace": ALL,
        "uid": ALL,
        "resourceVersion": ALL,
        "ownerReferences": ALL,
        "deletionTimestamp": ALL,
    },
}
"""What is kept of an object no conditional declaration admits: enough to name it, to compare its
version and to map it to its owners (no labels, annotations or content a tenant could grow)."""
Admits: TypeAlias = Callable[[Object], bool]
log = structlog.get_logger("nova_operator.informer")


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
        self._always: Fields | None = ALL  # the union of the unconditional declarations
        self._declared = False  # any unconditional declaration
        self._when: list[tuple[Fields | None, Admits]] = []  # the conditional ones
        self._kept: Fields | None = ALL

    @property
    def kept(self) -> Fields | None:
        """The union of the declared trees, conditional ones included (``ALL``: whole objects)."""
        return self._kept

    @property
    def _base(self) -> Fields | None:
        """What every object keeps, whatever the predicates say."""
        return self._always if self._declared else REFERENCE

    def keep(self, fields: Fields | None, when: Admits | None = None) -> None:
        """One user's declaration: keep ``fields`` of every object (``ALL``: the whole object), or,
        with ``when``, of the objects ``when`` admits.

        ``apiVersion``, ``kind`` and the whole ``metadata`` are always kept (the cache's keys, its
        indexes, resourceVersions, owner references and labels live there), except on a withheld
        object (see the module docstring).
        """
        fields = union(fields, IDENTITY)
        if when is not None:
            self._when.append((fields, when))
        else:
            self._always = fields if not self._declared else union(self._always, fields)
            self._declared = True
        kept = self._base
        for conditional, _ in self._when:
            kept = union(kept, conditional)
        self._kept = kept

    def covers(self, fields: Fields | None) -> bool:
        """Whether ``keep(fields)`` would keep nothing that is not kept already, for every object."""
        return self._declared and union(self._always, union(fields, IDENTITY)) == self._always

    def admitted(self, obj: Object) -> Fields | None:
        """The tree kept of ``obj``: the unconditional union and every declaration that admits it."""
        kept = self._base
        for fields, when in self._when:
            if kept is ALL:
                break
            try:
                admitted = when(obj)
            except Exception:
                meta = obj.get("metadata")
                meta = meta if isinstance(meta, dict) else {}
                log.exception(
                    "cache predicate failed, object kept",
                    namespace=meta.get("namespace"),
                    name=meta.get("name"),
                )
                admitted = True
            if admitted:
                kept = union(kept, fields)
        return kept

    def apply(self, obj: Object) -> tuple[Object, bool]:
        """``obj`` as stored, and whether it is whole (False: withheld, a reader must not trust it)."""
        drop_bookkeeping(obj)
        kept = self.admitted(obj) if self._when else self._always
        whole = not self._when or kept == self._kept
        if kept is None:
            return obj, whole
        pruned: Object = prune(obj, kept)
        return pruned, whole

    def __call__(self, obj: Object) -> Object:
        return self.apply(obj)[0]
