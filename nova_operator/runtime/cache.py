"""The informer's store: objects keyed by namespace/name, with indexes, kept as compressed JSON.

Only the informer writes (``upsert``, ``remove``, ``replace``); everybody else reads, and
every read returns a new object decoded from the stored bytes, so a reconciler can change
what it got without changing the cache. What is stored is what the informer's transform
(``runtime.transform``) kept: never ``managedFields``.

Why bytes and not the decoded dicts: a Kubernetes object as nested Python dicts and strings
takes about four times its JSON size (a 5.6 KiB Deployment: 24 KiB), and every read had to
deep-copy it anyway; ``json.loads`` is that copy, and faster than copying the dicts (a Deployment:
about 160 µs against 280 µs). The compact JSON is deflated at zlib's fastest level, to 45 % of
its size over a Nova's children (about 40 µs to store a Deployment, 10 µs more per read). The
resourceVersion is kept beside the bytes (``replace`` compares it without decoding).

An entry may be *withheld*: the informer's transform kept only a reference of it (name,
namespace, version, owners: ``runtime.transform``, a conditional declaration that did not admit
it). Such an entry answers "it exists, at this version" but not "this is its content":
``answers(name, namespace)`` is False for it, and a reader that needs the content reads it from
the API server and may hand it back with ``fill`` (kept whole from then on, until an event of the
object or ``hold`` narrows it again).

A cache may be *bounded* (``bound``): a size function (a Secret's data, say) and two limits. An
object over the per-object limit is never held whole: it is stored withheld and remembered as
refused (``oversize`` says its size, so a reader can refuse it without reading it); one that would
bring the namespace's whole objects over the per-namespace limit is stored withheld too (a reader
reads it per pass, and ``fill`` does not keep it). ``held_bytes`` is what the whole objects measure.

Indexes: by owner UID (every ``ownerReferences`` entry), by label ``key=value``, and any
number of named custom indexes (a function from object to index values).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Container, Iterable, Mapping
from typing import Any, NamedTuple

from nova_operator.kube.types import Object
from nova_operator.runtime.request import Request
from nova_operator.runtime.transform import REFERENCE, drop_bookkeeping, prune

IndexFunc = Callable[[Object], Iterable[str]]
_Objects = list[Object]
_Keys = list[Request]
_Changes = list[tuple[Object | None, Object | None]]

OWNER_INDEX = "owner-uid"
LABEL_INDEX = "label"


def copy_object(obj: Any) -> Any:
    """A deep copy of a JSON tree (several times faster than ``copy.deepcopy``)."""
    if isinstance(obj, dict):
        return {k: copy_object(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [copy_object(v) for v in obj]
    return obj


def key_of(obj: Mapping[str, Any]) -> Request:
    meta = obj.get("metadata") or {}
    return Request(meta.get("namespace") or "", meta["name"])


def strip(obj: Object) -> Object:
    """Drop ``metadata.managedFields`` in place and return the object."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


class _Entry(NamedTuple):
    rv: str | None
    data: bytes
    whole: bool = True  # False: withheld (a reference only, see the module docstring)
    size: int = 0  # what the bound's size function measured (whole entries of a bounded cache only)


class Bound(NamedTuple):
    """What a bounded cache holds whole: ``size(obj)`` at most ``per_object``, and at most
    ``per_namespace`` summed over the whole objects of a namespace."""

    size: Callable[[Object], int]
    per_object: int
    per_namespace: int


def encode(obj: Object) -> bytes:
    """The stored form of ``obj``: compact ASCII JSON, deflated (zlib level 1)."""
    return zlib.compress(json.dumps(obj, separators=(",", ":")).encode("ascii"), 1)


def decode(entry: _Entry) -> Object:
    obj: Object = json.loads(zlib.decompress(entry.data))
    return obj


def _owner_uids(obj: Object) -> Iterable[str]:
    return [ref["uid"] for ref in obj.get("metadata", {}).get("ownerReferences") or [] if "uid" in ref]


def _labels(obj: Object) -> Iterable[str]:
    return [f"{k}={v}" for k, v in (obj.get("metadata", {}).get("labels") or {}).items()]


class Cache:
    def __init__(self, name: str = "") -> None:
        self.name = name
        self._items: dict[Request, _Entry] = {}
        self._index_funcs: dict[str, IndexFunc] = {OWNER_INDEX: _owner_uids, LABEL_INDEX: _labels}
        self._indexes: dict[str, dict[str, set[Request]]] = {OWNER_INDEX: {}, LABEL_INDEX: {}}
        self._synced = False
        self._covered: set[str] | None = None  # None: every namespace (a plain informer)
        self._bound: Bound | None = None
        self._held: dict[str, int] = {}  # namespace -> size of its whole entries (bounded only)
        self._oversize: dict[Request, int] = {}  # refused for their size: key -> size

    # -- size bound --------------------------------------------------------------------------

    def bound(self, bound: Bound) -> None:
        """Bound what is held whole (see the module docstring); before anything is stored."""
        if self._items:
            raise RuntimeError(f"cache {self.name}: a bound must be set before objects are stored")
        self._bound = bound

    @property
    def bounded(self) -> Bound | None:
        return self._bound

    @property
    def held_bytes(self) -> int:
        """The size of every whole object, as the bound measures it (0 when unbounded)."""
        return sum(self._held.values())

    def held_in(self, namespace: str) -> int:
        return self._held.get(namespace, 0)

    def oversize(self, name: str, namespace: str = "") -> int | None:
        """The size of ``namespace/name`` when the bound refused it for being over the per-object
        limit (None: not refused, or not stored)."""
        return self._oversize.get(Request(namespace, name))

    def _admit(self, key: Request, obj: Object, whole: bool) -> tuple[Object, bool, int]:
        """``obj`` as the bound lets it be stored: (object, whole, measured size of a whole one)."""
        if self._bound is None or not whole:
            return obj, whole, 0
        size = self._bound.size(obj)
        if size > self._bound.per_object:
            self._oversize[key] = size
        elif self._held.get(key.namespace, 0) + size <= self._bound.per_namespace:
            return obj, True, size
        reference: Object = prune(obj, REFERENCE)
        return reference, False, 0

    # -- scope -------------------------------------------------------------------------------

    @property
    def covered(self) -> frozenset[str]:
        return frozenset(self._covered or ())

    def covers(self, namespace: str) -> bool:
        """Whether a miss in ``namespace`` means "absent" (the namespace is listed and watched)."""
        return self._covered is None or namespace in self._covered

    def cover(self, namespaces: set[str]) -> None:
        """Restrict what counts as listed to ``namespaces`` (a scoped informer's cache)."""
        self._covered = set(namespaces)

    def uncover(self, namespace: str) -> _Objects:
        """Stop covering ``namespace`` and drop its objects (no longer watched, not deleted); returns them."""
        if self._covered is not None:
            self._covered.discard(namespace)
        dropped = [self.remove(key) for key in [k for k in self._items if k.namespace == namespace]]
        return [obj for obj in dropped if obj is not None]

    def answers(self, name: str, namespace: str = "") -> bool:
        """Whether a read of ``namespace/name`` is answered here: the namespace is covered and the
        object is absent or held whole (not withheld)."""
        if not self.covers(namespace):
            return False
        entry = self._items.get(Request(namespace, name))
        return entry is None or entry.whole

    def withheld(self, key: Request) -> bool:
        """Whether the entry of ``key`` is a reference only (False when absent or whole)."""
        entry = self._items.get(key)
        return entry is not None and not entry.whole

    # -- reads (copies) ----------------------------------------------------------------------

    def get(self, name: str, namespace: str = "") -> Object | None:
        entry = self._items.get(Request(namespace, name))
        return None if entry is None else decode(entry)

    def list(self, namespace: str | None = None, labels: Mapping[str, str] | None = None) -> _Objects:
        """Objects, optionally in one namespace and carrying all of ``labels``."""
        keys: Iterable[Request]
        if labels:
            sets = [self._indexes[LABEL_INDEX].get(f"{k}={v}", set()) for k, v in labels.items()]
            keys = set.intersection(*sets) if sets else set()
        else:
            keys = self._items.keys()
        return [decode(self._items[k]) for k in sorted(keys) if namespace is None or k.namespace == namespace]

    def list_keys(self, namespace: str | None = None) -> _Keys:
        return sorted(k for k in self._items if namespace is None or k.namespace == namespace)

    def by_index(self, index: str, value: str) -> _Objects:
        return [decode(self._items[k]) for k in sorted(self._indexes[index].get(value, ()))]

    def keys_by_index(self, index: str, value: str) -> _Keys:
        return sorted(self._indexes[index].get(value, ()))

    def indexed(self, index: str, value: str) -> bool:
        """Whether any object has ``value`` in ``index``: one dict lookup, nothing decoded or sorted
        (for predicates asked of every object an informer receives)."""
        return bool(self._indexes[index].get(value))

    def by_owner(self, uid: str) -> _Objects:
        return self.by_index(OWNER_INDEX, uid)

    def by_label(self, key: str, value: str) -> _Objects:
        return self.by_index(LABEL_INDEX, f"{key}={value}")

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    @property
    def has_synced(self) -> bool:
        """True once the informer has stored its first complete LIST."""
        return self._synced

    def add_index(self, name: str, func: IndexFunc) -> None:
        """Register a custom index (existing objects are indexed at once)."""
        self._index_funcs[name] = func
        self._indexes[name] = {}
        for key, entry in self._items.items():
            self._index(name, key, decode(entry))

    # -- writes (the informer only) ----------------------------------------------------------

    def peek(self, key: Request) -> Object | None:
        """The stored object (decoded, as ``get``), by key: for the informer and its handlers."""
        entry = self._items.get(key)
        return None if entry is None else decode(entry)

    def resource_version(self, key: Request) -> str | None:
        """The stored object's resourceVersion (None: absent, or it has none), without decoding it."""
        entry = self._items.get(key)
        return None if entry is None else entry.rv

    def upsert(self, obj: Object, *, whole: bool = True) -> Object | None:
        """Store ``obj`` (stripped; the cache keeps its bytes, not ``obj``); returns the previous object.

        ``whole=False``: ``obj`` is a reference only (withheld, see the module docstring).
        """
        key = key_of(strip(obj))
        old = self.remove(key)
        obj, whole, size = self._admit(key, obj, whole)
        self._items[key] = _Entry(_rv(obj), encode(obj), whole, size)
        if size:
            self._held[key.namespace] = self._held.get(key.namespace, 0) + size
        for name in self._index_funcs:
            self._index(name, key, obj)
        return old

    def hold(self, obj: Object, *, whole: bool) -> bool:
        """Store ``obj`` in place of the entry of its key at the same resourceVersion: the object did
        not change, only how much of it is held (more, or less). No change is reported; False (and
        nothing stored) when there is no such entry or it is at another version."""
        key = key_of(obj)
        entry = self._items.get(key)
        if entry is None or entry.rv is None or entry.rv != _rv(obj):
            return False
        self.upsert(obj, whole=whole)
        return True

    def fill(self, obj: Object) -> bool:
        """``obj``, read whole from the API server, in place of its withheld entry (same version
        only: a newer version comes with its watch event). Whether it was stored."""
        key = key_of(obj)
        if not self.withheld(key):
            return False
        self.hold(drop_bookkeeping(copy_object(obj)), whole=True)
        return not self.withheld(key)  # a bounded cache may keep refusing it

    def remove(self, key: Request) -> Object | None:
        entry = self._items.pop(key, None)
        if entry is None:
            return None
        self._oversize.pop(key, None)
        if entry.size:
            left = self._held.get(key.namespace, 0) - entry.size
            if left > 0:
                self._held[key.namespace] = left
            else:
                self._held.pop(key.namespace, None)
        old = decode(entry)
        self._unindex(key, old)
        return old

    def replace(
        self, objs: Iterable[Object], namespace: str | None = None, withheld: Container[Request] = ()
    ) -> _Changes:
        """Make the store (or one namespace of it) equal to ``objs``; return the (old, new) changes.

        Unchanged objects (same resourceVersion) are not reported (an unchanged object now held
        whole or withheld where it was not is stored so, silently). Deletions come as
        ``(old, None)``, additions as ``(None, new)``. ``withheld``: the keys of ``objs`` that
        are references only.
        """
        changes: _Changes = []
        seen: set[Request] = set()
        for obj in objs:
            key = key_of(obj)
            seen.add(key)
            whole = key not in withheld
            entry = self._items.get(key)
            if entry is not None and entry.rv == _rv(obj):
                if entry.whole != whole:
                    self.upsert(obj, whole=whole)
                continue
            changes.append((self.upsert(obj, whole=whole), obj))
        for key in [
            k for k in self._items if k not in seen and (namespace is None or k.namespace == namespace)
        ]:
            changes.append((self.remove(key), None))
        return changes

    def mark_synced(self) -> None:
        self._synced = True

    def _index(self, name: str, key: Request, obj: Object) -> None:
        for value in self._index_funcs[name](obj):
            self._indexes[name].setdefault(value, set()).add(key)

    def _unindex(self, key: Request, obj: Object) -> None:
        for name, func in self._index_funcs.items():
            index = self._indexes[name]
            for value in func(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]


def object_version(obj: Mapping[str, Any]) -> str:
    """``metadata.resourceVersion`` of ``obj`` ("" when it has none)."""
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _rv(obj: Object) -> str | None:
    return object_version(obj) or None
