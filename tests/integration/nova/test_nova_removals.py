"""Edits that only remove something converge on the real API server (issue: removal-safe apply).

Each case starts from a converged Nova that renders a field, removes the field from the
spec, and asserts the child's live object no longer carries it, while fields other managers
own (a user's annotation, an HPA's replica count) stay untouched.
"""

from __future__ import annotations

import base64
import contextlib
import copy

from nova_operator import apply
from nova_operator.kube import Kube
from nova_operator.kube.errors import Conflict
from nova_operator.kube.resources import (
    CRONJOBS,
    DEPLOYMENTS,
    HTTPROUTES,
    NETWORK_POLICIES,
    NOVAS,
    PRIORITY_CLASSES,
    SECRETS,
)
from nova_operator.kube.types import Object
from tests.integration.nova.inputs import create_inputs, events_of, is_ready, nova_body

from .conftest import Operator, Simulator, wait_for  # type: ignore[import-not-found]

PLACEMENT: Object = {
    "priorityClassName": "nova-critical",
    "nodeSelector": {"node-role.example.org/control": "true"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "control", "effect": "NoSchedule"}],
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}
                ]
            }
        }
    },
    "resources": {"limits": {"cpu": "2", "memory": "1Gi"}},
}


async def converge(admin: Kube, ns: str, spec: Object | None = None) -> Object:
    """Replace the Nova's spec (when given) and wait for Ready at the new generation."""
    nova = await admin.get(NOVAS, "nova", ns)
    for _ in range(20 if spec is not None else 0):
        nova["spec"] = spec
        try:
            nova = await admin.replace(NOVAS, nova, ns)
            break
        except Conflict:  # the operator wrote the status meanwhile
            nova = await admin.get(NOVAS, "nova", ns)
    generation = nova["metadata"]["generation"]
    return await wait_for(
        lambda: admin.get(NOVAS, "nova", ns),
        lambda n: is_ready(n) and n["status"]["observedGeneration"] == generation,
        within=60,
    )


async def hpa_scales(admin: Kube, ns: str, replicas: int) -> None:
    """What an HPA does to the API Deployment: its scale subresource, as its own field manager."""
    await admin.patch(
        DEPLOYMENTS,
        "nova",
        {"spec": {"replicas": replicas}},
        ns,
        subresource="scale",
        field_manager="horizontal-pod-autoscaler",
    )


def pod_spec(obj: Object) -> Object:
    if obj["kind"] == "CronJob":
        return dict(obj["spec"]["jobTemplate"]["spec"]["template"]["spec"])
    return dict(obj["spec"]["template"]["spec"])


def container_resources(obj: Object) -> Object:
    return dict(pod_spec(obj)["containers"][0]["resources"])


async def test_removed_fields_disappear_from_every_kind_of_child_and_third_party_fields_stay(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    await create_inputs(admin, ns)
    with contextlib.suppress(Conflict):  # cluster-scoped: another test may have made it
        await admin.create(
            PRIORITY_CLASSES,
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": PLACEMENT["priorityClassName"]},
                "value": 1000,
            },
        )
    body = nova_body(
        gateway={
            "hostname": "nova.example.org",
            "annotations": {"gateway.example.org/tier": "public"},
            "parentRef": {"name": "public", "namespace": "gateways", "sectionName": "https"},
        },
        networkPolicy={
            "ingress": [
                {
                    "namespaceSelector": {"matchLabels": {"team": "edge"}},
                    "podSelector": {"matchLabels": {"app": "ingress"}},
                }
            ]
        },
        autoscaling={"maxReplicas": 5, "targetCPUUtilization": 80},
        scheduler={"deployment": {"replicas": 1, **copy.deepcopy(PLACEMENT)}},
        jobs=copy.deepcopy(PLACEMENT),
        dbArchive={"retentionDays": 30},
    )
    await admin.create(NOVAS, body, ns)
    nova = await converge(admin, ns)

    # the converged state carries every field the edit below removes
    scheduler = await admin.get(DEPLOYMENTS, "nova-scheduler", ns)
    archive = await admin.get(CRONJOBS, "nova-db-archive", ns)
    for child in (scheduler, archive):
        spec = pod_spec(child)
        for key in ("priorityClassName", "nodeSelector", "tolerations", "affinity"):
            assert spec[key] == PLACEMENT[key], (child["kind"], key)
        assert container_resources(child)["limits"]["cpu"] == "2"
    assert {"name": "RETENTION_DAYS", "value": "30"} in pod_spec(archive)["containers"][0]["env"]
    api = await admin.get(DEPLOYMENTS, "nova", ns)
    assert len(pod_spec(api)["topologySpreadConstraints"]) == 2  # the defaults
    route = await admin.get(HTTPROUTES, "nova", ns)
    assert route["metadata"]["annotations"]["gateway.example.org/tier"] == "public"
    assert route["spec"]["parentRefs"][0]["namespace"] == "gateways"
    assert route["spec"]["parentRefs"][0]["sectionName"] == "https"
    policy = await admin.get(NETWORK_POLICIES, "nova", ns)
    assert any("podSelector" in peer for rule in policy["spec"]["ingress"] for peer in rule["from"])

    # third parties: a user's annotation on a Deployment, an HPA's replica count on the API
    await admin.apply(
        DEPLOYMENTS,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "nova-scheduler", "annotations": {"example.org/on-call": "team-a"}},
        },
        field_manager="kubectl-annotate",
        namespace=ns,
        force=False,
    )
    await hpa_scales(admin, ns, 4)

    # one edit removes them all
    spec = copy.deepcopy(nova["spec"])
    spec["api"]["deployment"]["topologySpreadConstraints"] = []
    spec["scheduler"]["deployment"] = {"replicas": 1}
    spec.pop("jobs")
    spec.pop("dbArchive")
    spec["gateway"] = {"hostname": "nova.example.org", "parentRef": {"name": "public"}}
    spec["networkPolicy"] = {"ingress": [{"namespaceSelector": {"matchLabels": {"team": "edge"}}}]}
    await converge(admin, ns, spec)

    scheduler = await admin.get(DEPLOYMENTS, "nova-scheduler", ns)
    archive = await admin.get(CRONJOBS, "nova-db-archive", ns)
    for child in (scheduler, archive):
        spec_now = pod_spec(child)
        for key in ("priorityClassName", "nodeSelector", "tolerations", "affinity"):
            assert key not in spec_now, (child["kind"], key, spec_now.get(key))
        assert "cpu" not in (container_resources(child).get("limits") or {}), child["kind"]
    env = {e["name"] for e in pod_spec(archive)["containers"][0]["env"]}
    assert "RETENTION_DAYS" not in env
    assert {"MAX_ROWS", "SLEEP"} <= env
    warned = [e for e in await events_of(admin, ns) if e[1] == "DBArchiveRetentionReduced"]
    assert [(t, m.split(":")[0]) for t, _, m in warned] == [
        ("Warning", "spec.dbArchive.retentionDays removed (was 30)")
    ]
    api = await admin.get(DEPLOYMENTS, "nova", ns)
    assert "topologySpreadConstraints" not in pod_spec(api)
    route = await admin.get(HTTPROUTES, "nova", ns)
    assert "gateway.example.org/tier" not in (route["metadata"].get("annotations") or {})
    assert route["spec"]["parentRefs"] == [
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "public", "namespace": ns}
    ]
    policy = await admin.get(NETWORK_POLICIES, "nova", ns)
    assert not any("podSelector" in peer for rule in policy["spec"]["ingress"] for peer in rule["from"])

    # what other managers own was left alone through all of it
    assert scheduler["metadata"]["annotations"]["example.org/on-call"] == "team-a"
    assert api["spec"]["replicas"] == 4
    managers = {e["manager"] for e in scheduler["metadata"]["managedFields"]}
    assert {"kubectl-annotate", apply.FIELD_MANAGER} <= managers

    # and the converged state is quiet again
    simulator.hold_jobs = True
    writes = operator.writes()
    for _ in range(10):
        await operator.force_pass("nova")
    assert operator.writes() - writes == 0


async def test_a_key_someone_adds_to_a_derived_secret_is_removed(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    await create_inputs(admin, ns)
    await admin.create(NOVAS, nova_body(), ns)
    await converge(admin, ns)
    extra = base64.b64encode(b"rabbit://other@elsewhere:5672/").decode()
    for name, key in (("nova-transport-url", "transport_url"), ("nova-db-connection", "connection")):
        await admin.patch(
            SECRETS,
            name,
            {"data": {"backup_url": extra}, "metadata": {"annotations": {"example.org/note": "kept"}}},
            ns,
            field_manager="kubectl-edit",
        )
        live = await wait_for(
            lambda name=name: admin.get(SECRETS, name, ns),
            lambda s, key=key: sorted(s["data"]) == [key],
            within=20,
        )
        assert live["metadata"]["annotations"]["example.org/note"] == "kept"


async def test_turning_autoscaling_on_hands_the_running_replica_count_to_the_hpa(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    await create_inputs(admin, ns)
    await admin.create(NOVAS, nova_body(api={"deployment": {"replicas": 2}}), ns)
    nova = await converge(admin, ns)
    assert (await admin.get(DEPLOYMENTS, "nova", ns))["spec"]["replicas"] == 2
    spec = copy.deepcopy(nova["spec"])
    spec["autoscaling"] = {"maxReplicas": 6, "targetCPUUtilization": 80}
    await converge(admin, ns, spec)
    api = await admin.get(DEPLOYMENTS, "nova", ns)
    # the operator no longer sends replicas, yet the count is not reset to the default of 1
    assert api["spec"]["replicas"] == 2
    owners = {
        e["manager"] for e in api["metadata"]["managedFields"] if "f:replicas" in str(e.get("fieldsV1"))
    }
    assert apply.FIELD_MANAGER not in owners
    # the HPA scales; the operator's later applies leave its count alone
    await hpa_scales(admin, ns, 5)
    spec["api"]["deployment"]["topologySpreadConstraints"] = []
    await converge(admin, ns, spec)
    assert (await admin.get(DEPLOYMENTS, "nova", ns))["spec"]["replicas"] == 5
    # autoscaling off: the spec's count is the operator's again
    spec.pop("autoscaling")
    await converge(admin, ns, spec)
    assert (await admin.get(DEPLOYMENTS, "nova", ns))["spec"]["replicas"] == 2
