"""Issue 26 item 4: names that collide are never taken over, on the real API server.

On e59040d server-side apply with ``force`` took over any object of a child's name: Nova ``x-a``
(database ``nova``) took Nova ``x``'s (database ``a_nova``) cell0 Database and Grant
``x-a-nova-cell0`` and its finalizer deleted them; a Nova ``web`` adopted a Service ``web`` it
never made (an owner reference the garbage collector follows); Nova ``x-remote`` and Nova ``x``
shared ``x-remote-compute-config``. Now the object stays as it was, the step's condition says
``ChildOwnedByAnother`` and names it, and a Nova named ``...-remote`` is refused on create.
"""

from __future__ import annotations

import asyncio
import re

import pytest

from nova_operator import conditions, naming
from nova_operator.kube import Kube
from nova_operator.kube.errors import KubeError, NotFound
from nova_operator.kube.resources import (
    CONFIGMAPS,
    CRONJOBS,
    DATABASES,
    DEPLOYMENTS,
    GRANTS,
    HPAS,
    HTTPROUTES,
    JOBS,
    NETWORK_POLICIES,
    NOVAS,
    PDBS,
    SECRETS,
    SERVICES,
    USERS,
)
from nova_operator.kube.types import Object
from nova_operator.runtime.request import Request
from tests.integration.nova.inputs import cond, create_inputs, is_ready, nova_body, secret

from .conftest import Operator, Simulator, wait_for  # type: ignore[import-not-found]

pytestmark = pytest.mark.integration

CELL0 = "x-a-nova-cell0"
PUBLISHED = "ComputeConfigPublished"
REMOTE_UID = "5f0c1a2b-3d4e-4f50-8a61-7b8c9d0e1f23"
KINDS = (
    DEPLOYMENTS,
    SERVICES,
    PDBS,
    HPAS,
    NETWORK_POLICIES,
    HTTPROUTES,
    CONFIGMAPS,
    SECRETS,
    JOBS,
    CRONJOBS,
    DATABASES,
    USERS,
    GRANTS,
)


def _controllers(obj: Object) -> list[tuple[str, str]]:
    refs = obj["metadata"].get("ownerReferences") or []
    return [(r["name"], r["uid"]) for r in refs if r.get("controller")]


async def _gone(admin: Kube, ns: str, name: str) -> bool:
    try:
        await admin.get(NOVAS, name, ns)
    except NotFound:
        return True
    return False


async def _children_follow_the_name_table(admin: Kube, ns: str, name: str, database: str) -> None:
    """Every child the Nova made is named as ``naming.CHILD_SUFFIXES`` says (what the refusals rest on)."""
    cell0 = naming.cell0_object_name(name, database)[len(name) :]
    seen = 0
    for ref in KINDS:
        listed = await admin.list(ref, ns, label_selector=f"{naming.INSTANCE_LABEL}={name}")
        for obj in listed.get("items") or []:
            child = obj["metadata"]["name"]
            assert child.startswith(name), (ref.kind, child)
            rest = child[len(name) :]
            allowed = {s.replace(naming.CELL0_PLACEHOLDER, cell0) for s in naming.CHILD_SUFFIXES[ref.kind]}
            if re.fullmatch("-config-[0-9a-f]{8}", rest):
                rest = naming.CONFIG_HASH_PLACEHOLDER
            assert rest in allowed, (ref.kind, child)
            seen += 1
    assert seen >= 25, seen


def _settled_but_the_api(nova: Object) -> bool:
    """DeploymentReady is the refusal; every other input of Ready is True (the rest of the Nova went on)
    but NovaAPIReady, which waits for the endpoint the Deployment step publishes."""
    waiting = (conditions.DEPLOYMENT_READY, conditions.NOVA_API_READY)
    others = [c for c in conditions.NOVA_READY_INPUTS if c not in waiting]
    done = ("ChildOwnedByAnother", "DeploymentReady")  # the refusal now; on e59040d the adoption
    return cond(nova, conditions.DEPLOYMENT_READY).get("reason") in done and all(
        cond(nova, c).get("status") == "True" for c in others
    )


async def _delete(admin: Kube, operator: Operator, ns: str, name: str) -> None:
    """Delete the Nova and wait for its finalizer, playing the 30 s database wait at once."""
    await admin.delete(NOVAS, name, ns)
    async with asyncio.timeout(40):
        while not await _gone(admin, ns, name):
            operator.controller.enqueue(Request(ns, name))
            await asyncio.sleep(0.5)


async def test_deleting_a_nova_leaves_the_cell0_objects_of_the_nova_whose_name_it_shares(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    await create_inputs(admin, ns)
    x_body = nova_body("x")
    x_body["spec"]["database"]["database"] = "a_nova"
    await admin.create(NOVAS, x_body, ns)
    x = await wait_for(lambda: admin.get(NOVAS, "x", ns), is_ready, within=60)
    x_uid = x["metadata"]["uid"]
    await _children_follow_the_name_table(admin, ns, "x", "a_nova")
    before = {ref: await admin.get(ref, CELL0, ns) for ref in (DATABASES, GRANTS)}
    assert before[DATABASES]["spec"]["name"] == "a_nova_cell0"

    await admin.create(NOVAS, nova_body("x-a"), ns)  # database "nova": cell0 object x-a-nova-cell0 too
    x_a = await wait_for(  # refused now; on e59040d it took the objects over and went on
        lambda: admin.get(NOVAS, "x-a", ns),
        lambda n: cond(n, "DatabaseReady").get("reason") in ("ChildOwnedByAnother", "DatabaseSynced"),
        within=60,
    )
    for ref, obj in before.items():  # neither changed nor adopted
        now = await admin.get(ref, CELL0, ns)
        assert _controllers(now) == [("x", x_uid)], ref
        assert now["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"], ref
    message = cond(x_a, "DatabaseReady")["message"]
    assert cond(x_a, "DatabaseReady")["reason"] == "ChildOwnedByAnother"
    assert f"Database {ns}/{CELL0} exists and is not this Nova's" in message, message
    assert "another owner controls it" in message, message  # issue 36: no holder named
    assert x_uid not in message, message

    # a pass over the refused Nova writes nothing more (its condition is already there)
    writes = operator.writes()
    for _ in range(3):
        await operator.force_pass("x-a")
    assert operator.writes() == writes

    await _delete(admin, operator, ns, "x-a")
    for ref in (DATABASES, GRANTS):  # Nova x's cell0 objects survive x-a's deletion
        now = await admin.get(ref, CELL0, ns)
        assert _controllers(now) == [("x", x_uid)], ref
        assert now["metadata"].get("deletionTimestamp") is None, ref
    for ref, name in ((DATABASES, "x-a"), (DATABASES, "x-a-api")):  # x-a's own were cleaned up
        with pytest.raises(NotFound):
            await admin.get(ref, name, ns)
    x = await admin.get(NOVAS, "x", ns)
    assert is_ready(x)


async def test_a_service_someone_else_made_is_neither_adopted_nor_changed(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    await create_inputs(admin, ns)
    web = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80}]},
    }
    theirs = await admin.create(SERVICES, web, ns)
    await admin.create(NOVAS, nova_body("web"), ns)
    nova = await wait_for(lambda: admin.get(NOVAS, "web", ns), _settled_but_the_api, within=60)
    now = await admin.get(SERVICES, "web", ns)
    assert "ownerReferences" not in now["metadata"]  # nothing for the garbage collector to follow
    assert now["metadata"]["labels"] == {"app": "web"}
    assert now["spec"]["ports"] == theirs["spec"]["ports"]
    assert now["metadata"]["resourceVersion"] == theirs["metadata"]["resourceVersion"]
    message = cond(nova, "DeploymentReady")["message"]
    assert cond(nova, "DeploymentReady")["reason"] == "ChildOwnedByAnother"
    assert f"Service {ns}/web exists and is not this Nova's" in message, message
    assert "no controller owner reference" in message, message
    assert cond(nova, "Ready").get("status") == "False"

    writes = operator.writes()  # settled on the refusal: further passes write nothing
    for _ in range(3):
        await operator.force_pass("web")
    assert operator.writes() == writes

    # the Nova is deleted: the Service stays, untouched
    await _delete(admin, operator, ns, "web")
    after = await admin.get(SERVICES, "web", ns)
    assert after["metadata"]["resourceVersion"] == theirs["metadata"]["resourceVersion"]


async def test_the_service_is_made_once_the_stranger_is_gone(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    await create_inputs(admin, ns)
    web = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}}
    web["spec"] = {"ports": [{"port": 80}]}
    await admin.create(SERVICES, web, ns)
    await admin.create(NOVAS, nova_body("web"), ns)
    await wait_for(
        lambda: admin.get(NOVAS, "web", ns),
        lambda n: cond(n, "DeploymentReady").get("reason") == "ChildOwnedByAnother",
        within=60,
    )
    await admin.delete(SERVICES, "web", ns)
    await operator.force_pass("web")  # the 60 s poll, played now
    nova = await wait_for(lambda: admin.get(NOVAS, "web", ns), is_ready, within=60)
    service = await admin.get(SERVICES, "web", ns)
    assert _controllers(service) == [("web", nova["metadata"]["uid"])]


async def test_a_nova_named_like_a_remote_contract_is_refused_and_a_held_contract_is_left_alone(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    await create_inputs(admin, ns)
    # Nova x-remote's compute contract, as an operator that admitted that name wrote it: applied by
    # the operator's field manager, controlled by that Nova (the same manager's apply for Nova x
    # dropped this reference on e59040d and took the Secret over)
    held = secret("x-remote-compute-config", {"nova-compute.conf": "[DEFAULT]\n"})
    held["metadata"]["ownerReferences"] = [
        {
            "apiVersion": NOVAS.api_version,
            "kind": "Nova",
            "name": "x-remote",
            "uid": REMOTE_UID,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    theirs = await admin.apply(SECRETS, held, field_manager="nova-operator", namespace=ns)
    await admin.create(SECRETS, secret("rabbitmq-ca", {"ca.crt": "FAKE CA"}), ns)
    remote_url = "rabbit://nova:s3cret-remote@bus.example.org:5671/"
    await admin.create(SECRETS, secret("remote-bus", {"transport_url": remote_url}), ns)
    body = nova_body(
        "x",
        remoteCompute={
            "keystoneEndpoint": "https://keystone.example.org/v3",
            "transportURLSecretRef": {"name": "remote-bus"},
        },
    )
    body["spec"]["messaging"]["tls"] = {"caBundleSecretRef": {"name": "rabbitmq-ca"}}
    await admin.create(NOVAS, body, ns)
    nova = await wait_for(
        lambda: admin.get(NOVAS, "x", ns),
        lambda n: cond(n, "ComputeConfigReady").get("reason") in ("ChildOwnedByAnother", PUBLISHED),
        within=60,
    )
    now = await admin.get(SECRETS, "x-remote-compute-config", ns)
    assert now["data"] == theirs["data"]
    assert now["metadata"]["resourceVersion"] == theirs["metadata"]["resourceVersion"]
    message = cond(nova, "ComputeConfigReady")["message"]
    assert cond(nova, "ComputeConfigReady")["reason"] == "ChildOwnedByAnother"
    assert f"Secret {ns}/x-remote-compute-config exists and is not this Nova's" in message, message
    assert "another owner controls it" in message, message  # issue 36: no holder named
    assert REMOTE_UID not in message, message
    assert "remoteComputeConfigSecretRef" not in (nova.get("status") or {})

    # the Nova whose compute contract would be that name is refused on create
    with pytest.raises(KubeError) as refused:
        await admin.create(NOVAS, nova_body("x-remote"), ns)
    assert refused.value.status == 422
    assert 'name must not end in "-remote"' in str(refused.value)
