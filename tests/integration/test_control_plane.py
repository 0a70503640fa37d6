"""The test control plane is a real kube-apiserver: CEL rules, RBAC and the status split hold."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

pytestmark = pytest.mark.integration

GROUP = "probe.test.invalid"


def _widget_crd(plural: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": plural[:-1], "kind": plural.capitalize()[:-1]},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {
                                        "min": {"type": "integer"},
                                        "max": {"type": "integer"},
                                    },
                                    "x-kubernetes-validations": [
                                        {"rule": "self.min <= self.max", "message": "min must not exceed max"}
                                    ],
                                }
                            },
                        }
                    },
                }
            ],
        },
    }


async def _install_crd(api: client.ApiClient, body: dict[str, Any]) -> None:
    ext = client.ApiextensionsV1Api(api)
    await ext.create_custom_resource_definition(body)
    for _ in range(100):
        crd = await ext.read_custom_resource_definition(body["metadata"]["name"])
        conds = {c.type: c.status for c in (crd.status.conditions or [])}
        if conds.get("Established") == "True":
            return
        await asyncio.sleep(0.1)
    raise AssertionError("CRD never became Established")


async def test_cel_rule_rejects_a_violating_object_and_accepts_a_valid_one(
    admin_api: client.ApiClient, namespace: str
) -> None:
    plural = f"w{uuid.uuid4().hex[:8]}s"
    await _install_crd(admin_api, _widget_crd(plural))
    objs = client.CustomObjectsApi(admin_api)
    kind = plural.capitalize()[:-1]

    def widget(name: str, lo: int, hi: int) -> dict[str, Any]:
        return {
            "apiVersion": f"{GROUP}/v1",
            "kind": kind,
            "metadata": {"name": name},
            "spec": {"min": lo, "max": hi},
        }

    with pytest.raises(ApiException) as err:
        await objs.create_namespaced_custom_object(GROUP, "v1", namespace, plural, widget("bad", 5, 1))
    assert err.value.status == 422
    assert "min must not exceed max" in err.value.body

    created = await objs.create_namespaced_custom_object(GROUP, "v1", namespace, plural, widget("good", 1, 5))
    assert created["spec"] == {"min": 1, "max": 5}


async def test_operator_token_is_refused_what_its_rbac_does_not_grant(
    operator_api: client.ApiClient, admin_api: client.ApiClient, namespace: str
) -> None:
    # The operator's ServiceAccount has no grant on PodTemplates (config/rbac never names them).
    with pytest.raises(ApiException) as err:
        await client.CoreV1Api(operator_api).list_namespaced_pod_template(namespace)
    assert err.value.status == 403
    assert "system:serviceaccount:nova-system:nova-operator" in err.value.body

    # A RoleBinding granting exactly that makes the same call succeed: the identity is the SA.
    rbac = client.RbacAuthorizationV1Api(admin_api)
    await rbac.create_namespaced_role(
        namespace,
        {
            "metadata": {"name": "read-podtemplates"},
            "rules": [{"apiGroups": [""], "resources": ["podtemplates"], "verbs": ["list"]}],
        },
    )
    await rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "read-podtemplates"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-podtemplates"},
            "subjects": [{"kind": "ServiceAccount", "name": "nova-operator", "namespace": "nova-system"}],
        },
    )
    for _ in range(50):  # the RBAC authorizer's informer catches up within milliseconds
        try:
            await client.CoreV1Api(operator_api).list_namespaced_pod_template(namespace)
            break
        except ApiException as exc:
            if exc.status != 403:
                raise
            await asyncio.sleep(0.1)
    else:
        raise AssertionError("the RoleBinding never took effect")
    # ... and still nothing more than that.
    with pytest.raises(ApiException) as err:
        await client.CoreV1Api(operator_api).delete_namespaced_pod_template("anything", namespace)
    assert err.value.status == 403
