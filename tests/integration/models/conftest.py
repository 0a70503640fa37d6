"""Install the generated CRDs once per session and hand tests a small custom-object client."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException
from simcluster import ControlPlane

from nova_operator.models.crd import GROUP, VERSION, render_crds


async def _install(plane: ControlPlane) -> None:
    cfg = client.Configuration()
    await config.load_kube_config(
        config_file=str(plane.kubeconfig), context="admin", client_configuration=cfg
    )
    async with client.ApiClient(configuration=cfg) as api:
        ext = client.ApiextensionsV1Api(api)
        names = []
        for text in render_crds().values():
            body = yaml.safe_load(text)
            names.append(body["metadata"]["name"])
            try:
                await ext.create_custom_resource_definition(body)
            except ApiException as exc:
                if exc.status != 409:
                    raise
                # Another tier installed it first in this session: make sure ours is what is served.
                live = await ext.read_custom_resource_definition(body["metadata"]["name"])
                body["metadata"]["resourceVersion"] = live.metadata.resource_version
                await ext.replace_custom_resource_definition(body["metadata"]["name"], body)
        for name in names:
            for _ in range(200):
                crd = await ext.read_custom_resource_definition(name)
                conds = {c.type: c.status for c in (crd.status.conditions or [])}
                if conds.get("Established") == "True":
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError(f"CRD {name} never became Established")


@pytest.fixture(scope="session")
def crds(control_plane: ControlPlane) -> ControlPlane:
    """The generated CRDs, installed (and Established) once per session."""
    asyncio.run(_install(control_plane))
    return control_plane


class Objects:
    """create / get / replace / patch of Nova and NovaCompute objects in one namespace."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self._api = client.CustomObjectsApi(api)
        self.namespace = namespace

    async def create(self, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await self._api.create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, plural, copy.deepcopy(body)
        )
        return result

    async def get(self, plural: str, name: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._api.get_namespaced_custom_object(
            GROUP, VERSION, self.namespace, plural, name
        )
        return result

    async def replace(self, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await self._api.replace_namespaced_custom_object(
            GROUP, VERSION, self.namespace, plural, body["metadata"]["name"], copy.deepcopy(body)
        )
        return result

    async def replace_status(self, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await self._api.replace_namespaced_custom_object_status(
            GROUP, VERSION, self.namespace, plural, body["metadata"]["name"], copy.deepcopy(body)
        )
        return result


@pytest.fixture
async def objects(crds: ControlPlane, admin_api: client.ApiClient, namespace: str) -> Objects:
    """Custom objects in this test's fresh namespace, with the CRDs installed."""
    return Objects(admin_api, namespace)
