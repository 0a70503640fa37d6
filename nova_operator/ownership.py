"""Whose a child is: the one test before the operator writes or deletes an object by name (issue 26).

Child names are derived from the CR's name (the spec fixes them), so an object of that name may
already exist and belong to someone else: another Nova whose names run into this one's (Nova
``x`` with database ``a_nova`` and Nova ``x-a`` with database ``nova`` both name the cell0
Database ``x-a-nova-cell0``), another controller, or a person (a Service ``web`` beside a Nova
``web``). Server-side apply with ``force`` would take such an object over and the owner
reference added would let the garbage collector delete it with the CR, so nothing is written
or deleted unless ``holder`` says the object is the CR's:

- its controller owner reference names the CR's UID, or
- it has no controller owner reference at all and its labels say it is the CR's (the instance,
  name and managed-by labels of the CR's children): an orphan the CR left behind, e.g. after a
  ``kubectl delete --cascade=orphan`` and a re-create, which is adopted.

Anything else is reported on the step's condition (reason ``ChildOwnedByAnother``, the message
names the object and, in fixed words, why it is not the CR's) and polled: the holder's changes do
not wake this CR. The message never names the holder (kind, name, uid): the CR's author may not be
allowed to read it, and ``kubectl get`` shows it to whoever is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from nova_operator import intervals
from nova_operator.kube.owners import controller_ref
from nova_operator.pipeline import StepInputError

__all__ = ["CHILD_OWNED_BY_ANOTHER", "ChildOwnedByAnother", "Taken", "holder", "refuse_unless_ours"]

CHILD_OWNED_BY_ANOTHER: Final = "ChildOwnedByAnother"


class ChildOwnedByAnother(StepInputError):
    """An object with a child's name exists and is not this CR's: nothing was written or deleted."""

    reason = CHILD_OWNED_BY_ANOTHER
    requeue_after = intervals.CHILD_OWNED_POLL


def holder(obj: Mapping[str, Any], owner_uid: str, marks: Mapping[str, str]) -> str | None:
    """None when ``obj`` is the owner's to write; else why not, in fixed words (for a message).

    ``marks``: the labels every child of the owner carries (an orphan with all of them is the owner's).
    """
    ref = controller_ref(obj)
    if ref is not None:
        if ref.get("uid") == owner_uid:
            return None
        return "another owner controls it"
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if marks and all(labels.get(k) == v for k, v in marks.items()):
        return None
    return "it has no controller owner reference and does not carry this CR's instance labels"


def refuse_unless_ours(
    obj: Mapping[str, Any] | None, owner: Mapping[str, Any], marks: Mapping[str, str], *, kind: str
) -> None:
    """Raise ``ChildOwnedByAnother`` when ``obj`` (a ``kind``) exists and is not ``owner``'s (``holder``)."""
    if obj is None:
        return
    meta = obj.get("metadata") or {}
    who = holder(obj, str((owner.get("metadata") or {}).get("uid") or ""), marks)
    if who is None:
        return
    where = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    owner_meta = owner.get("metadata") or {}
    raise ChildOwnedByAnother(
        f"{kind} {where} exists and is not this {owner.get('kind', 'CR')}'s: {who}. The operator neither "
        f"changes nor deletes it; delete or rename it if it is stale, or give {owner.get('kind', 'CR')} "
        f"{owner_meta.get('name', '')} a name whose children do not collide with it"
    )


class Taken:
    """Names whose create-first write (``apply.create``) was refused because an object held them.

    Such a name is read before it is written from then on, as long as the object stays (a stranger
    under a child's name is polled: without this, every poll would send a refused create as well as
    the read). ``drop`` when the name turns out to be the CR's, or free. At most ``size`` names are
    kept (the oldest go first: a forgotten one costs one refused create).
    """

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._names: dict[tuple[str, str, str], None] = {}

    def add(self, kind: str, namespace: str, name: str) -> None:
        self._names[(kind, namespace, name)] = None
        if len(self._names) > self._size:
            del self._names[next(iter(self._names))]

    def drop(self, kind: str, namespace: str, name: str) -> None:
        self._names.pop((kind, namespace, name), None)

    def __contains__(self, key: object) -> bool:
        return key in self._names

    def __len__(self) -> int:
        return len(self._names)
