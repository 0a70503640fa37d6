"""Every kind the operator touches, as data: ``ResourceRef`` plus the verbs it needs.

The table is the single source of the operator's RBAC: ``render_rbac()`` turns it into
the ServiceAccount, ClusterRoles and bindings that ``make manifests`` writes to
``config/rbac/`` (see ``nova_operator.install.manifests``). A kind or
verb missing here is a 403 in production, so code that calls the API should use the
constants below rather than spelling group/version/plural again.

Secrets are granted by a ClusterRole of their own, ``nova-operator-secrets``: the operator
only ever reads, lists and watches Secrets inside the namespaces that hold a Nova or a
NovaCompute (``runtime.scoped``), never across the cluster, so that role can be bound with
one RoleBinding per tenant namespace instead of the default ClusterRoleBinding.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml

from nova_operator.kube.paths import path_segment

SERVICE_ACCOUNT = "nova-operator"
OPERATOR_NAMESPACE = "nova-system"
CLUSTER_ROLE = "nova-operator"
SECRETS_ROLE = "nova-operator-secrets"


@dataclass(frozen=True, slots=True)
class ResourceRef:
    """One API resource: where it lives and what its objects are called."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    status_subresource: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The REST path; ``namespace=None`` on a namespaced kind means all namespaces.

        Every namespace, name and subresource must be a valid path segment (``check_segment``):
        a name like ``../../other-ns/secrets/x`` is refused here, before any request is sent.
        Each is then percent-escaped (``path_segment``), so ``a?labelSelector=x`` is one name,
        never a name and a query.
        """
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{path_segment(namespace, 'namespace')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{path_segment(name, f'{self.kind} name')}"
            if subresource:
                base += f"/{path_segment(subresource, 'subresource')}"
        return base

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


READ = ("get", "list", "watch")
WRITE = ("create", "update", "patch", "delete")
ALL = READ + WRITE

# core
CONFIGMAPS = ResourceRef("", "v1", "configmaps", "ConfigMap")
SECRETS = ResourceRef("", "v1", "secrets", "Secret")
SERVICES = ResourceRef("", "v1", "services", "Service", status_subresource=True)
PODS = ResourceRef("", "v1", "pods", "Pod", status_subresource=True)
NODES = ResourceRef("", "v1", "nodes", "Node", namespaced=False, status_subresource=True)
EVENTS = ResourceRef("", "v1", "events", "Event")
NAMESPACES = ResourceRef("", "v1", "namespaces", "Namespace", namespaced=False, status_subresource=True)
PRIORITY_CLASSES = ResourceRef(
    "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False
)
# apps, batch
DEPLOYMENTS = ResourceRef("apps", "v1", "deployments", "Deployment", status_subresource=True)
DAEMONSETS = ResourceRef("apps", "v1", "daemonsets", "DaemonSet", status_subresource=True)
JOBS = ResourceRef("batch", "v1", "jobs", "Job", status_subresource=True)
CRONJOBS = ResourceRef("batch", "v1", "cronjobs", "CronJob", status_subresource=True)
# policy, autoscaling, networking
PDBS = ResourceRef("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", status_subresource=True)
HPAS = ResourceRef(
    "autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", status_subresource=True
)
NETWORK_POLICIES = ResourceRef("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy")
HTTPROUTES = ResourceRef(
    "gateway.networking.k8s.io", "v1", "httproutes", "HTTPRoute", status_subresource=True
)
# coordination, events
LEASES = ResourceRef("coordination.k8s.io", "v1", "leases", "Lease")
EVENTS_V1 = ResourceRef("events.k8s.io", "v1", "events", "Event")
# MariaDB operator, RabbitMQ operator, External Secrets
MARIADBS = ResourceRef("k8s.mariadb.com", "v1alpha1", "mariadbs", "MariaDB", status_subresource=True)
DATABASES = ResourceRef("k8s.mariadb.com", "v1alpha1", "databases", "Database", status_subresource=True)
USERS = ResourceRef("k8s.mariadb.com", "v1alpha1", "users", "User", status_subresource=True)
GRANTS = ResourceRef("k8s.mariadb.com", "v1alpha1", "grants", "Grant", status_subresource=True)
RABBITMQ_CLUSTERS = ResourceRef(
    "rabbitmq.com", "v1beta1", "rabbitmqclusters", "RabbitmqCluster", status_subresource=True
)
SECRET_STORES = ResourceRef(
    "external-secrets.io", "v1", "secretstores", "SecretStore", status_subresource=True
)
CLUSTER_SECRET_STORES = ResourceRef(
    "external-secrets.io", "v1", "clustersecretstores", "ClusterSecretStore", False, True
)
# ours
NOVAS = ResourceRef("nova.openstack.c5c3.io", "v1alpha1", "novas", "Nova", status_subresource=True)
NOVACOMPUTES = ResourceRef(
    "nova.openstack.c5c3.io", "v1alpha1", "novacomputes", "NovaCompute", status_subresource=True
)


@dataclass(frozen=True, slots=True)
class Access:
    """What the operator may do with one resource (and, optionally, its subresources)."""

    ref: ResourceRef
    verbs: tuple[str, ...]
    subresources: tuple[tuple[str, tuple[str, ...]], ...] = ()


_CR_SUBRESOURCES = (("status", ("patch",)), ("finalizers", ("update",)))
_OWNED = ("get", "list", "watch", "create", "patch", "delete")  # applied (SSA), watched, pruned
_APPLIED = ("get", "list", "watch", "create", "patch")  # get: a child the cache lacks is read first

# Exactly the union of what the code declares it sends (``RBAC_NEEDS`` of the Nova and
# NovaCompute controllers and of leader election); tests/unit/test_rbac_least_privilege.py
# fails on any verb granted and never used, or used and not granted.
ACCESS: tuple[Access, ...] = (
    Access(NOVAS, ("get", "list", "watch", "patch"), _CR_SUBRESOURCES),
    Access(NOVACOMPUTES, ("get", "list", "watch", "patch"), _CR_SUBRESOURCES),
    Access(DEPLOYMENTS, _OWNED),
    Access(DAEMONSETS, _OWNED),
    Access(JOBS, _OWNED),
    Access(CRONJOBS, _APPLIED),
    Access(CONFIGMAPS, _OWNED),
    Access(SECRETS, _OWNED),
    Access(SERVICES, (*_APPLIED, "delete")),
    Access(PDBS, _APPLIED),
    Access(HPAS, (*_APPLIED, "delete")),
    Access(NETWORK_POLICIES, (*_APPLIED, "delete")),
    Access(HTTPROUTES, (*_APPLIED, "delete")),
    Access(DATABASES, _OWNED),
    Access(USERS, _OWNED),
    Access(GRANTS, _OWNED),
    Access(MARIADBS, READ),
    Access(RABBITMQ_CLUSTERS, READ),
    Access(SECRET_STORES, ("get", "list", "watch")),
    Access(CLUSTER_SECRET_STORES, ("get", "list", "watch")),
    Access(PODS, ("list", "watch")),  # the label-selected informer of the operator's own pods
    Access(PRIORITY_CLASSES, ("get",)),
    Access(NODES, ("get", "list", "watch")),
    Access(EVENTS, ("create", "patch")),
    Access(LEASES, ("get", "create", "update")),
)

KNOWN: tuple[ResourceRef, ...] = (*(a.ref for a in ACCESS), NAMESPACES, EVENTS_V1)

# Kinds whose access is rendered into SECRETS_ROLE (bindable per namespace), not CLUSTER_ROLE.
NAMESPACE_BOUND: frozenset[ResourceRef] = frozenset({SECRETS})


def ref_for(api_version: str, kind: str) -> ResourceRef:
    """The ResourceRef for an object's ``apiVersion`` and ``kind`` (from the table)."""
    for ref in KNOWN:
        if ref.api_version == api_version and ref.kind == kind:
            return ref
    raise KeyError(f"unknown kind {kind} in {api_version}: add it to nova_operator.kube.resources")


def _rules(access: Iterable[Access]) -> list[dict[str, Any]]:
    merged: dict[tuple[str, tuple[str, ...]], set[str]] = {}
    for a in access:
        merged.setdefault((a.ref.group, tuple(sorted(a.verbs))), set()).add(a.ref.plural)
        for sub, verbs in a.subresources:
            merged.setdefault((a.ref.group, tuple(sorted(verbs))), set()).add(f"{a.ref.plural}/{sub}")
    return [
        {"apiGroups": [group], "resources": sorted(resources), "verbs": list(verbs)}
        for (group, verbs), resources in sorted(merged.items())
    ]


def _dump(doc: dict[str, Any]) -> str:
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)


def _cluster_role(name: str, access: Iterable[Access], labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": labels},
        "rules": _rules(access),
    }


def _binding(role: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": role, "labels": labels},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": OPERATOR_NAMESPACE}],
    }


def render_rbac() -> dict[str, str]:
    """config/rbac/ as ``{file name: YAML text}``: ServiceAccount, the two ClusterRoles and bindings.

    ``secrets_role_binding.yaml`` binds the Secrets role cluster-wide for a single-tenant
    install; on a shared cluster replace it with a RoleBinding of ``nova-operator-secrets``
    in each namespace that runs a Nova (see the README).
    """
    labels = {"app.kubernetes.io/name": "nova-operator", "app.kubernetes.io/managed-by": "nova-operator"}
    sa = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": SERVICE_ACCOUNT, "namespace": OPERATOR_NAMESPACE, "labels": labels},
    }
    cluster_wide = [a for a in ACCESS if a.ref not in NAMESPACE_BOUND]
    namespaced = [a for a in ACCESS if a.ref in NAMESPACE_BOUND]
    header = "# Generated by make manifests from nova_operator/kube/resources.py; do not edit.\n"
    files = {
        "service_account.yaml": header + _dump(sa),
        "role.yaml": header + _dump(_cluster_role(CLUSTER_ROLE, cluster_wide, labels)),
        "role_binding.yaml": header + _dump(_binding(CLUSTER_ROLE, labels)),
        "secrets_role.yaml": header + _dump(_cluster_role(SECRETS_ROLE, namespaced, labels)),
        "secrets_role_binding.yaml": header + _dump(_binding(SECRETS_ROLE, labels)),
    }
    files["kustomization.yaml"] = header + _dump(
        {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": [
                "service_account.yaml",
                "role.yaml",
                "role_binding.yaml",
                "secrets_role.yaml",
                "secrets_role_binding.yaml",
            ],
        }
    )
    return files
