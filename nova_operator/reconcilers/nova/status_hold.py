"""Which status writes of a Nova may be held back and superseded (issue 27; ``runtime.held``).

A Nova's way to Ready is a run of waits, each ended by a child's event: the MariaDB objects turn
Ready, the db-sync Job runs, the Deployments become available, the routes are accepted. A pass that
ends one wait and starts the next changes only a waiting reason, and the next event often comes
within a second (a route is accepted 0.2 s after it is written), when the next pass reports again.
Such a write is held (``intervals.STATUS_HOLD``): the next pass, when it begins in time, drops it
and reports from what is persisted, so the wait that passed in a moment is never written; a wait
that lasts is written after the hold. This departs from reconciler.md §8.4, which writes every
changed status at the end of its pass (docs/README.md, deviations).

``progress_only`` is True only for a status that differs from the one persisted in nothing but this:

- conditions that moved to a waiting reason of the way up (``PROGRESS``), or to True (except
  ``DatabaseReady``, whose transition announces itself with the ``DatabaseSynced`` event: a dropped
  write would have the next pass announce it again), with ``Ready`` False before and after: a
  Nova turning Ready, or losing Ready, is written at once, and so is every error;
- report fields the next pass sets again from the cluster (``REPORTS``); a field the operator reads
  back as state (``upgradePhase``, ``installedRelease``, ``cells``, ...) is written at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from nova_operator import conditions

PROGRESS: Final = frozenset(
    {
        "WaitingForDatabase",
        "DBSyncInProgress",
        "WaitingForConductor",
        "WaitingForScheduler",
        "WaitingForMetadata",
        "WaitingForConsoleProxy",
        "WaitingForDeployment",
        "HTTPRouteNotAccepted",
        "EndpointNotReady",
    }
)
"""False reasons that say a stage of the way up is under way (not a problem, not a user's gate)."""

ANNOUNCED: Final = frozenset({conditions.DATABASE_READY})
"""Conditions whose turning True is told by an event keyed on the condition as persisted."""

REPORTS: Final = frozenset(
    {"observedGeneration", "endpoint", "computeConfigSecretRef", "remoteComputeConfigSecretRef"}
)
"""Status fields every pass sets from what it finds, and no step reads back."""

_COMPARED: Final = ("status", "reason", "message")


def _by_type(status: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(c.get("type")): c for c in status.get("conditions") or []}


def progress_only(snapshot: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """Whether ``status`` (finished: ``Ready`` recomputed) only reports progress over ``snapshot``."""
    for key in {*snapshot, *status} - {"conditions", *REPORTS}:
        if snapshot.get(key) != status.get(key):
            return False
    before, after = _by_type(snapshot), _by_type(status)
    if set(before) - set(after):
        return False
    for kind, cond in after.items():
        old = before.get(kind)
        if old is not None and all(old.get(f) == cond.get(f) for f in _COMPARED):
            continue
        if kind == conditions.READY:
            if cond.get("status") == "True" or (old is not None and old.get("status") == "True"):
                return False
        elif cond.get("status") == "True":
            if kind in ANNOUNCED and (old is None or old.get("status") != "True"):
                return False
        elif cond.get("status") != "False" or cond.get("reason") not in PROGRESS:
            return False
    return True
