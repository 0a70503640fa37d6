"""The operator's RBAC rules for an install, derived from ``kube.resources.render_rbac`` (the one
generator of its grants, what ``config/rbac/`` holds), so a change of verbs there flows into
``config/`` and the chart alike.

An install differs from that flat ClusterRole in where the grants live:

- ``leases`` go to a Role in the operator's own namespace (leader election), never cluster-wide;
- for a ``--namespace`` install the namespaced kinds go to a Role in every watched namespace and
  only the cluster-scoped kinds (nodes, ClusterSecretStores) stay in a ClusterRole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from nova_operator.kube.resources import KNOWN, LEASES, NOVACOMPUTES, NOVAS, render_rbac

Rule = dict[str, Any]

_HANDLED = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Kustomization"}


@dataclass(frozen=True)
class OperatorRules:
    leader_election: list[Rule]  # Role in the operator's namespace
    cluster_scoped: list[Rule]  # kinds without a namespace (always a ClusterRole)
    namespaced: list[Rule]  # ClusterRole for an all-namespaces install, else a Role per namespace

    @property
    def cluster_wide(self) -> list[Rule]:
        """The ClusterRole of an all-namespaces install: everything but the Lease."""
        return _merge(self.cluster_scoped + self.namespaced)


def _source_rules() -> list[Rule]:
    rules: list[Rule] = []
    for name, text in sorted(render_rbac().items()):
        for doc in yaml.safe_load_all(text):
            if not doc:
                continue
            if doc.get("kind") not in _HANDLED:
                raise ValueError(
                    f"render_rbac() {name}: {doc.get('kind')} is not carried into the install layout; "
                    "teach nova_operator.install.rbac about it"
                )
            if doc["kind"] == "ClusterRole":
                rules += doc.get("rules") or []
    return rules


def _namespaced(group: str, resource: str) -> bool:
    plural = resource.split("/")[0]
    for ref in KNOWN:
        if ref.group == group and ref.plural == plural:
            return ref.namespaced
    raise ValueError(f"RBAC rule for {resource}.{group}: not in nova_operator.kube.resources")


def _merge(rules: list[Rule]) -> list[Rule]:
    """One rule per (group, verbs), resources sorted: the shape ``render_rbac`` writes."""
    merged: dict[tuple[str, tuple[str, ...]], set[str]] = {}
    for rule in rules:
        for group in rule["apiGroups"]:
            merged.setdefault((group, tuple(sorted(rule["verbs"]))), set()).update(rule["resources"])
    return [
        {"apiGroups": [group], "resources": sorted(resources), "verbs": list(verbs)}
        for (group, verbs), resources in sorted(merged.items())
    ]


def operator_rules() -> OperatorRules:
    lease, cluster, namespaced = [], [], []
    for rule in _source_rules():
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                one = {"apiGroups": [group], "resources": [resource], "verbs": list(rule["verbs"])}
                if (group, resource.split("/")[0]) == (LEASES.group, LEASES.plural):
                    lease.append(one)
                elif _namespaced(group, resource):
                    namespaced.append(one)
                else:
                    cluster.append(one)
    return OperatorRules(_merge(lease), _merge(cluster), _merge(namespaced))


_CRS = [NOVAS.plural, NOVACOMPUTES.plural]


def editor_rules() -> list[Rule]:
    """For the people who write Nova and NovaCompute CRs (aggregated into the built-in ``edit``)."""
    return [
        {
            "apiGroups": [NOVAS.group],
            "resources": _CRS,
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        },
        {"apiGroups": [NOVAS.group], "resources": [f"{r}/status" for r in _CRS], "verbs": ["get"]},
    ]


def viewer_rules() -> list[Rule]:
    """Read-only access to the CRs (aggregated into the built-in ``view``)."""
    return [
        {"apiGroups": [NOVAS.group], "resources": _CRS, "verbs": ["get", "list", "watch"]},
        {"apiGroups": [NOVAS.group], "resources": [f"{r}/status" for r in _CRS], "verbs": ["get"]},
    ]
