"""``apply.create`` against the real API server: a server-side apply carrying ``NO_VERSION`` creates an
absent object (owned as any apply's) and is refused, with nothing written, when the name is taken.

The create-first write of a new Nova's children rests on these two answers of the API server; a
server that compared the precondition on a create, or ignored it on an update, fails here.
"""

from __future__ import annotations

import pytest

from nova_operator import apply
from nova_operator.kube import Kube
from nova_operator.kube.resources import CONFIGMAPS, SECRETS

pytestmark = pytest.mark.integration


def config_map(namespace: str, **data: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "child", "namespace": namespace},
        "data": dict(data),
    }


async def test_an_absent_object_is_created_and_owned_by_the_operators_apply(
    kube: Kube, namespace: str
) -> None:
    made = await apply.create(kube, config_map(namespace, a="1", b="2"))
    assert made is not None
    assert made["metadata"]["resourceVersion"] != apply.NO_VERSION
    managers = [(m["manager"], m["operation"]) for m in made["metadata"]["managedFields"]]
    assert managers == [(apply.FIELD_MANAGER, "Apply")]
    # so a later apply that stops sending a field removes it, as after any apply's create
    live = await apply.apply(kube, config_map(namespace, a="1"), cached=made)
    assert live["data"] == {"a": "1"}


async def test_an_existing_object_refuses_the_create_and_is_left_as_it_was(
    kube: Kube, namespace: str
) -> None:
    theirs = await kube.create(CONFIGMAPS, config_map(namespace, mine="no"), namespace)
    assert await apply.create(kube, config_map(namespace, a="1")) is None
    after = await kube.get(CONFIGMAPS, "child", namespace)
    assert after["metadata"]["resourceVersion"] == theirs["metadata"]["resourceVersion"]
    assert after["data"] == {"mine": "no"}
    assert not (after["metadata"].get("annotations") or {}).get(apply.APPLIED_DIGEST)


async def test_a_secret_is_created_the_same_way(kube: Kube, namespace: str) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "derived", "namespace": namespace},
        "data": {"password": "cGFzcw=="},
    }
    made = await apply.create(kube, body, digest_key=b"key")
    assert made is not None
    assert made["data"] == {"password": "cGFzcw=="}
    assert await apply.create(kube, body, digest_key=b"key") is None
    assert (await kube.get(SECRETS, "derived", namespace))["metadata"]["resourceVersion"] == made["metadata"][
        "resourceVersion"
    ]
