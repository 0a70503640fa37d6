"""The install's objects, once, for two targets: kustomize (literal base names, no namespace: the
overlay sets them) and Helm (template expressions, see ``install.chart``).

Helm expressions are embedded as markers the chart writer turns into template text:
``scalar(expr)`` becomes ``{{ expr }}`` in place, ``block(expr)`` a ``{{- expr | nindent n }}``
under its key, ``snippet(id)`` (a key) one of ``install.chart.SNIPPETS``.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from typing import Any

from nova_operator.install.rbac import Rule
from nova_operator.kube.resources import LEASES
from nova_operator.runtime.leaderelection import RBAC_NEEDS as LEADER_ELECTION_NEEDS

Obj = dict[str, Any]

APP = "nova-operator"
IMAGE_REPOSITORY = "ghcr.io/c5c3/nova-operator"
VERSION = metadata.version("nova-operator")
METRICS_PORT = 8080
HEALTH_PORT = 8081
# Longer than a stopping operator's drain of in-flight reconciles (Settings.shutdown_timeout, 30 s)
# plus the release of the Lease.
TERMINATION_GRACE_SECONDS = 60
REPLICAS = 2
RESOURCES: Obj = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}}
# The restricted Pod Security Standard, met by the pod and by its one container (the chart's defaults
# of ``podSecurityContext`` and ``securityContext``).
POD_SECURITY_CONTEXT: Obj = {
    "runAsNonRoot": True,
    "runAsUser": 65532,
    "runAsGroup": 65532,
    "seccompProfile": {"type": "RuntimeDefault"},
}
SECURITY_CONTEXT: Obj = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "readOnlyRootFilesystem": True,
}
# Every flag but --leader-elect/--no-leader-elect (first, a value in the chart) and the chart's extras.
# /metrics listens on the pod's IP only (the kubelet expands $(POD_IP) from the downward API), not on
# every address of the pod's network namespace (loopback, extra interfaces, the node's with hostNetwork).
BASE_ARGS = [
    f"--metrics-bind-address=$(POD_IP):{METRICS_PORT}",
    f"--health-probe-bind-address=:{HEALTH_PORT}",
    "--log-level=info",
]
RBAC_API = "rbac.authorization.k8s.io"


def scalar(expr: str) -> str:
    return f"@@s:{expr}@@"


def block(expr: str) -> str:
    return f"@@b:{expr}@@"


def snippet(name: str) -> str:
    return f"@@k:{name}@@"


@dataclass(frozen=True)
class Target:
    """Names and values of one output: ``helm=False`` for kustomize bases."""

    helm: bool
    ctx: str = "."  # the Helm context inside the template (``$`` within a range)

    def name(self, base: str, suffix: str = "") -> str:
        """The kustomize base name, or the chart's fullname plus ``suffix``."""
        return scalar(f'include "nova-operator.fullname" {self.ctx}') + suffix if self.helm else base

    @property
    def service_account(self) -> str:
        return (
            scalar(f'include "nova-operator.serviceAccountName" {self.ctx}')
            if self.helm
            else "controller-manager"
        )

    @property
    def namespace(self) -> str:
        if self.helm:
            return scalar(".Release.Namespace" if self.ctx == "." else f"{self.ctx}.Release.Namespace")
        return "system"  # kubebuilder's placeholder: the overlay's namespace replaces it

    def labels(self, *snippets: str) -> dict[str, Any]:
        """The common labels (and, in the chart, the values-driven ``snippets`` after them)."""
        if self.helm:
            return {snippet(name): None for name in ("labels", *snippets)}
        return {"app.kubernetes.io/name": APP, "app.kubernetes.io/managed-by": "kustomize"}

    @property
    def selector(self) -> Any:
        if self.helm:
            return block(f'include "nova-operator.selectorLabels" {self.ctx}')
        return {"app.kubernetes.io/name": APP, "control-plane": "controller-manager"}

    def metadata(self, name: str, *, namespaced: bool = True, namespace: str | None = None) -> Obj:
        meta: Obj = {"name": name}
        ns = namespace if namespace is not None else self.namespace if namespaced else None
        if ns is not None:
            meta["namespace"] = ns
        meta["labels"] = self.labels()
        return meta


KUSTOMIZE = Target(helm=False)
HELM = Target(helm=True)


def namespace() -> Obj:
    """The operator's Namespace (kustomize only; Helm installs into ``--namespace``), restricted PSA."""
    labels = {
        **KUSTOMIZE.labels(),
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest",
    }
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "system", "labels": labels}}


def service_account(t: Target) -> Obj:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": t.metadata(t.service_account)}


def _extras(t: Target, value: str) -> list[Obj]:
    """The chart's list value ``value`` spliced into a list (nothing for kustomize)."""
    return [{snippet(value): None}] if t.helm else []


def _container(t: Target) -> Obj:
    probe = {
        "httpGet": {"path": "/healthz", "port": "health"},
        "initialDelaySeconds": 15,
        "periodSeconds": 20,
    }
    return {
        "name": "manager",
        "image": scalar(f'include "nova-operator.image" {t.ctx}')
        if t.helm
        else f"{IMAGE_REPOSITORY}:{VERSION}",
        "imagePullPolicy": scalar(".Values.image.pullPolicy") if t.helm else "IfNotPresent",
        "args": block(f'include "nova-operator.args" {t.ctx}') if t.helm else ["--leader-elect", *BASE_ARGS],
        "env": [
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            *_extras(t, "extraEnv"),
        ],
        "ports": [
            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
            {"name": "health", "containerPort": HEALTH_PORT, "protocol": "TCP"},
        ],
        "livenessProbe": probe,
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": "health"},
            "initialDelaySeconds": 5,
            "periodSeconds": 10,
        },
        "resources": block("toYaml .Values.resources") if t.helm else RESOURCES,
        "securityContext": block("toYaml .Values.securityContext") if t.helm else SECURITY_CONTEXT,
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, *_extras(t, "extraVolumeMounts")],
    }


def deployment(t: Target) -> Obj:
    pod_meta: Obj = {
        "annotations": {"kubectl.kubernetes.io/default-container": "manager"},
        "labels": {snippet("selectorLabels"): None, snippet("podLabels"): None} if t.helm else t.selector,
    }
    if t.helm:
        pod_meta["annotations"][snippet("podAnnotations")] = None
    spec: Obj = {
        "serviceAccountName": t.service_account,
        "securityContext": block("toYaml .Values.podSecurityContext") if t.helm else POD_SECURITY_CONTEXT,
        "terminationGracePeriodSeconds": scalar(".Values.terminationGracePeriodSeconds")
        if t.helm
        else TERMINATION_GRACE_SECONDS,
        "containers": [_container(t)],
        "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}, *_extras(t, "extraVolumes")],
    }
    if t.helm:
        spec = {
            snippet("imagePullSecrets"): None,
            snippet("priorityClassName"): None,
            **spec,
            snippet("scheduling"): None,
        }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": t.metadata(t.name("controller-manager")),
        "spec": {
            "replicas": scalar(".Values.replicaCount") if t.helm else REPLICAS,
            "selector": {"matchLabels": t.selector},
            "template": {"metadata": pod_meta, "spec": spec},
        },
    }


def pdb(t: Target) -> Obj:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": t.metadata(t.name("controller-manager")),
        "spec": {
            "minAvailable": scalar(".Values.podDisruptionBudget.minAvailable") if t.helm else 1,
            "selector": {"matchLabels": t.selector},
        },
    }


def metrics_service(t: Target) -> Obj:
    meta = t.metadata(t.name("controller-manager-metrics-service", "-metrics"))
    if not t.helm:  # the chart's common labels hold its selector labels already
        meta["labels"] = {**meta["labels"], **t.selector}  # what the ServiceMonitor selects
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "ports": [{"name": "metrics", "port": METRICS_PORT, "protocol": "TCP", "targetPort": "metrics"}],
            "selector": t.selector,
        },
    }


def service_monitor(t: Target) -> Obj:
    meta = t.metadata(t.name("controller-manager-metrics-monitor"))
    meta["labels"] = t.labels("serviceMonitorLabels")
    endpoint: Obj = {"port": "metrics", "path": "/metrics", "scheme": "http"}
    endpoint["interval"] = scalar(".Values.serviceMonitor.interval") if t.helm else "30s"
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": meta,
        "spec": {"endpoints": [endpoint], "selector": {"matchLabels": t.selector}},
    }


def network_policy(t: Target) -> Obj:
    """Ingress to the operator's pods: the metrics port only, from namespaces labelled
    ``metrics: enabled`` (the chart's ``networkPolicy.metricsFrom`` replaces the peers)."""
    peers: Any = (
        block("toYaml .Values.networkPolicy.metricsFrom")
        if t.helm
        else [{"namespaceSelector": {"matchLabels": {"metrics": "enabled"}}}]
    )
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": t.metadata(t.name("allow-metrics-traffic", "-allow-metrics-traffic")),
        "spec": {
            "podSelector": {"matchLabels": t.selector},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": peers, "ports": [{"port": METRICS_PORT, "protocol": "TCP"}]}],
        },
    }


def cluster_role(
    t: Target, base: str, suffix: str, rules: list[Rule], labels: dict[str, str] | None = None
) -> Obj:
    meta = t.metadata(t.name(base, suffix), namespaced=False)
    meta["labels"] = {**meta["labels"], **(labels or {})}
    return {"apiVersion": f"{RBAC_API}/v1", "kind": "ClusterRole", "metadata": meta, "rules": rules}


def role(t: Target, base: str, suffix: str, rules: list[Rule], namespace: str | None = None) -> Obj:
    return {
        "apiVersion": f"{RBAC_API}/v1",
        "kind": "Role",
        "metadata": t.metadata(t.name(base, suffix), namespace=namespace),
        "rules": rules,
    }


def _subjects(t: Target) -> list[Obj]:
    # kustomize: the overlay's namespace transformer fills the subject's namespace in.
    subject: Obj = {"kind": "ServiceAccount", "name": t.service_account}
    subject["namespace"] = t.namespace
    return [subject]


def _binding(t: Target, kind: str, base: str, role_base: str, suffix: str, namespace: str | None) -> Obj:
    role_kind = kind.removesuffix("Binding")
    return {
        "apiVersion": f"{RBAC_API}/v1",
        "kind": kind,
        "metadata": t.metadata(t.name(base, suffix), namespaced=kind == "RoleBinding", namespace=namespace),
        "roleRef": {"apiGroup": RBAC_API, "kind": role_kind, "name": t.name(role_base, suffix)},
        "subjects": _subjects(t),
    }


def cluster_role_binding(t: Target, base: str, role_base: str, suffix: str = "") -> Obj:
    return _binding(t, "ClusterRoleBinding", base, role_base, suffix, None)


def role_binding(t: Target, base: str, role_base: str, suffix: str = "", namespace: str | None = None) -> Obj:
    return _binding(t, "RoleBinding", base, role_base, suffix, namespace)


# -- the API server's priority and fairness for the operator's Lease requests ------------------------
FLOWCONTROL_API = "flowcontrol.apiserver.k8s.io/v1"
LEASE_FLOW_PRECEDENCE = 1000
"""Ahead of the built-in ``service-accounts`` FlowSchema (9000), which would put the Lease requests
in ``workload-low`` with every other request of the operator; behind the system's own (< 1000)."""


def lease_priority_level(t: Target) -> Obj:
    """The priority level the operator's Lease requests are served in (cluster-scoped)."""
    spec: Obj = {
        "type": "Limited",
        "limited": {
            # Seats of its own, never lent: a Lease request does not wait for the operator's LISTs and
            # writes (nor anyone else's) to hand seats back. 5 shares: a few seats on any API server.
            "nominalConcurrencyShares": 5,
            "lendablePercent": 0,
            "limitResponse": {
                "type": "Queue",
                "queuing": {"queues": 4, "handSize": 1, "queueLengthLimit": 16},
            },
        },
    }
    return {
        "apiVersion": FLOWCONTROL_API,
        "kind": "PriorityLevelConfiguration",
        "metadata": t.metadata(t.name("leader-election", "-leader-election"), namespaced=False),
        "spec": spec,
    }


def lease_flow_schema(t: Target) -> Obj:
    """The operator's ServiceAccount's Lease requests (the verbs leader election sends, in the
    operator's namespace) into ``lease_priority_level``. kustomize: the overlay's transformers put
    the final name and namespace of the ServiceAccount in (``install.kustomize``)."""
    verbs = sorted(LEADER_ELECTION_NEEDS[str(LEASES)])
    return {
        "apiVersion": FLOWCONTROL_API,
        "kind": "FlowSchema",
        "metadata": t.metadata(t.name("leader-election", "-leader-election"), namespaced=False),
        "spec": {
            "priorityLevelConfiguration": {"name": t.name("leader-election", "-leader-election")},
            "matchingPrecedence": LEASE_FLOW_PRECEDENCE,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [
                {
                    "subjects": [
                        {
                            "kind": "ServiceAccount",
                            "serviceAccount": {"name": t.service_account, "namespace": t.namespace},
                        }
                    ],
                    "resourceRules": [
                        {
                            "verbs": verbs,
                            "apiGroups": [LEASES.group],
                            "resources": [LEASES.plural],
                            "namespaces": [t.namespace],
                        }
                    ],
                }
            ],
        },
    }
