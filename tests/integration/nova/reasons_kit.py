"""What the step-by-step condition tests share: cluster-scoped objects made for a test and removed
after it, PriorityClasses, a step's condition as (status, reason, message), the writes a recorder
saw, a pass that finds its config handed on."""

from __future__ import annotations

from nova_operator.kube import Kube
from nova_operator.kube.resources import (
    ResourceRef,
)
from nova_operator.kube.types import Object
from nova_operator.metrics import WRITE_VERBS
from nova_operator.reconcilers.nova.context import PassContext
from nova_operator.runtime.request import Result
from tests.integration.nova.requests import Recorder

READY = [
    {
        "type": "Ready",
        "status": "True",
        "reason": "Ready",
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
]


async def make(
    admin: Kube, made: list[tuple[ResourceRef, str]], ref: ResourceRef, body: Object, *, ready: bool = False
) -> None:
    """A cluster-scoped object, Ready through its status subresource when asked."""
    await admin.create(ref, body)
    made.append((ref, body["metadata"]["name"]))
    if ready:
        await admin.patch_status(ref, body["metadata"]["name"], {"status": {"conditions": READY}})


def priority_class(name: str, value: int) -> Object:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def reason(ctx: PassContext, cond_type: str) -> tuple[str, str, str]:
    c = ctx.condition(cond_type)
    assert c is not None, cond_type
    return str(c["status"]), str(c["reason"]), str(c["message"])


def written(kube: Recorder) -> list[tuple[str, str, str]]:
    return [(v, r, n) for v, r, n, _ in kube.calls if v in WRITE_VERBS]


async def with_config(ctx: PassContext) -> PassContext:
    ctx.state.config_map = "nova-config-abc"
    return ctx


async def no_upgrade(ctx: PassContext, installed: str, target: str) -> Result:
    raise AssertionError("no upgrade expected")
