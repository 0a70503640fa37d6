"""The chart's FlowSchema and PriorityLevelConfiguration, applied to a real API server: the
operator's Lease requests are served in their own priority level, its other requests are not.

The API server names the FlowSchema and priority level that served a request in the
``X-Kubernetes-PF-FlowSchema-UID`` and ``X-Kubernetes-PF-PriorityLevel-UID`` response headers
(API priority and fairness); the operator's static token is its ServiceAccount's user.
"""

from __future__ import annotations

import contextlib
import ssl
import time
import urllib.error
import urllib.request
from typing import Any

from simcluster import ControlPlane
from simcluster.client.kube import Kube, KubeError
from simcluster.platform.controlplane import OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT
from simcluster.platform.flowcontrol import lease_flow_control
from simcluster.platform.installtools import by_kind, helm_template

FLOWCONTROL = "/apis/flowcontrol.apiserver.k8s.io/v1"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{OPERATOR_NAMESPACE}/leases"


def served_by(plane: ControlPlane, path: str) -> tuple[str, str]:
    """(FlowSchema uid, priority level uid) of a GET of ``path`` sent as the operator."""
    req = urllib.request.Request(plane.server + path, method="GET")
    req.add_header("Authorization", f"Bearer {plane.operator_token}")
    ctx = ssl.create_default_context(cafile=str(plane.ca_file))
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
            headers = resp.headers
    except urllib.error.HTTPError as exc:  # 404 or 403: classified all the same (before authorization)
        headers = exc.headers
    return (
        headers.get("X-Kubernetes-PF-FlowSchema-UID", ""),
        headers.get("X-Kubernetes-PF-PriorityLevel-UID", ""),
    )


def chart_objects() -> tuple[dict[str, Any], dict[str, Any]]:
    """The chart's PriorityLevelConfiguration and FlowSchema, for the operator's ServiceAccount here."""
    rendered = helm_template(
        "nova-operator",
        OPERATOR_NAMESPACE,
        "--set",
        "serviceAccount.create=false",
        "--set",
        f"serviceAccount.name={OPERATOR_SERVICE_ACCOUNT}",
    )
    (level,) = by_kind(rendered, "PriorityLevelConfiguration")
    (schema,) = by_kind(rendered, "FlowSchema")
    return level, schema


def delete(admin: Kube, level: dict[str, Any], schema: dict[str, Any]) -> None:
    for path in (
        f"{FLOWCONTROL}/flowschemas/{schema['metadata']['name']}",
        f"{FLOWCONTROL}/prioritylevelconfigurations/{level['metadata']['name']}",
    ):
        with contextlib.suppress(KubeError):
            admin.delete(path)


def test_the_operators_lease_requests_are_served_in_their_own_priority_level(
    control_plane: ControlPlane,
) -> None:
    admin = Kube(control_plane.server, control_plane.admin_token, control_plane.ca_file)
    level, schema = chart_objects()
    with contextlib.suppress(KubeError):
        admin.post(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OPERATOR_NAMESPACE}},
        )
    try:
        level_uid = admin.post(f"{FLOWCONTROL}/prioritylevelconfigurations", level)["metadata"]["uid"]
        schema_uid = admin.post(f"{FLOWCONTROL}/flowschemas", schema)["metadata"]["uid"]
        deadline = time.monotonic() + 60
        while served_by(control_plane, f"{LEASES}/nova-operator-leader") != (schema_uid, level_uid):
            assert time.monotonic() < deadline, "the API server never served the Lease in the new level"
            time.sleep(0.5)
        # the operator's other requests stay where they were
        other_schema, other_level = served_by(
            control_plane, f"/api/v1/namespaces/{OPERATOR_NAMESPACE}/configmaps"
        )
        assert other_schema
        assert (other_schema, other_level) != (schema_uid, level_uid)
        # and nobody else's Lease requests come in
        assert (
            served_by(control_plane, "/apis/coordination.k8s.io/v1/namespaces/default/leases/x")[0]
            != schema_uid
        )
        status = admin.get(f"{FLOWCONTROL}/flowschemas/{schema['metadata']['name']}")["status"]
        dangling = [c for c in status.get("conditions", []) if c["type"] == "Dangling"]
        assert [c["status"] for c in dangling] == ["False"]
    finally:
        delete(admin, level, schema)


def test_the_test_clusters_install_the_same_priority_level_for_the_operators_leases(
    control_plane: ControlPlane,
) -> None:
    """``make run``, the real tier, e2e and the benchmarks install what the chart ships
    (``simcluster.platform.flowcontrol``): the same specs as the chart, and the operator's Lease
    requests served in that level."""
    chart_level, chart_schema = chart_objects()
    level, schema = lease_flow_control()
    assert level["spec"] == chart_level["spec"]
    chart_schema["spec"]["priorityLevelConfiguration"]["name"] = level["metadata"]["name"]
    assert schema["spec"] == chart_schema["spec"]
    admin = Kube(control_plane.server, control_plane.admin_token, control_plane.ca_file)
    try:
        for doc in (level, schema):
            admin.apply(doc)
        level_uid = admin.get(f"{FLOWCONTROL}/prioritylevelconfigurations/{level['metadata']['name']}")
        schema_uid = admin.get(f"{FLOWCONTROL}/flowschemas/{schema['metadata']['name']}")
        want = (schema_uid["metadata"]["uid"], level_uid["metadata"]["uid"])
        deadline = time.monotonic() + 60
        while served_by(control_plane, f"{LEASES}/nova-operator-leader") != want:
            assert time.monotonic() < deadline, "the API server never served the Lease in that level"
            time.sleep(0.5)
    finally:
        delete(admin, level, schema)
