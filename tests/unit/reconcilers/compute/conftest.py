"""Doubles for the NovaCompute steps: a compute client, a pod lister and an event sink, no cluster."""

from __future__ import annotations

import copy
import pathlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import yaml

from nova_operator.kube import errors
from nova_operator.models.novacompute import NovaCompute
from nova_operator.nodeplan import Plan
from nova_operator.openstack import (
    Aggregate,
    AggregateExists,
    ComputeAPIError,
    ComputeService,
    DeleteOutcome,
)
from nova_operator.reconcilers.compute.context import ComputePass, ComputeSettings

Object = dict[str, Any]


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
        settings=ComputeSettings(),
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
