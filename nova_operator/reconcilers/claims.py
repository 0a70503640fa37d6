"""Exactly-once recording of terminal Jobs (reconciler.md §14.2), for both controllers.

The per-CR Job metrics, the cells report and the upgrade check event must be recorded once per Job,
across passes and restarts: the UID of the last recorded Job is kept in an annotation on the CR,
written with the pass's resourceVersion as an optimistic-lock precondition *before* anything is
recorded. A failed write records nothing and says so in a Warning; the next pass retries.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from nova_operator.decisions.readiness import JobState, job_duration_seconds, job_state
from nova_operator.kube.client import Kube
from nova_operator.kube.errors import Conflict, KubeError, NotFound
from nova_operator.kube.resources import ResourceRef
from nova_operator.kube.types import Object
from nova_operator.runtime.events import EventSink

JOB_UID_ANNOTATION: Final = "cobaltcore.c5c3.io/last-{suffix}-job-uid"


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
