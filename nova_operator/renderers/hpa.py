"""The HorizontalPodAutoscaler of the API Deployment (only while ``spec.autoscaling`` is set)."""

from __future__ import annotations

from typing import Any

from nova_operator import naming
from nova_operator.models.nova import Nova
from nova_operator.naming import Component
from nova_operator.renderers.pdb import lower_bound
from nova_operator.renderers.workload import plain

__all__ = ["hpa"]


def _metric(resource: str, target: int) -> dict[str, Any]:
    return {
        "type": "Resource",
        "resource": {"name": resource, "target": {"type": "Utilization", "averageUtilization": target}},
    }


def hpa(nova: Nova) -> dict[str, Any] | None:
    """The HPA, or None when autoscaling is not set (the reconciler then deletes any)."""
    autoscaling = nova.spec.autoscaling
    if autoscaling is None:
        return None
    name = nova.metadata.name or ""
    metrics = []
    if autoscaling.target_cpu_utilization is not None:
        metrics.append(_metric("cpu", autoscaling.target_cpu_utilization))
    if autoscaling.target_memory_utilization is not None:
        metrics.append(_metric("memory", autoscaling.target_memory_utilization))
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
        "minReplicas": lower_bound(nova),
        "maxReplicas": autoscaling.max_replicas,
        "metrics": metrics,
    }
    if autoscaling.behavior:
        spec["behavior"] = dict(autoscaling.behavior)
    return plain(
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {
                "name": name,
                "namespace": nova.metadata.namespace or "default",
                "labels": naming.labels(name, Component.API),
            },
            "spec": spec,
        }
    )
