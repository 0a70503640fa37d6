"""The secret-store gate follows the stores through a watch where External Secrets is served."""

from __future__ import annotations

from typing import Any

import pytest

from nova_operator.kube import Kube
from nova_operator.kube.resources import CLUSTER_SECRET_STORES, NOVAS, SECRET_STORES
from nova_operator.kube.types import Object
from tests.integration.nova.inputs import cond, create_inputs, nova_body

from .conftest import Operator, ready_condition, wait_for  # type: ignore[import-not-found]

SECRET_POLL = 15.0  # the Secrets step's poll: each wait below is much shorter


def store(kind: str, name: str) -> Object:
    return {"apiVersion": SECRET_STORES.api_version, "kind": kind, "metadata": {"name": name}, "spec": {}}


def gate(reason: str, fragment: str) -> Any:
    def check(nova: Object) -> bool:
        c = cond(nova, "SecretsReady")
        return c.get("reason") == reason and fragment in c.get("message", "")

    return check


def past_the_store_gate(nova: Object) -> bool:
    return cond(nova, "SecretsReady").get("reason") not in ("SecretStoreNotReady", None)


@pytest.mark.parametrize("operator", [{"secret_stores": True, "cluster_secret_stores": True}], indirect=True)
async def test_a_store_turning_ready_wakes_the_nova_at_once(
    external_secrets: None, admin: Kube, operator: Operator, namespace: str
) -> None:
    ns = namespace
    assert SECRET_STORES in operator.controller.reconciler.caches  # type: ignore[attr-defined]
    await create_inputs(admin, ns)
    await admin.create(SECRET_STORES, store("SecretStore", "vault"), ns)
    await admin.create(NOVAS, nova_body(secretStoreRef={"kind": "SecretStore", "name": "vault"}), ns)
    get = lambda: admin.get(NOVAS, "nova", ns)  # noqa: E731
    await wait_for(get, gate("SecretStoreNotReady", "SecretStore vault is not Ready"), within=10)
    await admin.patch_status(SECRET_STORES, "vault", {"status": {"conditions": ready_condition()}}, ns)
    await wait_for(get, past_the_store_gate, within=SECRET_POLL / 3)

    # a ClusterSecretStore that appears later, and Ready, is seen through its watch too
    global_store = f"global-{ns}"
    await admin.patch(
        NOVAS, "nova", {"spec": {"secretStoreRef": {"kind": "ClusterSecretStore", "name": global_store}}}, ns
    )
    await wait_for(
        get, gate("SecretStoreNotReady", f"ClusterSecretStore {global_store} not found"), within=10
    )
    await admin.create(CLUSTER_SECRET_STORES, store("ClusterSecretStore", global_store))
    try:
        await wait_for(
            get,
            gate("SecretStoreNotReady", f"ClusterSecretStore {global_store} is not Ready"),
            within=SECRET_POLL / 3,
        )
        await admin.patch_status(
            CLUSTER_SECRET_STORES, global_store, {"status": {"conditions": ready_condition()}}
        )
        await wait_for(get, past_the_store_gate, within=SECRET_POLL / 3)
    finally:
        await admin.delete(CLUSTER_SECRET_STORES, global_store)
