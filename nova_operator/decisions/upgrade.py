"""The release upgrade as a pure state machine (upgrade-and-cells.md §1.3, §2-§9).

Nothing here talks to the API server. The Database step hands in what it sees (``View``: the
spec release, the image the spec resolves to, the three status fields) and gets back a
``Decision``: the new status fields, the ``DatabaseReady`` (or, for the flip, the
``DeploymentReady``) condition, the events to emit, what to do with the phase Jobs and the
result of the step. ``nova_operator.reconcilers.nova.upgrade`` carries the decision out.

The order of §2, evaluated on every pass of the Database step (after its gates):

1. a phase is set: lockstep check unless the spec release is back at ``installedRelease``;
   then abort (spec release == installed), ``UpgradeTargetChanged`` (spec release != target),
   or the handler of the current phase;
2. lockstep check (``ImageReleaseMismatch``, requeue 30 s);
3. the pair needs an upgrade: initiation (with its validation order, §3.1);
4. otherwise the steady-state db-sync (``Action.STEADY``, not carried out here).

A Job phase is decided in two halves: ``decide`` names the Job to run (``Action.RUN_JOB``),
the caller runs it with the shared Job mechanics (reconciler.md §5.6) and hands the outcome
to ``after_job`` (§3.2's tables). ``check_report`` classifies the pre-flight message (§4);
``rollout_gate`` and ``flip`` are the ``RollingUpdate`` -> ``Contracting`` gate of the API
step (§6.1).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from nova_operator import conditions, intervals
from nova_operator.decisions import releases

EXPANDING: Final = "Expanding"
MIGRATING: Final = "Migrating"
ROLLING_UPDATE: Final = "RollingUpdate"
CONTRACTING: Final = "Contracting"
PHASES: Final = (EXPANDING, MIGRATING, ROLLING_UPDATE, CONTRACTING)

DB_EXPAND: Final = "db-expand"
DB_MIGRATE: Final = "db-migrate"
DB_CONTRACT: Final = "db-contract"
DB_EXPAND_CHECK: Final = "db-expand-check"
PHASE_JOB_SUFFIXES: Final = (DB_EXPAND, DB_MIGRATE, DB_CONTRACT)
"""Deleted by an abort (db-sync and any schema-check Job are not)."""

# -- DatabaseReady reasons (reconciler.md §8.1) ------------------------------------------------
DATABASE_SYNCED: Final = "DatabaseSynced"
IMAGE_RELEASE_MISMATCH: Final = "ImageReleaseMismatch"
VERSION_PARSE_ERROR: Final = "VersionParseError"
DOWNGRADE_NOT_SUPPORTED: Final = "DowngradeNotSupported"
UPGRADE_PATH_INVALID: Final = "UpgradePathInvalid"
UPGRADE_TARGET_CHANGED: Final = "UpgradeTargetChanged"
UPGRADE_HELD_BY_POLICY: Final = "UpgradeHeldByPolicy"
EXPAND_IN_PROGRESS: Final = "ExpandInProgress"
MIGRATE_IN_PROGRESS: Final = "MigrateInProgress"
UPGRADE_ROLLING_UPDATE: Final = "UpgradeRollingUpdate"
CONTRACT_IN_PROGRESS: Final = "ContractInProgress"
EXPAND_FAILED: Final = "ExpandFailed"
MIGRATE_FAILED: Final = "MigrateFailed"
CONTRACT_FAILED: Final = "ContractFailed"

# -- DeploymentReady reasons (the flip, reconciler.md §4.8) -----------------------------------
DEPLOYMENT_READY: Final = "DeploymentReady"
WAITING_FOR_DEPLOYMENT: Final = "WaitingForDeployment"

# -- events (reconciler.md §13.1) --------------------------------------------------------------
UPGRADE_INITIATED: Final = "UpgradeInitiated"
EXPAND_COMPLETE: Final = "ExpandComplete"
MIGRATE_COMPLETE: Final = "MigrateComplete"
DEPLOYMENT_ROLLOUT_COMPLETE: Final = "DeploymentRolloutComplete"
UPGRADE_COMPLETE: Final = "UpgradeComplete"
UPGRADE_ABORTED: Final = "UpgradeAborted"
UPGRADE_CHECK_COMPLETED: Final = "UpgradeCheckCompleted"
UPGRADE_CHECK_WARNINGS: Final = "UpgradeCheckWarnings"
UPGRADE_CHECK_DEFERRED: Final = "UpgradeCheckEventEmissionDeferred"

CHECK_UNAVAILABLE: Final = "exit code unavailable"
_CHECK_CLEAN: Final = re.compile(r"(?:^|\s)exit 0$")

EventType = Literal["Normal", "Warning"]


@dataclass(frozen=True)
class _PhaseSpec:
    job: str  # the Job suffix
    verb: str  # "Expand", "Migrate", "Contract": reasons, events and messages
    in_progress: str
    failed: str


_JOB_PHASES: Final = {
    EXPANDING: _PhaseSpec(DB_EXPAND, "Expand", EXPAND_IN_PROGRESS, EXPAND_FAILED),
    MIGRATING: _PhaseSpec(DB_MIGRATE, "Migrate", MIGRATE_IN_PROGRESS, MIGRATE_FAILED),
    CONTRACTING: _PhaseSpec(DB_CONTRACT, "Contract", CONTRACT_IN_PROGRESS, CONTRACT_FAILED),
}


class Action(enum.Enum):
    NONE = "none"  # nothing beyond the decision itself
    STEADY = "steady"  # not an upgrade: the caller runs the steady-state {name}-db-sync Job
    RUN_JOB = "run-job"  # run ``Decision.job`` and hand its outcome to ``after_job``
    DELETE_PHASE_JOBS = "delete-phase-jobs"  # the abort: delete the three phase Jobs *before* the status


class Next(enum.Enum):
    NOW = "now"  # immediate requeue
    AFTER = "after"  # requeue after ``Decision.requeue_after`` seconds
    ZERO = "zero"  # the pipeline continues
    ERROR = "error"  # the step fails (work-queue backoff); ``Decision.error`` names the reason


class JobOutcome(enum.Enum):
    """What "run the Job" reported this pass (reconciler.md §5.6)."""

    NOT_DONE = "not-done"  # just created, recreated on a template change, running, suspended, pending
    DONE = "done"  # complete with the current template
    FAILED = "failed"  # failed with the current template: permanent


@dataclass(frozen=True)
class View:
    """What the decision depends on. Empty strings mean unset."""

    spec_release: str
    image: str  # the reference ``spec.image`` resolves to (``repo:tag`` or ``repo@digest``)
    installed: str = ""
    target: str = ""
    phase: str = ""
    # what the target release refuses in the spec (spec.policy rules it does not register): while
    # there is any, an upgrade does not start (issue 38 item 3)
    held: tuple[str, ...] = ()


@dataclass(frozen=True)
class Event:
    type: EventType
    reason: str
    message: str


@dataclass(frozen=True)
class Condition:
    type: str
    status: bool
    reason: str
    message: str


@dataclass(frozen=True)
class Decision:
    """The outcome of one pass of the flow; ``installed``/``target``/``phase`` are the new status values."""

    installed: str
    target: str
    phase: str
    next: Next
    action: Action = Action.NONE
    job: str | None = None  # the phase Job suffix for ``Action.RUN_JOB``
    condition: Condition | None = None
    events: tuple[Event, ...] = ()
    requeue_after: float | None = None
    error: str | None = None  # the reason when ``next`` is ERROR

    @property
    def result(self) -> float | Literal["error"] | None:
        """Seconds to requeue after (0 = immediately), None for a zero result, ``"error"`` for an error."""
        if self.next is Next.ERROR:
            return "error"
        if self.next is Next.NOW:
            return 0.0
        if self.next is Next.AFTER:
            return self.requeue_after
        return None


def _arrow(frm: str, to: str) -> str:
    return f"{frm} → {to}"


def _keep(
    view: View,
    next_: Next,
    *,
    action: Action = Action.NONE,
    job: str | None = None,
    condition: Condition | None = None,
    events: tuple[Event, ...] = (),
    requeue_after: float | None = None,
    error: str | None = None,
) -> Decision:
    """A decision that leaves the three status fields as they are."""
    return Decision(
        installed=view.installed,
        target=view.target,
        phase=view.phase,
        next=next_,
        action=action,
        job=job,
        condition=condition,
        events=events,
        requeue_after=requeue_after,
        error=error,
    )


def _db(status: bool, reason: str, message: str) -> Condition:
    return Condition(conditions.DATABASE_READY, status, reason, message)


def _refuse(view: View, reason: str, message: str) -> Decision:
    """A blocking refusal: DatabaseReady False, a Warning of the same reason, an error (§7)."""
    return _keep(
        view,
        Next.ERROR,
        condition=_db(False, reason, message),
        events=(Event("Warning", reason, message),),
        error=reason,
    )


# -- §1.3 the lockstep check --------------------------------------------------------------------


def lockstep_problem(spec_release: str, image: str) -> str | None:
    """The mismatch message when a release-shaped tag names another release than the spec; else None."""
    tag = releases.image_tag(image)
    if not releases.lockstep_mismatch(image_tag_value=tag, release=spec_release):
        return None
    return (
        f"image tag {tag} names release {releases.base(tag or '')}, but spec.openStackRelease is "
        f"{spec_release}: bump spec.image together with the release"
    )


def _mismatch(view: View, problem: str) -> Decision:
    return _keep(
        view,
        Next.AFTER,
        condition=_db(False, IMAGE_RELEASE_MISMATCH, problem),
        requeue_after=intervals.DATABASE_WAIT,
    )


# -- §2 the decision of the Database step -------------------------------------------------------


def decide(view: View) -> Decision:
    """§2 in order; ``Action.STEADY`` hands the pass to the steady-state db-sync."""
    if view.phase:
        aborting = view.spec_release == view.installed
        if not aborting and (problem := lockstep_problem(view.spec_release, view.image)) is not None:
            return _mismatch(view, problem)
        if aborting:
            return abort(view)
        if view.spec_release != view.target:
            return target_changed(view)
        return phase_handler(view)
    if (problem := lockstep_problem(view.spec_release, view.image)) is not None:
        return _mismatch(view, problem)
    if releases.needs_upgrade(view.installed, view.spec_release):
        return initiate(view)
    return _keep(view, Next.ZERO, action=Action.STEADY)


def initiate(view: View) -> Decision:
    """§3.1: validate installed, then target, then direction, then the step; accept into Expanding."""
    frm, to = view.installed, view.spec_release
    if releases.base(frm) is None:
        return _refuse(
            view, VERSION_PARSE_ERROR, f"installed release {frm!r} is not a release of the form YYYY.N"
        )
    if releases.base(to) is None:
        return _refuse(
            view,
            VERSION_PARSE_ERROR,
            f"target release {to!r} (spec.openStackRelease) is not a release of the form YYYY.N",
        )
    transition = releases.classify(frm, to)
    if transition is releases.Transition.DOWNGRADE:
        return _refuse(view, DOWNGRADE_NOT_SUPPORTED, f"downgrade from {frm} to {to} not supported")
    if transition is not releases.Transition.UPGRADE:
        following = releases.parse(frm).next()
        return _refuse(
            view,
            UPGRADE_PATH_INVALID,
            f"upgrade from {frm} to {to} is not sequential: step one release at a time (next: {following})",
        )
    if view.held:  # nothing is rolled or migrated until the spec suits the target (requeue 30 s)
        return _keep(
            view,
            Next.AFTER,
            condition=_db(
                False,
                UPGRADE_HELD_BY_POLICY,
                f"upgrade {_arrow(frm, to)} not started: " + "; ".join(view.held),
            ),
            requeue_after=intervals.DATABASE_WAIT,
        )
    return Decision(
        installed=frm,
        target=to,
        phase=EXPANDING,
        next=Next.NOW,
        condition=_db(False, EXPAND_IN_PROGRESS, f"Upgrade detected: {_arrow(frm, to)}; phase {EXPANDING}"),
        events=(Event("Normal", UPGRADE_INITIATED, f"Upgrade initiated: {_arrow(frm, to)}"),),
    )


def abort(view: View) -> Decision:
    """§8.1: delete the phase Jobs, clear phase and target, ``UpgradeAborted``, requeue immediately.

    The condition is left alone: the very next pass is an ordinary one whose db-sync path restores
    ``DatabaseReady`` at the installed release.
    """
    message = (
        f"Upgrade {_arrow(view.installed, view.target)} aborted: spec release reverted to installed "
        f"release {view.installed}"
    )
    return Decision(
        installed=view.installed,
        target="",
        phase="",
        next=Next.NOW,
        action=Action.DELETE_PHASE_JOBS,
        events=(Event("Normal", UPGRADE_ABORTED, message),),
    )


def target_changed(view: View) -> Decision:
    """§7: a third release mid-upgrade; the upgrade neither advances nor restarts."""
    message = (
        f"spec.openStackRelease changed to {view.spec_release} during the upgrade "
        f"{_arrow(view.installed, view.target)}: set it to {view.target} to continue or to "
        f"{view.installed} to abort"
    )
    return _refuse(view, UPGRADE_TARGET_CHANGED, message)


def phase_handler(view: View) -> Decision:
    """§3.2 / §3.4: a Job phase names its Job; RollingUpdate lets the workload steps roll."""
    if view.phase == ROLLING_UPDATE:
        return _keep(
            view,
            Next.ZERO,
            condition=_db(
                False,
                UPGRADE_ROLLING_UPDATE,
                f"waiting for the rollout of every role: {_arrow(view.installed, view.target)}",
            ),
        )
    spec = _JOB_PHASES.get(view.phase)
    if spec is None:  # the CRD enum admits none; refuse rather than guess
        return _keep(view, Next.ERROR, error=f"unknown upgrade phase {view.phase!r}")
    return _keep(view, Next.ZERO, action=Action.RUN_JOB, job=spec.job)


def after_job(view: View, outcome: JobOutcome, *, job_name: str, error: str = "") -> Decision:
    """§3.2: the phase Job's outcome and the transition on its completion."""
    spec = _JOB_PHASES[view.phase]
    frm, to = view.installed, view.target
    if outcome is JobOutcome.NOT_DONE:
        return _keep(
            view,
            Next.AFTER,
            condition=_db(
                False, spec.in_progress, f"{spec.verb} phase running ({job_name}): {_arrow(frm, to)}"
            ),
            requeue_after=intervals.UPGRADE_WAIT,
        )
    if outcome is JobOutcome.FAILED:
        return _refuse(view, spec.failed, f"{spec.verb} job {job_name} failed: {error or 'failed'}")
    complete = f"{spec.verb} phase complete: {_arrow(frm, to)}"
    if view.phase == EXPANDING:
        return Decision(
            installed=frm,
            target=to,
            phase=MIGRATING,
            next=Next.NOW,
            condition=_db(False, MIGRATE_IN_PROGRESS, f"Migrate phase starting: {_arrow(frm, to)}"),
            events=(Event("Normal", EXPAND_COMPLETE, complete),),
        )
    if view.phase == MIGRATING:
        return Decision(
            installed=frm,
            target=to,
            phase=ROLLING_UPDATE,
            next=Next.NOW,
            condition=_db(
                False, UPGRADE_ROLLING_UPDATE, f"waiting for the rollout of every role: {_arrow(frm, to)}"
            ),
            events=(Event("Normal", MIGRATE_COMPLETE, complete),),
        )
    return Decision(
        installed=to,
        target="",
        phase="",
        next=Next.ZERO,
        condition=_db(True, DATABASE_SYNCED, f"upgraded {_arrow(frm, to)}"),
        events=(Event("Normal", UPGRADE_COMPLETE, f"Upgrade complete: {_arrow(frm, to)}"),),
    )


def job_suffix(phase: str) -> str | None:
    """``db-expand`` / ``db-migrate`` / ``db-contract`` for a Job phase; None for RollingUpdate or idle."""
    spec = _JOB_PHASES.get(phase)
    return spec.job if spec is not None else None


# -- §4 the pre-flight report --------------------------------------------------------------------


def check_report(message: str | None) -> Event:
    """Classify the expand Job's termination message (trailing whitespace trimmed first)."""
    text = (message or "").rstrip()
    if not text:
        return Event("Normal", UPGRADE_CHECK_COMPLETED, CHECK_UNAVAILABLE)
    if _CHECK_CLEAN.search(text):
        return Event("Normal", UPGRADE_CHECK_COMPLETED, text)
    return Event("Warning", UPGRADE_CHECK_WARNINGS, text)


# -- §6.1 the flip gate of the API step ----------------------------------------------------------


@dataclass(frozen=True)
class Rollout:
    """One non-API role's Deployment as the gate sees it; ``None`` in ``rollout_gate`` = missing."""

    name: str
    rolled_out: bool
    image: str


def rollout_gate(*, api_rolled_out: bool, roles: Sequence[Rollout | None], image: str) -> bool:
    """Every role exists, is fully rolled out and runs ``image`` (first container); the API is rolled out."""
    return api_rolled_out and all(r is not None and r.rolled_out and r.image == image for r in roles)


def flip(view: View, *, ready: bool, api_name: str) -> Decision | None:
    """The API step's decision while the phase is RollingUpdate; None in any other phase.

    Not ready: ``DeploymentReady=False`` ``WaitingForDeployment``, requeue 10 s. Ready: phase
    ``Contracting``, Normal ``DeploymentRolloutComplete``, ``DeploymentReady=True``, requeue 1 s
    (``status.endpoint`` is not stamped on this pass).
    """
    if view.phase != ROLLING_UPDATE:
        return None
    if not ready:
        return _keep(
            view,
            Next.AFTER,
            condition=Condition(
                conditions.DEPLOYMENT_READY,
                False,
                WAITING_FOR_DEPLOYMENT,
                f"waiting for every role to roll out {view.target} before contracting",
            ),
            requeue_after=intervals.DEPLOYMENT_POLL,
        )
    return Decision(
        installed=view.installed,
        target=view.target,
        phase=CONTRACTING,
        next=Next.AFTER,
        condition=Condition(
            conditions.DEPLOYMENT_READY, True, DEPLOYMENT_READY, f"Deployment {api_name} is available"
        ),
        events=(
            Event(
                "Normal",
                DEPLOYMENT_ROLLOUT_COMPLETE,
                f"Deployment rollout complete during upgrade {_arrow(view.installed, view.target)}",
            ),
        ),
        requeue_after=intervals.NEXT_PASS,
    )
