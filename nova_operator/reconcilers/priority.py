"""A named PriorityClass must exist before a pod template names it (nova-crd.md §6)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nova_operator.kube.client import Kube
from nova_operator.kube.errors import KubeError, NotFound
from nova_operator.kube.resources import PRIORITY_CLASSES


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
