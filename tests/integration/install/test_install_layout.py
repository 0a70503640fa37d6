"""The install layout rendered by the real tools: ``kubectl kustomize`` / ``kustomize build`` of
config/, ``helm lint`` and ``helm template`` of the chart for a matrix of values.

Both paths must grant exactly the generator's RBAC (``render_rbac``; the Lease in the operator's
namespace only), run the same container, and the chart must refuse what its schema does not know.
"""

from __future__ import annotations

import contextlib
import json
import pathlib
import shutil
from collections.abc import Iterable
from typing import Any

import pytest
import yaml
from simcluster import ControlPlane
from simcluster.client.kube import Kube, KubeError
from simcluster.platform.controlplane import REPO
from simcluster.platform.installtools import CHART, ToolError, bindir, by_kind, docs, helm_template, run

from nova_operator import cli
from nova_operator.kube.resources import KNOWN, render_rbac
from nova_operator.settings import Settings

Obj = dict[str, Any]
Triple = tuple[str, str, str]


def kustomize(overlay: str) -> list[Obj]:
    out = run("kubectl", "kustomize", str(REPO / "config" / overlay))
    assert docs(out) == docs(run("kustomize", "build", str(REPO / "config" / overlay)))
    return docs(out)


def triples(rules: Iterable[Obj]) -> set[Triple]:
    return {
        (g, r, v)
        for rule in rules
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }


def source_triples() -> set[Triple]:
    out: set[Triple] = set()
    for text in render_rbac().values():
        for doc in yaml.safe_load_all(text):
            if doc and doc["kind"] == "ClusterRole":
                out |= triples(doc["rules"])
    return out


def one(objects: list[Obj], kind: str, name: str | None = None) -> Obj:
    found = [d for d in by_kind(objects, kind) if name is None or d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind} {name or ''}: {[d['metadata']['name'] for d in by_kind(objects, kind)]}"
    return found[0]


def _namespaced(group: str, resource: str) -> bool:
    return next(r.namespaced for r in KNOWN if (r.group, r.plural) == (group, resource.split("/")[0]))


def check_container(dep: Obj, *, namespace_flags: list[str]) -> Obj:
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    args = c["args"]
    assert "--leader-elect" in args
    assert cli.parse_settings(args).leader_election.enabled  # flags the operator accepts
    assert [a for a in args if a.startswith("--namespace=")] == namespace_flags
    assert c["env"] == [
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    ]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    # /metrics on the pod's IP only (issue 26 item 9), expanded by the kubelet from the env above
    assert f"--metrics-bind-address=$(POD_IP):{ports['metrics']}" in args
    assert f"--health-probe-bind-address=:{ports['health']}" in args
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert c["resources"]["requests"]["cpu"]
    assert c["resources"]["limits"]["memory"]
    # restricted pod security
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = c["securityContext"]
    assert (sc["allowPrivilegeEscalation"], sc["capabilities"], sc["readOnlyRootFilesystem"]) == (
        False,
        {"drop": ["ALL"]},
        True,
    )
    assert pod["terminationGracePeriodSeconds"] > Settings().shutdown_timeout
    assert "--drain-timeout" not in " ".join(args)
    return c


def check_rbac(objects: list[Obj], namespace: str, *, watched: list[str] | None = None) -> None:
    sa = one(objects, "ServiceAccount")
    subject = {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": namespace}
    assert sa["metadata"]["namespace"] == namespace
    for binding in by_kind(objects, "RoleBinding") + by_kind(objects, "ClusterRoleBinding"):
        assert binding["subjects"] == [subject]
    roles = {
        (r["kind"], r["metadata"]["name"], r["metadata"].get("namespace")): r for r in objects if "rules" in r
    }
    for b in by_kind(objects, "RoleBinding") + by_kind(objects, "ClusterRoleBinding"):
        ref = b["roleRef"]
        assert (
            ref["kind"],
            ref["name"],
            b["metadata"].get("namespace") if ref["kind"] == "Role" else None,
        ) in roles
    bound = {
        (b["roleRef"]["kind"], b["roleRef"]["name"], b["metadata"].get("namespace"))
        for b in objects
        if "roleRef" in b
    }
    lease = [("coordination.k8s.io", "leases", v) for v in ("create", "get", "update")]
    granted: set[Triple] = set()
    for (kind, name, ns), role in roles.items():
        key = (kind, name, ns if kind == "Role" else None)
        if key not in bound:
            continue  # editor / viewer: for people, not for the operator
        t = triples(role["rules"])
        if any(r == "leases" for _, r, _ in t):
            assert (kind, ns, t) == ("Role", namespace, set(lease)), (
                "the Lease: a Role in the operator's namespace"
            )
        elif kind == "Role":
            assert watched is not None
            assert ns in watched
            assert all(_namespaced(g, r) for g, r, _ in t)
        elif watched is not None:
            assert not any(_namespaced(g, r) for g, r, _ in t), (
                "namespaced install: no namespaced kind cluster-wide"
            )
        granted |= t
    assert granted == source_triples()
    if watched is not None:
        for ns in watched:
            in_ns = set().union(
                *(triples(r["rules"]) for (k, _, n), r in roles.items() if k == "Role" and n == ns)
            )
            wanted = {x for x in source_triples() if _namespaced(x[0], x[1]) and x[1] != "leases"}
            assert wanted <= in_ns
    editor = next(r for (k, n, _), r in roles.items() if k == "ClusterRole" and "editor" in n)
    viewer = next(r for (k, n, _), r in roles.items() if k == "ClusterRole" and "viewer" in n)
    assert editor["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert viewer["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert {v for _, _, v in triples(viewer["rules"])} == {"get", "list", "watch"}
    assert ("nova.openstack.c5c3.io", "novas", "create") in triples(editor["rules"])


def check_service(objects: list[Obj], dep: Obj) -> Obj:
    (svc,) = [
        s
        for s in by_kind(objects, "Service")
        if s["metadata"]["name"].endswith(("metrics", "metrics-service"))
    ]
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    assert svc["spec"]["ports"][0]["targetPort"] == "metrics"
    return svc


# -- kustomize ---------------------------------------------------------------------------------


def test_config_default_renders_a_complete_install() -> None:
    objects = kustomize("default")
    kinds = sorted({d["kind"] for d in objects})
    assert kinds == [
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "Deployment",
        "FlowSchema",
        "Namespace",
        "PodDisruptionBudget",
        "PriorityLevelConfiguration",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
    ]
    ns = one(objects, "Namespace")
    assert ns["metadata"]["name"] == "nova-system"
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert all(
        d["metadata"]["name"].startswith("nova-operator-")
        for d in objects
        if d["kind"] not in ("Namespace", "CustomResourceDefinition")
    )
    assert all(d["metadata"].get("namespace") in (None, "nova-system") for d in objects)
    dep = one(objects, "Deployment")
    assert dep["spec"]["replicas"] == 2
    check_container(dep, namespace_flags=[])
    check_rbac(objects, "nova-system")
    check_service(objects, dep)
    pdb = one(objects, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]


def test_config_namespaced_grants_roles_in_the_watched_namespace_only() -> None:
    objects = kustomize("namespaced")
    dep = one(objects, "Deployment")
    check_container(dep, namespace_flags=["--namespace=openstack"])
    check_rbac(objects, "nova-system", watched=["openstack"])


def with_optional_bases(tmp_path: pathlib.Path) -> list[Obj]:
    """config/default with its commented-out optional bases (prometheus, grafana, network-policy) enabled."""
    config = tmp_path / "config"
    shutil.copytree(REPO / "config", config)
    kustomization = config / "default" / "kustomization.yaml"
    text = kustomization.read_text()
    assert "# - ../prometheus\n" in text
    assert "# - ../network-policy\n" in text
    assert "# - ../grafana\n" in text
    kustomization.write_text(text.replace("# - ../", "- ../"))
    return docs(run("kubectl", "kustomize", str(config / "default")))


def test_prometheus_and_network_policy_bases_select_the_operator(tmp_path: pathlib.Path) -> None:
    objects = with_optional_bases(tmp_path)
    dep = one(objects, "Deployment")
    base_labels = dict(dep["spec"]["selector"]["matchLabels"])
    svc = check_service(objects, dep)
    monitor = one(objects, "ServiceMonitor")
    assert monitor["metadata"]["namespace"] == "nova-system"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] in {p["name"] for p in svc["spec"]["ports"]}
    policy = one(objects, "NetworkPolicy")
    assert policy["metadata"]["namespace"] == "nova-system"
    assert policy["spec"]["podSelector"]["matchLabels"] == base_labels
    # the alerts select the job the prometheus-operator names after the Service, in its namespace
    rule = one(objects, "PrometheusRule")
    assert rule["metadata"]["namespace"] == "nova-system"
    scope = f'job="{svc["metadata"]["name"]}", namespace="nova-system"'
    assert all(scope in r["expr"] for r in rule["spec"]["groups"][0]["rules"])
    dashboard = one(objects, "ConfigMap")
    assert dashboard["metadata"]["namespace"] == "nova-system"
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"


# -- helm --------------------------------------------------------------------------------------

MATRIX: dict[str, list[str]] = {
    "defaults": [],
    "one-replica": ["--set", "replicaCount=1"],
    "namespaced": ["--set", "rbac.scope=namespaced", "--set", "watchNamespaces={openstack,tenant-b}"],
    "all-toggles": [
        "--set",
        "serviceMonitor.enabled=true",
        "--set",
        "prometheusRule.enabled=true",
        "--set",
        "networkPolicy.enabled=true",
        "--set",
        "serviceMonitor.labels.release=prom",
        "--set",
        "grafanaDashboard.enabled=true",
    ],
    "no-leader-election": ["--set", "leaderElection.enabled=false", "--set", "replicaCount=1"],
    "existing-account": ["--set", "serviceAccount.create=false", "--set", "serviceAccount.name=ops-sa"],
    "scheduling": [
        "--set-json",
        'nodeSelector={"node-role.kubernetes.io/control-plane": ""}',
        "--set-json",
        'tolerations=[{"key": "dedicated", "operator": "Exists"}]',
        "--set-json",
        'podLabels={"team": "compute"}',
        "--set-json",
        'podAnnotations={"example.org/owner": "compute"}',
        "--set",
        "priorityClassName=system-cluster-critical",
        "--set-json",
        'imagePullSecrets=[{"name": "regcred"}]',
    ],
    "operator-flags": [
        "--set",
        "novaApiUrl=https://nova.example.org:8774",
        "--set",
        "extraArgs={--workers=4,--default-image-pull-policy=IfNotPresent}",
    ],
    "no-rbac": ["--set", "rbac.create=false"],
    "pod-settings": [  # issue 40: every Deployment value of the install surface set at once
        "--set-json",
        'podSecurityContext={"runAsUser": 1001, "runAsGroup": null, "fsGroup": 1001}',
        "--set-json",
        'securityContext={"readOnlyRootFilesystem": false}',
        "--set-json",
        'resources={"requests": {"cpu": "250m", "memory": "300Mi"}, "limits": {"memory": "1Gi"}}',
        "--set-json",
        'nodeSelector={"kubernetes.io/os": "linux"}',
        "--set-json",
        'tolerations=[{"key": "ops", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}]',
        "--set-json",
        'affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms":'
        ' [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}',
        "--set",
        "priorityClassName=ops-critical",
        "--set-json",
        'imagePullSecrets=[{"name": "regcred"}, {"name": "mirror"}]',
        "--set-json",
        'extraEnv=[{"name": "HTTPS_PROXY", "value": "http://proxy:3128"},'
        ' {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]',
        "--set-json",
        'extraVolumes=[{"name": "ca", "configMap": {"name": "site-ca"}}]',
        "--set-json",
        'extraVolumeMounts=[{"name": "ca", "mountPath": "/etc/site-ca", "readOnly": true}]',
    ],
}


@pytest.mark.parametrize("case", sorted(MATRIX))
def test_helm_lint_and_template(case: str) -> None:
    flags = MATRIX[case]
    run("helm", "lint", "--strict", str(CHART), *flags)
    objects = helm_template("nova", "ops", *flags)
    dep = one(objects, "Deployment")
    pod = dep["spec"]["template"]
    c = pod["spec"]["containers"][0]
    settings = cli.parse_settings(c["args"])  # every rendering passes flags the operator accepts
    assert settings.leader_election.enabled == (case != "no-leader-election")
    assert all(d["metadata"].get("namespace") in (None, "ops", "openstack", "tenant-b") for d in objects)
    assert bool(by_kind(objects, "PodDisruptionBudget")) == (dep["spec"]["replicas"] > 1)
    assert pod["metadata"]["labels"].items() >= dep["spec"]["selector"]["matchLabels"].items()
    if case == "defaults":
        check_rbac(objects, "ops")
        # today's restricted settings are the defaults of the values that now carry them
        assert pod["spec"]["securityContext"] == {
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "runAsGroup": 65532,
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        assert c["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
        }
        assert c["resources"] == {
            "requests": {"cpu": "100m", "memory": "256Mi"},
            "limits": {"memory": "512Mi"},
        }
        assert [e["name"] for e in c["env"]] == ["POD_NAMESPACE", "POD_IP"]
        assert [v["name"] for v in pod["spec"]["volumes"]] == ["tmp"]
        assert c["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
        assert not {"nodeSelector", "tolerations", "affinity", "priorityClassName", "imagePullSecrets"} & set(
            pod["spec"]
        )
        assert dep["spec"]["replicas"] == 2
        assert c["image"].endswith(":" + yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"])
        assert not by_kind(objects, "ServiceMonitor")
        assert not by_kind(objects, "NetworkPolicy")
    elif case == "namespaced":
        check_container(dep, namespace_flags=["--namespace=openstack", "--namespace=tenant-b"])
        check_rbac(objects, "ops", watched=["openstack", "tenant-b"])
    elif case == "all-toggles":
        svc = check_service(objects, dep)
        monitor = one(objects, "ServiceMonitor")
        assert monitor["metadata"]["labels"]["release"] == "prom"
        assert monitor["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
        assert monitor["spec"]["endpoints"][0]["port"] in {p["name"] for p in svc["spec"]["ports"]}
        rules = one(objects, "PrometheusRule")["spec"]["groups"][0]["rules"]
        assert {r["alert"] for r in rules} >= {"NovaOperatorDown", "NovaOperatorNoLeader"}
        assert all('namespace="ops"' in r["expr"] for r in rules)
        dashboard = one(objects, "ConfigMap")
        assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
        policy = one(objects, "NetworkPolicy")
        assert policy["spec"]["podSelector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]
    elif case == "no-leader-election":
        assert "--no-leader-elect" in c["args"]
        assert "--leader-elect" not in c["args"]
        assert not [r for r in by_kind(objects, "Role") if "leader" in r["metadata"]["name"]]
    elif case == "existing-account":
        assert not by_kind(objects, "ServiceAccount")
        assert pod["spec"]["serviceAccountName"] == "ops-sa"
        assert all(b["subjects"][0]["name"] == "ops-sa" for b in objects if "subjects" in b)
    elif case == "scheduling":
        assert pod["spec"]["nodeSelector"] == {"node-role.kubernetes.io/control-plane": ""}
        assert pod["spec"]["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
        assert pod["metadata"]["labels"]["team"] == "compute"
        assert "team" not in dep["spec"]["selector"]["matchLabels"]
        assert pod["metadata"]["annotations"]["example.org/owner"] == "compute"
        assert pod["spec"]["priorityClassName"] == "system-cluster-critical"
        assert pod["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    elif case == "operator-flags":
        assert c["args"][-3:] == [
            "--nova-api-url=https://nova.example.org:8774",
            "--workers=4",
            "--default-image-pull-policy=IfNotPresent",
        ]
        assert (settings.queue.workers, settings.default_image_pull_policy) == (4, "IfNotPresent")
    elif case == "pod-settings":
        spec = pod["spec"]
        # Helm merges a map into its default: a key set to null drops a default one
        assert spec["securityContext"] == {
            "runAsNonRoot": True,
            "runAsUser": 1001,
            "fsGroup": 1001,
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        assert c["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": False,
        }
        assert c["resources"] == {"requests": {"cpu": "250m", "memory": "300Mi"}, "limits": {"memory": "1Gi"}}
        assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
        assert spec["tolerations"] == [
            {"key": "ops", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}
        ]
        term = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["a"]
        assert spec["priorityClassName"] == "ops-critical"
        assert spec["imagePullSecrets"] == [{"name": "regcred"}, {"name": "mirror"}]
        # the extras come after what the operator itself needs, which they do not replace
        assert [e["name"] for e in c["env"]] == ["POD_NAMESPACE", "POD_IP", "HTTPS_PROXY", "NODE"]
        assert c["env"][2]["value"] == "http://proxy:3128"
        assert c["env"][3]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
        assert spec["volumes"][1:] == [{"name": "ca", "configMap": {"name": "site-ca"}}]
        assert [v["name"] for v in spec["volumes"]] == ["tmp", "ca"]
        assert c["volumeMounts"] == [
            {"name": "tmp", "mountPath": "/tmp"},
            {"name": "ca", "mountPath": "/etc/site-ca", "readOnly": True},
        ]
    elif case == "no-rbac":
        assert not [
            d for d in objects if d["kind"] in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
        ]


def _normalized(objects: list[Obj], names: dict[str, str]) -> dict[tuple[str, str], Obj]:
    """Objects keyed by (kind, role), labels and generated names left out."""
    out = {}
    for d in objects:
        if d["kind"] in ("Namespace", "CustomResourceDefinition"):
            continue
        d = json.loads(json.dumps(d))
        name = d["metadata"]["name"]
        d["metadata"] = {}
        if d["kind"] == "Deployment":
            d["spec"]["selector"] = d["spec"]["template"]["metadata"]["labels"] = None
            d["spec"]["template"]["spec"]["serviceAccountName"] = None
        if d["kind"] in ("Service", "PodDisruptionBudget"):
            d["spec"]["selector"] = None
        for key in ("subjects", "roleRef"):
            d.pop(key, None)
        if d["kind"] == "FlowSchema":  # the ServiceAccount's name differs (release name vs prefix)
            for rule in d["spec"]["rules"]:
                rule["subjects"] = None
        out[(d["kind"], names.get(name, name))] = d
    return out


def test_helm_defaults_and_config_default_are_the_same_install() -> None:
    chart = helm_template("nova-operator", "nova-system")
    config = kustomize("default")
    k = {
        "nova-operator-controller-manager": "operator",
        "nova-operator-manager-role": "operator",
        "nova-operator-manager-rolebinding": "operator",
        "nova-operator-leader-election-role": "leader",
        "nova-operator-leader-election-rolebinding": "leader",
        "nova-operator-leader-election": "leader",
        "nova-operator-nova-editor-role": "editor",
        "nova-operator-nova-viewer-role": "viewer",
        "nova-operator-controller-manager-metrics-service": "metrics",
    }
    h = {
        "nova-operator": "operator",
        "nova-operator-leader-election": "leader",
        "nova-operator-nova-editor": "editor",
        "nova-operator-nova-viewer": "viewer",
        "nova-operator-metrics": "metrics",
    }
    a, b = _normalized(chart, h), _normalized(config, k)
    assert a.keys() == b.keys()
    for key in a:
        ca, cb = a[key], b[key]
        if key[0] == "Deployment":
            ca["spec"]["template"]["spec"]["containers"][0]["image"] = None
            cb["spec"]["template"]["spec"]["containers"][0]["image"] = None
        assert ca == cb, key
    assert {d["metadata"]["name"] for d in by_kind(chart, "CustomResourceDefinition")} == set()  # crds/ dir
    crds = sorted(p.name for p in (CHART / "crds").iterdir())
    assert crds == sorted(p.name for p in (REPO / "config" / "crd").glob("nova.openstack.c5c3.io_*.yaml"))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--set", "bogus=1"], "additional properties 'bogus' not allowed"),
        (["--set", "image.tagg=1"], "additional properties 'tagg' not allowed"),
        (["--set", "serviceMonitor.enable=true"], "additional properties 'enable' not allowed"),
        (["--set", "replicaCount=two"], "/replicaCount"),
        (["--set", "rbac.scope=global"], "/rbac/scope"),
        (["--set", "watchNamespaces={Bad_Name}"], "/watchNamespaces/0"),
        (["--set", "logLevel=verbose"], "/logLevel"),
        (["--set", "novaApiUrl=nova:8774"], "/novaApiUrl"),
        (["--set", "extraArgs={workers}"], "/extraArgs/0"),
        (["--set", "podSecurityContext=restricted"], "/podSecurityContext"),
        (["--set", "securityContext=true"], "/securityContext"),
        (["--set", "resources=1Gi"], "/resources"),
        (["--set", "nodeSelector=linux"], "/nodeSelector"),
        (["--set-json", 'nodeSelector={"zone": 1}'], "/nodeSelector/zone"),
        (["--set-json", 'tolerations={"key": "ops"}'], "/tolerations"),
        (["--set", "affinity=any"], "/affinity"),
        (["--set", "priorityClassName=7"], "/priorityClassName"),
        (["--set-json", 'imagePullSecrets=["regcred"]'], "/imagePullSecrets/0"),
        (["--set-json", 'extraEnv={"HTTPS_PROXY": "http://proxy:3128"}'], "/extraEnv"),
        (["--set-json", 'extraEnv=[{"value": "x"}]'], "/extraEnv/0"),
        (["--set-json", 'extraVolumes=[{"configMap": {"name": "site-ca"}}]'], "/extraVolumes/0"),
        (["--set-json", 'extraVolumeMounts=[{"name": "ca"}]'], "/extraVolumeMounts/0"),
        (["--set", "rbac.scope=namespaced"], "rbac.scope=namespaced needs watchNamespaces"),
        (["--set", "serviceAccount.create=false"], "serviceAccount.name is required"),
        (["--set", "leaderElection.enabled=false"], "leaderElection.enabled=false allows one replica only"),
    ],
)
def test_the_chart_refuses_what_it_does_not_know(flags: list[str], message: str) -> None:
    with pytest.raises(ToolError) as err:
        helm_template("nova", "ops", *flags)
    assert message in err.value.stderr


# -- the real API server -----------------------------------------------------------------------


def _server_dry_run(kube: Kube, doc: Obj) -> None:
    """Server-side apply with dryRun=All: full validation (schemas, CEL, admission), nothing stored."""
    coll = kube.collection(doc, "default")
    query = "?dryRun=All&fieldManager=install-test&force=true"
    kube.request("PATCH", f"{coll}/{doc['metadata']['name']}{query}", doc, "application/apply-patch+yaml")


def test_every_rendered_object_is_accepted_by_the_api_server(
    control_plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    """Every value set of the matrix and every kustomize overlay, validated by kube-apiserver (the
    prometheus-operator's own CRDs installed for the ServiceMonitor and the PrometheusRule)."""
    kube = Kube(control_plane.server, control_plane.admin_token, control_plane.ca_file)
    crds = sorted(bindir().glob("monitoring.coreos.com_*.yaml"))
    assert [p.name for p in crds] == [
        "monitoring.coreos.com_prometheusrules.yaml",
        "monitoring.coreos.com_servicemonitors.yaml",
    ]
    kube.apply_files(crds)
    kube.wait_crds_established(
        ["prometheusrules.monitoring.coreos.com", "servicemonitors.monitoring.coreos.com"]
    )
    for ns in ("ops", "openstack", "tenant-b", "nova-system"):
        with contextlib.suppress(KubeError):
            kube.post(
                "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
            )
    rendered = [
        (case, helm_template("nova", "ops", *flags, "--include-crds")) for case, flags in MATRIX.items()
    ]
    rendered += [(f"config/{o}", kustomize(o)) for o in ("default", "namespaced")]
    rendered += [("config/default with its optional bases", with_optional_bases(tmp_path))]
    for case, objects in rendered:
        for doc in objects:
            try:
                _server_dry_run(kube, doc)
            except (KubeError, KeyError) as exc:
                raise AssertionError(
                    f"{case}: {doc['kind']} {doc['metadata']['name']} refused: {exc}"
                ) from exc
    kinds = {d["kind"] for _, objects in rendered for d in objects}
    assert {
        "ServiceMonitor",
        "PrometheusRule",
        "NetworkPolicy",
        "PodDisruptionBudget",
        "Role",
        "ConfigMap",
        "FlowSchema",
        "PriorityLevelConfiguration",
    } <= kinds
