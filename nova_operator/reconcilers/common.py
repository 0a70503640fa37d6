"""Generic parts of one pass, shared by the Nova and NovaCompute controllers (reconciler.md §2, §8.4, §14.2).

Both controllers read their CR (NotFound ends the pass), ensure a finalizer (the NovaCompute
controller requeues 1 s after adding it, the Nova controller's pass goes on), snapshot the status,
run their pipeline, and write the status once at the end, only when it changed semantically, with
``observedGeneration`` stamped and ``Ready`` recomputed from a declared input list. Nothing here
knows a kind: callers pass the ``ResourceRef``, the finalizer name, the Ready inputs and the event
recorder.

The terminal-Job recorder gives the per-CR Job metrics (and the cells report, and the upgrade
check event) exactly-once semantics across passes and restarts: the UID of the last recorded
Job is kept in an annotation on the CR, written with the pass's resourceVersion as an
optimistic-lock precondition *before* anything is recorded.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal, Protocol, TypeVar

from nova_operator import conditions
from nova_operator.kube.client import Kube
from nova_operator.kube.errors import Conflict, KubeError, NotFound
from nova_operator.kube.resources import PRIORITY_CLASSES, ResourceRef
from nova_operator.readiness import JobState, job_duration_seconds, job_state
from nova_operator.runtime.cache import Cache, copy_object, object_version
from nova_operator.runtime.request import Request

Object = dict[str, Any]
Clock = Callable[[], datetime]
_R = TypeVar("_R")


def secret_ref_fields(nova: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(field, name)`` of every Secret a Nova's spec names, sorted (the Secrets it may make us read).

    The same list drives the Secrets watch's index and the ``--secret-ref-label`` gate.
    """
    spec = nova.get("spec") or {}
    found: list[tuple[str, str]] = []

    def add(field: str, ref: Any) -> None:
        if isinstance(ref, Mapping) and ref.get("name"):
            found.append((f"spec.{field}", str(ref["name"])))

    for block_name in ("apiDatabase", "database"):
        block = spec.get(block_name) or {}
        add(f"{block_name}.secretRef", block.get("secretRef"))
        tls = block.get("tls") or {}
        if tls.get("mode") not in (None, "disabled"):
            add(f"{block_name}.tls.caBundleSecretRef", tls.get("caBundleSecretRef"))
            add(f"{block_name}.tls.clientCertSecretRef", tls.get("clientCertSecretRef"))
    add("serviceUser.secretRef", (spec.get("serviceUser") or {}).get("secretRef"))
    add("metadata.sharedSecretRef", (spec.get("metadata") or {}).get("sharedSecretRef"))
    messaging = spec.get("messaging") or {}
    add("messaging.secretRef", messaging.get("secretRef"))
    add("messaging.tls.caBundleSecretRef", (messaging.get("tls") or {}).get("caBundleSecretRef"))
    add("remoteCompute.transportURLSecretRef", (spec.get("remoteCompute") or {}).get("transportURLSecretRef"))
    add("secretConfig.secretRef", (spec.get("secretConfig") or {}).get("secretRef"))
    return sorted(set(found))


class EventSink(Protocol):
    """What the pass helpers need of ``nova_operator.events.EventRecorder``."""

    async def emit(
        self, obj: Mapping[str, Any], type_: Literal["Normal", "Warning"], reason: str, message: str
    ) -> None: ...


JOB_UID_ANNOTATION: Final = "cobaltcore.c5c3.io/last-{suffix}-job-uid"


def utcnow() -> datetime:
    return datetime.now(UTC)


# -- read, finalizers ------------------------------------------------------------------------


async def read_object(kube: Kube, ref: ResourceRef, namespace: str, name: str) -> Object | None:
    """The CR as the API server has it now; None when it is gone (the pass ends without error)."""
    try:
        return await kube.get(ref, name, namespace)
    except NotFound:
        return None


class OwnReads:
    """A controller's own CR, read from its informer cache: no request on a pass, except right after a write.

    The cache returns a copy (the pass may change it freely) and lags the API server by the
    watch's delay. That lag only matters after the controller's own write to the CR: a pass
    started before the watch delivered that write would work from the object as it was before
    it, e.g. add the finalizer again, snapshot a status it has already replaced (a second,
    redundant status write, a transition event told twice), or retry a Job-recorder annotation.
    None of that corrupts anything (every metadata write carries the resourceVersion it read as
    a precondition, so a stale one ends in a Conflict and a retried pass, never in a lost or
    doubled record), but it is noise. So: after a pass that changed the CR's resourceVersion
    (our own finalizer, annotation or status write) the reader remembers the version the write
    returned; the next pass uses the cache only when the cache shows exactly that version, else
    it GETs (and remembers what the GET returned, until the cache catches up). Registered as a
    handler of the CR's informer, it learns when the watch delivered that version, so a later
    change by somebody else is read from the cache too (resourceVersions are only compared for
    equality, never ordered); a write whose echo the cache holds already when the pass ends is not
    waited for (the watch can deliver it before the pass has finished). A pass that
    raised may have written without learning the version: the next pass GETs. A change by
    anybody else reaches the cache through the watch, which also wakes the pass, so a converged
    CR is read with no request at all. Without a cache for the CR's namespace every read is a GET.
    """

    def __init__(self, kube: Kube, ref: ResourceRef, cache: Cache | None) -> None:
        self.kube = kube
        self.ref = ref
        self.cache = cache
        self._fresh: dict[tuple[str, str], str | None] = {}  # key -> the version to expect; None: GET

    async def read(self, namespace: str, name: str) -> Object | None:
        key = (namespace, name)
        cache = self.cache
        if cache is None or not cache.covers(namespace):
            return await read_object(self.kube, self.ref, namespace, name)
        obj = cache.get(name, namespace)
        if key not in self._fresh:
            return obj
        expected = self._fresh[key]
        if obj is not None and expected is not None and object_version(obj) == expected:
            del self._fresh[key]  # the cache has caught up with our write
            return obj
        live = await read_object(self.kube, self.ref, namespace, name)
        if live is None or cache.resource_version(Request(namespace, name)) == object_version(live):
            self._fresh.pop(key, None)  # gone, or the watch delivered what the GET read while it ran
        else:
            self._fresh[key] = object_version(live)
        return live

    async def run_pass(
        self, namespace: str, name: str, body: Callable[[Object], Awaitable[_R]], gone: _R
    ) -> _R:
        """Read the CR, run ``body`` on it (``gone`` when there is none) and record the outcome."""
        obj = await self.read(namespace, name)
        if obj is None:
            return gone
        read_version = object_version(obj)
        failed = True
        try:
            outcome = await body(obj)
            failed = False
            return outcome
        finally:
            self.after_pass(obj, read_version, failed=failed)

    def after_pass(self, obj: Mapping[str, Any], read_version: str, *, failed: bool = False) -> None:
        """Record the pass's outcome: ``obj`` as the pass left it, ``read_version`` what it started from."""
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if self.cache is None or not self.cache.covers(key[0]):
            return
        gone = bool(meta.get("deletionTimestamp")) and not meta.get("finalizers")
        if gone:  # the last finalizer released: the CR is going away, nothing to wait for
            self._fresh.pop(key, None)
        elif failed:
            self._fresh[key] = None
        elif object_version(obj) != read_version:
            if self.cache.resource_version(Request(key[0], key[1])) == object_version(obj):
                self._fresh.pop(key, None)  # the watch delivered our write before the pass ended
            else:
                self._fresh[key] = object_version(obj)

    # -- the CR's informer (register with ``informer.add_handler(reads)``) ------------------

    def _seen(self, obj: Mapping[str, Any]) -> None:
        """The cache now holds ``obj``: once it shows the version we wrote, every later one is newer."""
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if key in self._fresh and self._fresh[key] == object_version(obj):
            del self._fresh[key]

    def on_add(self, obj: Object) -> None:
        self._seen(obj)

    def on_update(self, old: Object, new: Object) -> None:
        self._seen(new)

    def on_delete(self, obj: Object) -> None:
        meta = obj.get("metadata") or {}
        self._fresh.pop((str(meta.get("namespace") or ""), str(meta.get("name") or "")), None)

    def __len__(self) -> int:
        return len(self._fresh)


def has_finalizer(obj: Mapping[str, Any], finalizer: str) -> bool:
    return finalizer in ((obj.get("metadata") or {}).get("finalizers") or [])


async def _set_finalizers(kube: Kube, ref: ResourceRef, obj: Object, finalizers: list[str]) -> None:
    meta = obj["metadata"]
    patch = {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}}
    live = await kube.patch(ref, meta["name"], patch, meta.get("namespace"))
    meta["finalizers"] = finalizers
    meta["resourceVersion"] = live["metadata"]["resourceVersion"]


async def ensure_finalizer(kube: Kube, ref: ResourceRef, obj: Object, finalizer: str) -> bool:
    """Add ``finalizer`` (optimistic lock on the pass's resourceVersion); True when it had to be added.

    ``obj`` then carries the persisted finalizer and resourceVersion (what the patch answered), so a
    pass may go on with the work (the Nova controller) or requeue and stop (the NovaCompute one).
    """
    if has_finalizer(obj, finalizer):
        return False
    current = list((obj.get("metadata") or {}).get("finalizers") or [])
    await _set_finalizers(kube, ref, obj, [*current, finalizer])
    return True


async def remove_finalizer(kube: Kube, ref: ResourceRef, obj: Object, finalizer: str) -> bool:
    """Release ``finalizer``; True when it was present. A CR already gone counts as released."""
    if not has_finalizer(obj, finalizer):
        return False
    current = [f for f in obj["metadata"].get("finalizers") or [] if f != finalizer]
    with contextlib.suppress(NotFound):
        await _set_finalizers(kube, ref, obj, current)
    return True


# -- status ----------------------------------------------------------------------------------


def snapshot_status(obj: Mapping[str, Any]) -> Object:
    """A deep copy of ``status`` taken before the pipeline runs (empty dict when there is none)."""
    status = obj.get("status")
    return copy_object(dict(status)) if isinstance(status, Mapping) else {}


def finish_status(status: Object, *, ready_inputs: Sequence[str], generation: int, now: datetime) -> Object:
    """Recompute ``Ready`` from the conditions present now and stamp ``observedGeneration`` (in place)."""
    conds: list[conditions.Condition] = status.setdefault("conditions", [])
    conditions.set_ready(conds, ready_inputs, generation=generation, now=now)
    status["observedGeneration"] = generation
    return status


def keep_transition_times(status: Mapping[str, Any], snapshot: Mapping[str, Any]) -> None:
    """A condition whose status ends the pass where it started keeps its ``lastTransitionTime``.

    Steps may set one condition more than once in a pass (the Secrets step sets ``SecretsReady``
    True, a later step marks it False); only the pass's net change is a transition.
    """
    before = {c.get("type"): c for c in snapshot.get("conditions") or []}
    for cond in status.get("conditions") or []:
        old = before.get(cond.get("type"))
        if old is not None and old.get("status") == cond.get("status") and "lastTransitionTime" in old:
            cond["lastTransitionTime"] = old["lastTransitionTime"]


def status_patch(snapshot: Mapping[str, Any], status: Mapping[str, Any]) -> Object:
    """A merge patch turning ``snapshot`` into ``status`` at the top level (removed fields become null)."""
    patch: Object = {k: v for k, v in status.items() if snapshot.get(k) != v}
    for key in snapshot:
        if key not in status:
            patch[key] = None
    return patch


async def write_status(
    kube: Kube,
    ref: ResourceRef,
    obj: Object,
    status: Object,
    snapshot: Mapping[str, Any],
    *,
    ready_inputs: Sequence[str],
    generation: int,
    now: datetime,
) -> bool:
    """Finish ``status`` and write it when it differs from ``snapshot``; True when a request was sent.

    A converged pass finds nothing changed and sends nothing (no watch event, no resourceVersion churn).
    """
    finish_status(status, ready_inputs=ready_inputs, generation=generation, now=now)
    keep_transition_times(status, snapshot)
    if status == snapshot:
        return False
    meta = obj["metadata"]
    patch = {"status": status_patch(snapshot, status)}
    live = await kube.patch_status(ref, meta["name"], patch, meta.get("namespace"))
    meta["resourceVersion"] = live["metadata"]["resourceVersion"]
    obj["status"] = status
    return True


# -- exactly-once recording of terminal Jobs -------------------------------------------------


def job_uid_annotation(suffix: str) -> str:
    """``cobaltcore.c5c3.io/last-<suffix>-job-uid`` (db-sync, db-expand, …, db-archive, db-sync-cells)."""
    return JOB_UID_ANNOTATION.format(suffix=suffix)


def deferral_message(suffix: str) -> str:
    return f"patching the last-observed {suffix} Job UID failed; emission deferred to the next reconcile"


Record = Callable[[JobState, float], Awaitable[None] | None]


@dataclass(frozen=True)
class Claim:
    """One exactly-once recorder of a terminal Job: its annotation suffix, what it records, its deferral."""

    suffix: str
    record: Record
    deferral_reason: str


async def record_terminal_claims(
    kube: Kube,
    ref: ResourceRef,
    obj: Object,
    job: Mapping[str, Any] | None,
    claims: Sequence[Claim],
    events: EventSink,
    wrote: Callable[[Object], None] | None = None,
) -> dict[str, bool]:
    """Each claim's ``record(state, seconds)`` once per terminal Job UID; per suffix, whether it ran now.

    Nothing happens unless ``job`` is terminal. A claim whose suffix annotation on ``obj`` already
    holds the Job's UID does nothing. The others' annotations are patched first, all in one patch,
    with the resourceVersion the pass read as a precondition; only on success is each ``record``
    called (in ``claims`` order) and the new resourceVersion and annotations copied into ``obj`` (so
    the final status write does not conflict). On patch failure nothing is recorded and each
    claim's ``deferral_reason`` is emitted as a Warning; the next pass retries. One patch for the
    recorders of one Job (db-sync's metric and its cells report): each suffix still records once.
    ``wrote`` receives the CR as the claim patch returned it (``runtime.echoes``).
    """
    claimed = {c.suffix: False for c in claims}
    if job is None:
        return claimed
    state = job_state(job)
    if state is JobState.RUNNING:
        return claimed
    uid = str((job.get("metadata") or {}).get("uid") or "")
    meta = obj["metadata"]
    annotations = meta.get("annotations") or {}
    due = [c for c in claims if uid and annotations.get(job_uid_annotation(c.suffix)) != uid]
    if not due:
        return claimed
    marks = {job_uid_annotation(c.suffix): uid for c in due}
    patch = {"metadata": {"annotations": marks, "resourceVersion": meta["resourceVersion"]}}
    try:
        live = await kube.patch(ref, meta["name"], patch, meta.get("namespace"))
    except (Conflict, NotFound, KubeError):
        for c in due:
            await events.emit(obj, "Warning", c.deferral_reason, deferral_message(c.suffix))
        return claimed
    if wrote is not None:
        wrote(live)
    meta["resourceVersion"] = live["metadata"]["resourceVersion"]
    meta["annotations"] = {**annotations, **marks}
    seconds = job_duration_seconds(job) or 0.0
    for c in due:
        outcome = c.record(state, seconds)
        if outcome is not None:
            await outcome
        claimed[c.suffix] = True
    return claimed


class ClaimingPass(Protocol):
    """What ``record_claims`` needs of a pass: its client, its CR, its events and its write record."""

    kube: Kube
    obj: Object
    events: EventSink

    def wrote(self, obj: Mapping[str, Any]) -> None: ...


async def record_claims(
    p: ClaimingPass, ref: ResourceRef, job: Mapping[str, Any] | None, *claims: Claim
) -> dict[str, bool]:
    """``record_terminal_claims`` for a pass's CR of kind ``ref``; the claim patch is recorded as the
    pass's own write (``runtime.echoes``), so its watch echo wakes no second pass."""
    return await record_terminal_claims(p.kube, ref, p.obj, job, claims, p.events, wrote=p.wrote)


# -- a named PriorityClass must exist (nova-crd.md §6) ---------------------------------------------


def _priority_class_of(obj: Mapping[str, Any] | None) -> str:
    """``priorityClassName`` of a Deployment's or Job's pod template, or of a CronJob's job template."""
    spec: Any = (obj or {}).get("spec") or {}
    if "jobTemplate" in spec:
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    pod = ((spec.get("template") or {}).get("spec")) or {}
    return str(pod.get("priorityClassName") or "")


async def missing_priority_class(
    kube: Kube, live: Mapping[str, Any] | None, desired: Mapping[str, Any], field: str
) -> str | None:
    """The message when ``desired`` (a Deployment, Job or CronJob) names a PriorityClass that does not exist.

    The upstream webhook checked this at admission; without a webhook a workload step checks
    it before it applies a pod template whose class the ``live`` Deployment does not run with
    yet, so a missing class never rolls pods the API server refuses to create and the running
    pods keep their template. One GET only while the class changes: a converged pass sends
    none. A lookup failing otherwise than NotFound (say, a 403) is no verdict: None.
    """
    wanted = _priority_class_of(desired)
    if not wanted or _priority_class_of(live) == wanted:
        return None
    try:
        await kube.get(PRIORITY_CLASSES, wanted)
    except NotFound:
        name = desired["metadata"]["name"]
        kept = "keeps its current pods" if desired["kind"] == "Deployment" else "is not written"
        return f"{field}: PriorityClass {wanted} does not exist; {desired['kind']} {name} {kept}"
    except KubeError:
        return None
    return None


def jobs_priority_field(jobs_class: str | None) -> str:
    """Which spec field names the Jobs' PriorityClass: ``spec.jobs`` when it sets one, else the API's."""
    return (
        "spec.jobs.priorityClassName" if jobs_class is not None else "spec.api.deployment.priorityClassName"
    )
