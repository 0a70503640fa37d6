"""The PodDisruptionBudget of the API (the only role with one)."""

from __future__ import annotations

from typing import Any

from nova_operator import naming
from nova_operator.models.nova import Nova
from nova_operator.naming import Component
from nova_operator.renderers.workload import plain

__all__ = ["lower_bound", "pdb"]


def lower_bound(nova: Nova) -> int:
    """The HPA's minReplicas while autoscaling is set (nil: the API replicas), else the API replicas."""
    autoscaling = nova.spec.autoscaling
    if autoscaling is not None and autoscaling.min_replicas is not None:
        return autoscaling.min_replicas
    return nova.spec.api.deployment.replicas


def pdb(nova: Nova) -> dict[str, Any]:
    """``minAvailable: 1`` above a bound of one, ``maxUnavailable: 1`` at one; Job pods never count."""
    name = nova.metadata.name or ""
    budget: dict[str, Any] = {"maxUnavailable": 1} if lower_bound(nova) <= 1 else {"minAvailable": 1}
    return plain(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {
                "name": name,
                "namespace": nova.metadata.namespace or "default",
                "labels": naming.labels(name, Component.API),
            },
            "spec": {
                **budget,
                "selector": {
                    "matchLabels": naming.selector_labels(name, Component.API),
                    "matchExpressions": [{"key": "batch.kubernetes.io/job-name", "operator": "DoesNotExist"}],
                },
            },
        }
    )
