"""The compute API (nova's os-services, os-hypervisors, servers and os-aggregates) as an in-memory double.

Shared by the unit and integration tiers (a helper module, not a test module): the NovaCompute
steps call it through ``ComputePass._client``. It is not the Kubernetes API server; the tests
that run steps keep their API-server side on kube-apiserver (``tests/integration/novacompute``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nova_operator.openstack import (
    Aggregate,
    AggregateExists,
    ComputeAPIError,
    ComputeService,
    DeleteOutcome,
)


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


def service(host: str, status: str = "enabled", state: str = "up", reason: str = "") -> ComputeService:
    return ComputeService(id=f"uuid-{host}", host=host, status=status, state=state, disabled_reason=reason)
