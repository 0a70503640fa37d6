"""Server-side apply with one field manager, owner references, and write-free steady state.

Every child the operator keeps up to date (Deployments, Services, ConfigMaps, Secrets,
CronJobs, PDBs, HPAs, routes, policies, MariaDB objects, the compute pools' DaemonSets)
goes through ``apply(kube, desired, owner=..., cached=...)``, which

1. sets a controller owner reference to ``owner`` (when given, and in the same namespace),
2. stamps ``APPLIED_DIGEST`` into ``metadata.annotations``: the SHA-256 of the desired
   object as it is sent (owner reference included, the annotation itself excluded); keyed
   (HMAC-SHA-256 with the Nova's ``{name}-digest-key``, ``digest_key``) for a Secret, whose
   data is credentials: a plain hash of a derived Secret let anyone who reads annotations
   test password guesses offline,
3. for a kind whose content the operator owns wholesale (``EXCLUSIVE``: a Secret's
   ``data``), removes keys the live object carries beyond the desired ones with one JSON
   merge patch (whoever added them), so a derived Secret holds exactly its keys,
4. returns ``cached`` untouched when it already carries every desired field (``carries``),
   the digest annotation included, so a converged object costs no request at all,
5. otherwise sends one server-side apply as ``FIELD_MANAGER`` with ``force`` (the operator
   owns what it renders), retrying a few times on 409 Conflict (a create race).

Which writes are the caller's own (``own``, for ``runtime.echoes``): a write's watch echo may be
left out of its writer's wake-ups only when the object as the write returned it holds nothing
another writer put there since the caller's basis. ``cached`` is that basis, and it may lag the
server: an apply re-sent from a stale cache can be a no-op on the server, which then answers
with another writer's version. So the merge patch and the apply of step 3 and 5 carry
``cached``'s resourceVersion as a precondition; the server either applies on exactly that
basis (the answer is the caller's own: ``own`` is called with it when its version moved) or
refuses with 409, and then the write goes out again without the precondition and its answer is
not the caller's (its echo wakes the caller, which then sees what the other writer did). A
create (no ``cached``: the object was absent from the cache) has no version to check against:
its answer is the caller's own only when no manager but the operator's has written any field of
the object (``managedFields``), i.e. the object holds nothing but what the operator applied.

``force`` and the owner reference take over whatever object carries the name, so the callers
first ask ``nova_operator.ownership`` whether an existing object is the owner's (issue 26):
``PassContext.ensure`` and the pool's DaemonSet refuse with ``ChildOwnedByAnother`` otherwise.

A name the children's caches do not hold (they keep only the operator's labelled objects) is
usually absent, as every child of a new Nova is, and reading it first to learn that was one GET
per child (27 of a new Nova's 64 requests). ``create`` writes first instead: the same server-side
apply, carrying ``NO_VERSION`` as its resourceVersion precondition. The API server creates an
absent object from an apply and drops the precondition (there is no version to compare), and an
existing object of the name, whoever holds it, has a version that is never ``NO_VERSION``, so it
is refused with 409 Conflict and left untouched. Only then does the caller read it (and judge
whose it is). The object so made is the same as ``apply``'s create: its fields are owned by
``FIELD_MANAGER``'s Apply entry, so a later apply removes what the operator stops sending.

Children that are created once and never updated (a pool's immutable content-hash
ConfigMap, a Job, which is replaced when its pod-spec hash changes) cannot keep a removed
field: a change makes a new object.

Why a digest and not ``managedFields``: server-side apply already removes every field the
manager owned in its previous apply and no longer sends, so all a removal needs is that the
apply is *sent*. ``carries`` (a subset check) cannot see a removal: the live object still
holds the field. The digest of the last applied desired object, recorded on the child, can:
when the operator stops rendering a field the desired object changes, so its digest
differs from the recorded one and the apply goes out. Comparing against the manager's
``managedFields`` would do the same, but it needs the field-set encoding (``f:``, ``k:``
merge keys, ``v:`` set values, per-type list semantics) rebuilt from the desired object for
every kind, and the informer caches would have to keep ``managedFields`` (stripped today,
often the largest part of an object). The digest costs one short annotation per child and
no extra read: the cached object carries it. ``carries`` stays as the second half of the
test, so a value someone else changed on an operator-owned field is still put back.

Fields of other field managers are left alone: an annotation a user added, or a replica
count an HPA set on a Deployment whose ``replicas`` the operator does not render, are not
in the desired object, so neither the digest nor the apply touches them (server-side apply
removes only fields this manager owned). ``EXCLUSIVE`` is the one deliberate exception
(reconciler contract: derived Secrets are "rewritten wholesale on any drift (value change
or extra keys)"). The other direction, a field the operator stops sending but must not reset
(the API Deployment's ``replicas`` when autoscaling is turned on), is ``retain``: its live
value is handed to a manager of its own first, so the HPA takes over from the running count.

A child written by an operator version without the digest gets one apply on its first pass
(the annotation is missing), then the steady state is quiet again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from nova_operator.digests import keyed_digest
from nova_operator.kube.client import Kube
from nova_operator.kube.errors import Conflict, NotFound
from nova_operator.kube.owners import with_owner
from nova_operator.kube.resources import ResourceRef, ref_for
from nova_operator.kube.types import Object
from nova_operator.runtime.cache import object_version

FIELD_MANAGER = "nova-operator"
CONFLICT_RETRIES = 3
APPLIED_DIGEST: Final = "nova.openstack.c5c3.io/applied-digest"
RETAIN_MANAGER: Final = "nova-operator-retained"  # holds fields handed over by ``retain``
# A resourceVersion no object has (etcd's revisions are int64, and this is beyond every one the
# cluster will reach): an apply that carries it creates the object or is refused (``create``).
NO_VERSION: Final = str(2**63 - 1)
# (apiVersion, kind) -> top-level maps whose keys the operator owns exclusively
EXCLUSIVE: Final[Mapping[tuple[str, str], tuple[str, ...]]] = {("v1", "Secret"): ("data",)}


def carries(live: Any, desired: Any) -> bool:
    """True when ``live`` contains every field of ``desired`` with an equal value.

    An empty or null desired field counts as carried when the live object omits it (the
    API server drops empty maps and lists), so such fields do not cause a write per pass.
    Values are compared as JSON: render canonical forms (``"1"`` not ``"1000m"``).
    """
    if isinstance(desired, Mapping):
        if not isinstance(live, Mapping):
            return False
        return all(carries(live[k], v) if k in live else v in (None, {}, []) for k, v in desired.items())
    if isinstance(desired, list):
        if not isinstance(live, list) or len(live) != len(desired):
            return False
        return all(carries(lv, dv) for lv, dv in zip(live, desired, strict=True))
    if isinstance(desired, bool) or isinstance(live, bool):
        return live is desired
    return bool(live == desired)


class Carried:
    """Which live objects were found to carry which applied digest: ``carries`` once per version.

    A converged pass asks ``carries`` of every child it renders (a deep subset check: a third of a
    converged pass's CPU), and gets the same answer as the pass before whenever neither side
    changed: a resourceVersion names one content of the object (its UID one object), and the digest
    one desired body. So a True answer is kept per UID with the (resourceVersion, digest) it was
    given for (as a 128-bit BLAKE2b of the two: 16 bytes an object, not 200), and a later check of
    the same pair is answered from here; any change of either checks again. At most ``size`` objects
    are kept (the oldest go first).
    """

    def __init__(self, size: int = 8192) -> None:
        self._size = size
        self._seen: dict[str, bytes] = {}

    def check(self, live: Mapping[str, Any], body: Mapping[str, Any]) -> bool:
        meta = live.get("metadata") or {}
        uid, version = str(meta.get("uid") or ""), object_version(live)
        applied = str(((body.get("metadata") or {}).get("annotations") or {}).get(APPLIED_DIGEST) or "")
        if not (uid and version and applied):
            return carries(live, body)
        pair = hashlib.blake2b(f"{version}\0{applied}".encode(), digest_size=16).digest()
        if self._seen.get(uid) == pair:
            return True
        if not carries(live, body):
            return False
        self._seen.pop(uid, None)
        self._seen[uid] = pair
        if len(self._seen) > self._size:
            del self._seen[next(iter(self._seen))]
        return True

    def __len__(self) -> int:
        return len(self._seen)


def digest(body: Mapping[str, Any], key: bytes | None = None) -> str:
    """SHA-256 (hex) of ``body`` as canonical JSON, ``APPLIED_DIGEST`` left out; HMAC with ``key``."""
    meta = dict(body.get("metadata") or {})
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != APPLIED_DIGEST}
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    canonical = json.dumps({**body, "metadata": meta}, sort_keys=True, separators=(",", ":"))
    if key is not None:
        return keyed_digest(canonical, key)
    return hashlib.sha256(canonical.encode()).hexdigest()


def stamped(body: Mapping[str, Any], key: bytes | None = None) -> Object:
    """A copy of ``body`` whose annotations record its digest (keyed with ``key`` when given)."""
    out: Object = dict(body)
    meta = dict(out.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), APPLIED_DIGEST: digest(body, key)}
    out["metadata"] = meta
    return out


def foreign_keys(live: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, list[str]]:
    """Per ``EXCLUSIVE`` map of the kind: keys ``live`` has that ``desired`` does not."""
    found: dict[str, list[str]] = {}
    for field in EXCLUSIVE.get((str(desired.get("apiVersion")), str(desired.get("kind"))), ()):
        want = desired.get(field) or {}
        extra = sorted(k for k in live.get(field) or {} if k not in want)
        if extra:
            found[field] = extra
    return found


async def _drop_foreign_keys(
    kube: Kube, ref: ResourceRef, live: Mapping[str, Any], extra: Mapping[str, list[str]]
) -> tuple[Object, bool]:
    """One JSON merge patch nulling ``extra``; returns the answer and whether it had ``live``'s basis.

    Sent with ``live``'s resourceVersion as a precondition; refused (the cache lagged), it goes out
    again without one (nulling keys is idempotent).
    """
    meta = live["metadata"]
    patch: Object = {field: dict.fromkeys(keys) for field, keys in extra.items()}
    name, namespace = meta["name"], meta.get("namespace")
    if version := object_version(live):
        guarded = {**patch, "metadata": {"resourceVersion": version}}
        with contextlib.suppress(Conflict):
            return await kube.patch(ref, name, guarded, namespace, field_manager=FIELD_MANAGER), True
    return await kube.patch(ref, name, patch, namespace, field_manager=FIELD_MANAGER), False


def only_operator_wrote(obj: Mapping[str, Any]) -> bool:
    """Whether every ``managedFields`` entry of ``obj`` is one of the operator's managers."""
    entries = (obj.get("metadata") or {}).get("managedFields") or []
    return all(entry.get("manager") in (FIELD_MANAGER, RETAIN_MANAGER) for entry in entries)


def _at(obj: Mapping[str, Any] | None, path: Sequence[str]) -> Any:
    node: Any = obj
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node


async def _retain(
    kube: Kube,
    ref: ResourceRef,
    cached: Mapping[str, Any],
    body: Mapping[str, Any],
    paths: Sequence[Sequence[str]],
) -> Object | None:
    """Hand each of ``paths`` that ``body`` no longer sends to ``RETAIN_MANAGER``, at its live value.

    Server-side apply removes a field its last applier stops sending, and a removed
    ``spec.replicas`` defaults to 1: turning autoscaling on would scale a Deployment down to
    one pod until the HPA acts. Applied first, with ``force`` off, under a manager of its own,
    the live value stays (shared with nobody else, or refused with 409 when another manager
    such as the HPA owns the field already, which is all the hand-over is for).
    """
    kept: Object = {}
    for path in paths:
        value = _at(cached, path)
        if value is None or _at(body, path) is not None:
            continue
        node = kept
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    if not kept:
        return None
    meta = body["metadata"]
    partial = {
        "apiVersion": body["apiVersion"],
        "kind": body["kind"],
        "metadata": {"name": meta["name"]},
        **kept,
    }
    if meta.get("namespace"):
        partial["metadata"]["namespace"] = meta["namespace"]
    try:
        return await kube.apply(
            ref, partial, field_manager=RETAIN_MANAGER, namespace=meta.get("namespace"), force=False
        )
    except Conflict:
        return None  # another manager holds the field: nothing changed


async def apply(
    kube: Kube,
    desired: Mapping[str, Any],
    *,
    owner: Mapping[str, Any] | None = None,
    cached: Mapping[str, Any] | None = None,
    ref: ResourceRef | None = None,
    force: bool = True,
    retain: Sequence[Sequence[str]] = (),
    own: Callable[[Object], None] | None = None,
    digest_key: bytes | None = None,
    carried: Carried | None = None,
) -> Object:
    """Make the object match ``desired`` (removed fields included); return the live object.

    ``retain``: paths the operator may stop sending without resetting them (see ``_retain``).
    ``own``: called with each answer that is this call's own write (see the module docstring).
    ``digest_key``: key the ``APPLIED_DIGEST`` (required for a Secret that carries data).
    ``carried``: remembers which versions were found to carry which digest (``Carried``).
    """
    if desired.get("kind") == "Secret" and desired.get("data") and not digest_key:
        raise ValueError("a Secret's applied digest must be keyed (digest_key)")
    body = stamped(with_owner(desired, owner) if owner is not None else desired, digest_key)
    ref = ref or ref_for(body["apiVersion"], body["kind"])
    basis = object_version(cached) if cached is not None else ""  # "": none to check against
    if cached is not None and (extra := foreign_keys(cached, body)):
        patched, based = await _drop_foreign_keys(kube, ref, cached, extra)
        if based and own is not None and object_version(patched) != basis:
            own(patched)
        basis = object_version(patched) if based else ""
        cached = patched
    if cached is not None and (carried.check(cached, body) if carried is not None else carries(cached, body)):
        return dict(cached)
    if cached is not None and retain:
        handed = await _retain(kube, ref, cached, body, retain)
        if handed is not None and object_version(handed) != basis:
            basis = ""  # changed by the hand-over, or the cache lagged: no basis left to check
    namespace = body.get("metadata", {}).get("namespace")
    if basis:
        guarded = {**body, "metadata": {**body["metadata"], "resourceVersion": basis}}
        try:
            live = await kube.apply(
                ref, guarded, field_manager=FIELD_MANAGER, namespace=namespace, force=force
            )
        except Conflict:
            pass  # the cache lagged the server: sent again below, and not taken for our own
        else:
            if own is not None and object_version(live) != basis:
                own(live)
            return live
    for attempt in range(CONFLICT_RETRIES + 1):
        try:
            live = await kube.apply(ref, body, field_manager=FIELD_MANAGER, namespace=namespace, force=force)
        except Conflict:
            if attempt == CONFLICT_RETRIES or not force:
                raise
            await asyncio.sleep(0.05 * 2**attempt)
        else:
            if own is not None and cached is None and only_operator_wrote(live):
                own(live)  # a create on an absent basis: nothing but ours in it
            return live
    raise AssertionError("unreachable")


async def create(
    kube: Kube,
    desired: Mapping[str, Any],
    *,
    owner: Mapping[str, Any] | None = None,
    ref: ResourceRef | None = None,
    own: Callable[[Object], None] | None = None,
    digest_key: bytes | None = None,
) -> Object | None:
    """Create ``desired`` as ``apply`` would (owner, digest); None, and nothing written, when an
    object of that name exists (whoever holds it: the caller reads it and decides).

    One request for an absent object, where a read then ``apply`` takes two (module docstring).
    """
    if desired.get("kind") == "Secret" and desired.get("data") and not digest_key:
        raise ValueError("a Secret's applied digest must be keyed (digest_key)")
    body = stamped(with_owner(desired, owner) if owner is not None else desired, digest_key)
    ref = ref or ref_for(body["apiVersion"], body["kind"])
    guarded = {**body, "metadata": {**body["metadata"], "resourceVersion": NO_VERSION}}
    try:
        live = await kube.apply(
            ref, guarded, field_manager=FIELD_MANAGER, namespace=body["metadata"].get("namespace")
        )
    except Conflict:
        return None
    if own is not None and only_operator_wrote(live):
        own(live)
    return live


async def apply_status(
    kube: Kube, obj: Mapping[str, Any], status: Mapping[str, Any], *, ref: ResourceRef | None = None
) -> Object | None:
    """Apply ``status`` to ``obj``'s status subresource unless ``obj`` already carries it."""
    if carries(obj.get("status") or {}, status):
        return None
    ref = ref or ref_for(obj["apiVersion"], obj["kind"])
    meta = obj["metadata"]
    body = {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "metadata": {
            "name": meta["name"],
            **({"namespace": meta["namespace"]} if meta.get("namespace") else {}),
        },
        "status": dict(status),
    }
    return await kube.apply(
        ref, body, field_manager=FIELD_MANAGER, namespace=meta.get("namespace"), subresource="status"
    )


async def delete_if_present(
    kube: Kube, ref: ResourceRef, name: str, namespace: str | None = None, *, uid: str | None = None
) -> bool:
    """Delete; False when it was already gone."""
    try:
        await kube.delete(ref, name, namespace, uid=uid)
    except NotFound:
        return False
    return True
