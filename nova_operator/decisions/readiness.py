"""Pure readiness predicates over live objects as the API server returns them (plain dicts).

reconciler.md §7: "available" is surge-tolerant and gates the steady state; "fully rolled
out" is the stricter test an upgrade's RollingUpdate phase needs; a Job's result is read
only from its terminal condition.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from nova_operator.timestamps import parse_rfc3339

Obj = Mapping[str, Any]


def _conditions(obj: Obj) -> dict[str, Obj]:
    status = obj.get("status") or {}
    return {c.get("type", ""): c for c in status.get("conditions") or []}


def _is_true(obj: Obj, cond_type: str) -> bool:
    c = _conditions(obj).get(cond_type)
    return c is not None and c.get("status") == "True"


def _generation_observed(obj: Obj) -> bool:
    status = obj.get("status") or {}
    generation = (obj.get("metadata") or {}).get("generation", 0)
    return int(status.get("observedGeneration", 0)) >= int(generation)


def desired_replicas(deployment: Obj) -> int:
    """``spec.replicas``, or 1 when unset (an HPA-owned API Deployment counts as one)."""
    replicas = (deployment.get("spec") or {}).get("replicas")
    return 1 if replicas is None else int(replicas)


def deployment_available(deployment: Obj) -> bool:
    """Observed, enough ready replicas, and the ``Available`` condition True (§7.1)."""
    status = deployment.get("status") or {}
    return (
        _generation_observed(deployment)
        and int(status.get("readyReplicas", 0)) >= desired_replicas(deployment)
        and _is_true(deployment, "Available")
    )


def deployment_rolled_out(deployment: Obj) -> bool:
    """Observed and updated == ready == total == desired replicas (§7.2)."""
    status = deployment.get("status") or {}
    want = desired_replicas(deployment)
    return _generation_observed(deployment) and (
        int(status.get("updatedReplicas", 0))
        == int(status.get("readyReplicas", 0))
        == int(status.get("replicas", 0))
        == want
    )


def first_container_image(workload: Obj) -> str:
    """The image of the first container of a Deployment, DaemonSet or Job pod template."""
    containers = (((workload.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
        "containers"
    ) or [{}]
    return str(containers[0].get("image", ""))


class JobState(enum.Enum):
    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"


def job_state(job: Obj) -> JobState:
    """``Failed`` wins over ``Complete``; Suspended, FailureTarget, SuccessCriteriaMet are not terminal."""
    if _is_true(job, "Failed"):
        return JobState.FAILED
    if _is_true(job, "Complete"):
        return JobState.COMPLETE
    return JobState.RUNNING


def job_duration_seconds(job: Obj) -> float | None:
    """Terminal condition's lastTransitionTime minus the Job's creation, clamped at 0; None if running."""
    state = job_state(job)
    if state is JobState.RUNNING:
        return None
    cond = _conditions(job)["Failed" if state is JobState.FAILED else "Complete"]
    created = parse_rfc3339((job.get("metadata") or {}).get("creationTimestamp"))
    ended = parse_rfc3339(cond.get("lastTransitionTime"))
    if created is None or ended is None:
        return 0.0
    return max(0.0, (ended - created).total_seconds())


def route_accepted(route: Obj) -> bool:
    """An HTTPRoute is accepted when any parent reports ``Accepted=True`` for the current generation."""
    generation = int((route.get("metadata") or {}).get("generation", 0))
    for parent in (route.get("status") or {}).get("parents") or []:
        for c in parent.get("conditions") or []:
            if c.get("type") == "Accepted" and c.get("status") == "True":
                observed = c.get("observedGeneration")
                if observed is None or int(observed) >= generation:
                    return True
    return False


def custom_resource_ready(obj: Obj) -> bool:
    """MariaDB, Database, User, Grant: ``Ready=True`` in ``status.conditions``."""
    return _is_true(obj, "Ready")


# -- what the pipeline reads of a child's status (the owned-child watches' event filters) --------
#
# A watched child wakes its Nova on any change outside ``status`` (drift to repair), but on a status
# write only when one of these views moved: the fields the predicates above and the steps read.
# Keep each view in step with the functions that read the kind.


def _condition_states(obj: Obj) -> tuple[tuple[str, str], ...]:
    status = obj.get("status") or {}
    return tuple(
        sorted((str(c.get("type", "")), str(c.get("status", ""))) for c in status.get("conditions") or [])
    )


def deployment_view(deployment: Obj) -> tuple[Any, ...]:
    """``deployment_available`` and ``deployment_rolled_out``'s inputs."""
    status = deployment.get("status") or {}
    counts = tuple(
        status.get(k) for k in ("observedGeneration", "replicas", "readyReplicas", "updatedReplicas")
    )
    return (*counts, _condition_states(deployment))


def conditions_view(obj: Obj) -> tuple[tuple[str, str], ...]:
    """Jobs (``job_state``: the terminal condition, its time arrives with it) and the MariaDB kinds
    (``custom_resource_ready``): the status of each condition."""
    return _condition_states(obj)


def route_view(route: Obj) -> tuple[Any, ...]:
    """``route_accepted``: each parent's conditions with the generation they observed."""
    parents = (route.get("status") or {}).get("parents") or []
    return tuple(
        (
            repr(p.get("parentRef")),
            tuple(
                (c.get("type"), c.get("status"), c.get("observedGeneration"))
                for c in p.get("conditions") or []
            ),
        )
        for p in parents
    )


def cronjob_view(cronjob: Obj) -> Any:
    """The runs a CronJob lists as active: a run starting or ending wakes the DBArchive step."""
    return (cronjob.get("status") or {}).get("active")


def no_status(_: Obj) -> None:
    """A kind whose status the pipeline does not read (Service, PodDisruptionBudget, HPA)."""
    return None
