"""Shared fakes of the NovaCompute step tests (a helper module): the compute API, an API server, passes."""

from __future__ import annotations

import base64
import copy
import pathlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import yaml

from nova_operator import apply
from nova_operator.decisions.nodeplan import Plan
from nova_operator.kube import errors
from nova_operator.kube.types import Object
from nova_operator.models.novacompute import NovaCompute
from nova_operator.openstack import (
    Aggregate,
    AggregateExists,
    ComputeAPIError,
    ComputeService,
    DeleteOutcome,
)
from nova_operator.reconcilers.compute.context import ComputePass, ComputeSettings
from nova_operator.renderers import compute_pool


@dataclass
class FakeCompute:
    services: dict[str, ComputeService] = field(default_factory=dict)
    servers: dict[str, int] = field(default_factory=dict)
    mapped: set[str] = field(default_factory=set)
    aggregates: list[Aggregate] = field(default_factory=list)
    delete_answers: dict[str, DeleteOutcome] = field(default_factory=dict)
    fail: dict[str, ComputeAPIError] = field(default_factory=dict)
    calls: list[tuple[str, Any]] = field(default_factory=list)

    def _call(self, name: str, arg: Any = None) -> None:
        self.calls.append((name, arg))
        if name in self.fail:
            raise self.fail[name]

    async def list_services(self) -> dict[str, ComputeService]:
        self._call("list_services")
        return dict(self.services)

    async def disable_service(self, service_id: str, reason: str) -> None:
        self._call("disable_service", (service_id, reason))

    async def delete_service(self, service_id: str) -> DeleteOutcome:
        self._call("delete_service", service_id)
        return self.delete_answers.get(service_id, DeleteOutcome.DELETED)

    async def mapped_hosts(self) -> set[str]:
        self._call("mapped_hosts")
        return set(self.mapped)

    async def count_servers(self, host: str) -> int:
        self._call("count_servers", host)
        return self.servers.get(host, 0)

    async def list_aggregates(self) -> list[Aggregate]:
        self._call("list_aggregates")
        return list(self.aggregates)

    async def create_aggregate(self, name: str, zone: str) -> Aggregate:
        self._call("create_aggregate", (name, zone))
        if any(a.name == name for a in self.aggregates):
            raise AggregateExists("exists", status=409)
        agg = Aggregate(len(self.aggregates) + 1, name, zone, (), {})
        self.aggregates.append(agg)
        return agg

    async def set_aggregate_metadata(self, aggregate_id: int, metadata: dict[str, str]) -> None:
        self._call("set_aggregate_metadata", (aggregate_id, metadata))

    async def delete_aggregate(self, aggregate_id: int) -> DeleteOutcome:
        self._call("delete_aggregate", aggregate_id)
        self.aggregates = [a for a in self.aggregates if a.id != aggregate_id]
        return DeleteOutcome.DELETED

    def close(self) -> None:
        return None

    def names(self) -> list[str]:
        return [c[0] for c in self.calls]


class FakeKube:
    """What the Services step touches: the pool's pods, the Nova API Deployment, the discovery Job."""

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


def api_deployment(config_map: str | None = "nova-config-abc") -> Object:
    volumes = [{"name": "config", "configMap": {"name": config_map}}] if config_map else []
    return {
        "metadata": {"name": "nova"},
        "spec": {
            "template": {"spec": {"containers": [{"image": "ghcr.io/c5c3/nova:2025.2"}], "volumes": volumes}}
        },
    }


def pod(node: str, phase: str = "Running") -> Object:
    return {"spec": {"nodeName": node}, "status": {"phase": phase}}


def service(host: str, status: str = "enabled", state: str = "up", reason: str = "") -> ComputeService:
    return ComputeService(id=f"uuid-{host}", host=host, status=status, state=state, disabled_reason=reason)


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


class FailingKube(FakeKube):
    """``get`` of one kind fails with a server error; ``list`` of pods too; ``apply`` answers ``applied``."""

    def __init__(self, *, fail_get: str = "", fail_list: bool = False, **kw: Any) -> None:
        super().__init__(**kw)
        self.fail_get, self.fail_list = fail_get, fail_list
        self.applied: list[Object] = []
        self.apply_error: errors.KubeError | None = None
        self.answer_status: Object = {}

    async def get(self, ref: Any, name: str, namespace: str | None = None) -> Object:
        if ref.plural == self.fail_get:
            raise errors.KubeError(f"{ref.plural} {name}: etcdserver: request timed out", status=500)
        return await super().get(ref, name, namespace)

    async def list(
        self, ref: Any, namespace: str | None = None, *, label_selector: str | None = None
    ) -> Object:
        if self.fail_list:
            raise errors.KubeError("pods is forbidden: User cannot list pods", status=403)
        return await super().list(ref, namespace, label_selector=label_selector)

    async def apply(self, ref: Any, body: Object, **_: Any) -> Object:
        if self.apply_error is not None:
            raise self.apply_error
        self.applied.append(body)
        meta = {**body["metadata"], "generation": 2, "uid": "ds-uid"}
        return {**body, "metadata": meta, "status": self.answer_status}


def daemonset_pass(kube: FailingKube) -> Any:
    p, _ = make_pass([{"name": "n1", "phase": "Active"}], compute=FakeCompute(), kube=kube)
    p.image, p.config_map = "ghcr.io/c5c3/nova:2025.2", "pool-config-abc"
    p.contract_secret, p.contract_hash = "nova-compute-config", "f" * 64
    return p


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
    return apply.with_owner(desired, p.cr)
