"""The NovaCompute pass over an in-memory API-server stand-in (a helper module, not a test module).

Left for the tests outside tests/unit/reconcilers/compute that still build a NovaCompute pass here
(tests/unit/test_secret_refs.py, tests/unit/reconcilers/test_keyed_digests.py and, in
tests/unit/reconcilers/nova, test_secret_config.py and test_config_warnings.py). The NovaCompute
step tests run on kube-apiserver: tests/integration/novacompute/passes.py.
"""

from __future__ import annotations

import base64
import copy
import pathlib
from datetime import UTC, datetime
from typing import Any

import yaml

from nova_operator.decisions.nodeplan import Plan
from nova_operator.kube import errors, owners
from nova_operator.kube.types import Object
from nova_operator.models.novacompute import NovaCompute
from nova_operator.reconcilers.compute.context import ComputePass, ComputeSettings
from nova_operator.renderers import compute_pool
from tests.compute_api import FakeCompute


class FakeKube:
    """get / create / delete on a dict of (plural, name); list answers ``pods`` whatever its selector."""

    def __init__(
        self, pods: list[Object] | None = None, objects: dict[tuple[str, str], Object] | None = None
    ) -> None:
        self.pods = pods or []
        self.objects = objects or {}
        self.lists = 0
        self.created: list[Object] = []
        self.deleted: list[tuple[str, str]] = []

    async def list(
        self, ref: Any, namespace: str | None = None, *, label_selector: str | None = None
    ) -> Object:
        self.lists += 1
        return {"items": list(self.pods)}

    async def get(self, ref: Any, name: str, namespace: str | None = None) -> Object:
        try:
            return copy.deepcopy(self.objects[(ref.plural, name)])
        except KeyError:
            raise errors.NotFound(f"{ref.plural} {name} not found", status=404) from None

    async def create(self, ref: Any, body: Object, namespace: str | None = None) -> Object:
        if (ref.plural, body["metadata"]["name"]) in self.objects:
            raise errors.Conflict("exists", status=409)
        self.objects[(ref.plural, body["metadata"]["name"])] = body
        self.created.append(body)
        return body

    async def delete(self, ref: Any, name: str, namespace: str | None = None, **_: Any) -> None:
        if self.objects.pop((ref.plural, name), None) is None:
            raise errors.NotFound("gone", status=404)
        self.deleted.append((ref.plural, name))


class FakeEvents:
    def __init__(self) -> None:
        self.emitted: list[tuple[str, str, str]] = []

    async def emit(self, obj: Any, type_: str, reason: str, message: str) -> None:
        self.emitted.append((type_, reason, message))

    def reasons(self) -> list[str]:
        return [r for _, r, _ in self.emitted]


def nova() -> Object:
    """The sample Nova, as the NovaRef step hands it forward."""
    root = pathlib.Path(__file__).resolve().parents[4]
    body: Object = yaml.safe_load((root / "config" / "samples" / "nova_minimal.yaml").read_text())
    body["metadata"] = {"name": "nova", "namespace": "ns", "uid": "nova-uid"}
    return body


def make_pass(
    nodes: list[Object],
    *,
    compute: FakeCompute,
    kube: FakeKube | None = None,
    siblings: list[Object] | None = None,
    deleting: bool = False,
    plan: Plan | None = None,
    now: datetime | None = None,
    settings: ComputeSettings | None = None,
) -> tuple[ComputePass, FakeEvents]:
    cr: Object = {
        "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
        "kind": "NovaCompute",
        "metadata": {"name": "pool", "namespace": "ns", "uid": "u1", "generation": 3},
        "spec": {"novaRef": {"name": "nova"}, "nodeSelector": {"pool": "a"}},
    }
    if deleting:
        cr["metadata"]["deletionTimestamp"] = "2026-11-29T10:00:00Z"
    events = FakeEvents()
    p = ComputePass(
        kube=kube or FakeKube(),  # type: ignore[arg-type]
        events=events,
        settings=settings or ComputeSettings(),
        cr=cr,
        pool=NovaCompute.model_validate(cr),
        status={"nodes": [dict(n) for n in nodes]},
        pools=lambda ns, nova: list(siblings or []),
        plan=plan,
        nova=nova(),
        now=now or datetime(2026, 11, 29, 10, 0, tzinfo=UTC),
    )
    p._client = compute  # type: ignore[assignment]
    return p, events


CONTRACT = "nova-compute-config"


def contract_secret() -> dict[str, Any]:
    data = {k: base64.b64encode(b"x").decode() for k in compute_pool.REQUIRED_CONTRACT_KEYS}
    return {"metadata": {"name": CONTRACT}, "data": data}


KEY_SECRET = "nova-digest-key"


def key_secret() -> dict[str, Any]:
    return {"metadata": {"name": KEY_SECRET}, "data": {"key": base64.b64encode(b"k" * 64).decode()}}


def pool_pass(extra: dict[str, dict[str, str]], release: str, cached: dict[tuple[str, str], Any]) -> Any:
    kube = FakeKube(objects={("secrets", CONTRACT): contract_secret(), ("secrets", KEY_SECRET): key_secret()})
    p, events = make_pass([], compute=FakeCompute(), kube=kube)
    p.pool = p.pool.model_copy(update={"spec": p.pool.spec.model_copy(update={"extra_config": extra})})
    p.contract_secret = CONTRACT
    assert p.nova is not None
    p.nova["spec"]["openStackRelease"] = release
    p.cached = lambda ref, ns, name: cached.get((ref.plural, name))
    return p, events, kube


def owned_config_map(p: Any) -> dict[str, Any]:
    desired = compute_pool.config_map(p.pool, compute_pool.pool_conf(p.pool))
    return owners.with_owner(desired, p.cr)
