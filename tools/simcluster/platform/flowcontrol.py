"""The operator's Lease requests in a priority level of their own, as every install has them.

The chart and the kustomize overlays ship a FlowSchema and a PriorityLevelConfiguration
(``config/flowcontrol/``, generated from ``nova_operator/install``) that put the operator's
leader-election requests apart from the rest of the API server's traffic, as the API server
does for kube-controller-manager's and kube-scheduler's. The clusters here run the operator
as ``OPERATOR_SERVICE_ACCOUNT`` in ``OPERATOR_NAMESPACE``, so they apply those files as the
overlays do: names prefixed (unprefixed they would be the API server's own built-in objects),
the ServiceAccount and namespace filled in.
"""

from __future__ import annotations

import pathlib
from typing import Any

import yaml

from simcluster.platform.controlplane import OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT, REPO

FLOWCONTROL = REPO / "config" / "flowcontrol"
PREFIX = "nova-operator-"


def _load(path: pathlib.Path) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    return doc


def lease_flow_control(
    namespace: str = OPERATOR_NAMESPACE, service_account: str = OPERATOR_SERVICE_ACCOUNT
) -> list[dict[str, Any]]:
    """The PriorityLevelConfiguration and the FlowSchema, in that order, for this ServiceAccount."""
    level = _load(FLOWCONTROL / "priority_level.yaml")
    schema = _load(FLOWCONTROL / "flow_schema.yaml")
    name = PREFIX + str(level["metadata"]["name"])
    level["metadata"]["name"] = schema["metadata"]["name"] = name
    schema["spec"]["priorityLevelConfiguration"]["name"] = name
    for rule in schema["spec"]["rules"]:
        for subject in rule["subjects"]:
            subject["serviceAccount"] = {"name": service_account, "namespace": namespace}
        for resources in rule["resourceRules"]:
            resources["namespaces"] = [namespace]
    return [level, schema]
