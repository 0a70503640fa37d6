"""``NovaView``: one read per kind and one token for all the pools of a Nova within a window (issue 41)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from nova_operator.openstack import (
    Aggregate,
    ComputeAPIError,
    ComputeService,
    Credentials,
    DeleteOutcome,
)
from nova_operator.openstack.view import ComputeAPI, NovaView, NovaViews

CREDS = Credentials("http://keystone", "nova", "pw", "service", "Default", "Default")


@dataclass
class Clock:
    now: float = 100.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Backend:
    """A compute API that counts what it was asked (one ``Client`` per token)."""

    services: dict[str, ComputeService] = field(default_factory=dict)
    aggregates: list[Aggregate] = field(default_factory=list)
    mapped: set[str] = field(default_factory=set)
    calls: list[str] = field(default_factory=list)
    fail: dict[str, ComputeAPIError] = field(default_factory=dict)
    gate: asyncio.Event | None = None  # lists wait for it when set

    def count(self, name: str) -> int:
        return self.calls.count(name)

    async def _hit(self, name: str) -> None:
        self.calls.append(name)
        if self.gate is not None and name.startswith("list"):
            await self.gate.wait()
        if name in self.fail:
            raise self.fail.pop(name)

    async def connect(self, credentials: Credentials, url: str, deadline: float) -> ComputeAPI:
        await self._hit("token")
        return Client(self)


class Client:
    def __init__(self, backend: Backend) -> None:
        self.b = backend

    async def list_services(self) -> dict[str, ComputeService]:
        await self.b._hit("list_services")
        return dict(self.b.services)

    async def disable_service(self, service_id: str, reason: str) -> None:
        await self.b._hit("disable_service")

    async def delete_service(self, service_id: str) -> DeleteOutcome:
        await self.b._hit("delete_service")
        return DeleteOutcome.DELETED

    async def mapped_hosts(self) -> set[str]:
        await self.b._hit("mapped_hosts")
        return set(self.b.mapped)

    async def count_servers(self, host: str) -> int:
        await self.b._hit("count_servers")
        return 0

    async def list_aggregates(self) -> list[Aggregate]:
        await self.b._hit("list_aggregates")
        return list(self.b.aggregates)

    async def create_aggregate(self, name: str, availability_zone: str) -> Aggregate:
        await self.b._hit("create_aggregate")
        agg = Aggregate(len(self.b.aggregates) + 1, name, availability_zone, (), {})
        self.b.aggregates.append(agg)
        return agg

    async def set_aggregate_metadata(self, aggregate_id: int, metadata: Mapping[str, str]) -> None:
        await self.b._hit("set_aggregate_metadata")

    async def delete_aggregate(self, aggregate_id: int) -> DeleteOutcome:
        await self.b._hit("delete_aggregate")
        return DeleteOutcome.DELETED


def service(host: str) -> ComputeService:
    return ComputeService(f"id-{host}", host, "enabled", "up", "")


def views(backend: Backend, clock: Clock, ttl: float = 10.0) -> NovaViews:
    return NovaViews(ttl=ttl, monotonic=clock, connect=backend.connect)


async def test_twenty_pools_within_the_window_share_one_token_and_one_read_of_each_kind() -> None:
    backend, clock = Backend(services={"n1": service("n1")}, mapped={"n1"}), Clock()
    shared = views(backend, clock)
    for _ in range(20):  # one pass per pool, each takes the view anew
        view = shared.view("ns", "nova", CREDS, "http://nova")
        assert set(await view.list_services()) == {"n1"}
        assert await view.mapped_hosts() == {"n1"}
        assert await view.list_aggregates() == []
        clock.now += 0.4  # 20 passes in 8 s
    assert backend.calls == ["token", "list_services", "mapped_hosts", "list_aggregates"]
    assert len(shared) == 1


async def test_callers_at_once_wait_for_the_one_read_in_flight() -> None:
    backend, clock = Backend(services={"n1": service("n1")}, gate=asyncio.Event()), Clock()
    view = views(backend, clock).view("ns", "nova", CREDS, "http://nova")
    readers = [asyncio.ensure_future(view.list_services()) for _ in range(5)]
    await asyncio.sleep(0)
    backend.gate.set()  # type: ignore[union-attr]
    results = await asyncio.gather(*readers)
    assert [set(r) for r in results] == [{"n1"}] * 5
    assert backend.count("list_services") == 1


async def test_a_read_older_than_the_window_is_read_again_with_a_new_token() -> None:
    backend, clock = Backend(services={"n1": service("n1")}), Clock()
    view = views(backend, clock).view("ns", "nova", CREDS, "http://nova")
    await view.list_services()
    backend.services["n2"] = service("n2")
    clock.now += 9.9
    assert set(await view.list_services()) == {"n1"}  # within the window: shared
    clock.now += 0.2
    assert set(await view.list_services()) == {"n1", "n2"}
    assert (backend.count("token"), backend.count("list_services")) == (2, 2)


@pytest.mark.parametrize(
    ("write", "reread"),
    [
        (lambda v: v.disable_service("id-n1", "leaving"), ("list_services",)),
        (lambda v: v.delete_service("id-n1"), ("list_services", "mapped_hosts")),
        (lambda v: v.create_aggregate("az1", "az1"), ("list_aggregates",)),
        (lambda v: v.set_aggregate_metadata(1, {"k": "v"}), ("list_aggregates",)),
        (lambda v: v.delete_aggregate(1), ("list_aggregates",)),
    ],
)
async def test_an_own_write_makes_the_next_caller_read_it_again(write: Any, reread: tuple[str]) -> None:
    backend, clock = Backend(services={"n1": service("n1")}, mapped={"n1"}), Clock()
    view = views(backend, clock).view("ns", "nova", CREDS, "http://nova")
    kinds = ("list_services", "mapped_hosts", "list_aggregates")
    await view.list_services(), await view.mapped_hosts(), await view.list_aggregates()
    await write(view)
    await view.list_services(), await view.mapped_hosts(), await view.list_aggregates()
    assert {k: backend.count(k) for k in kinds} == {k: 2 if k in reread else 1 for k in kinds}
    assert backend.count("token") == 1  # a write does not cost a token


async def test_a_failed_write_invalidates_too() -> None:
    backend, clock = Backend(fail={"create_aggregate": ComputeAPIError("timed out")}), Clock()
    view = views(backend, clock).view("ns", "nova", CREDS, "http://nova")
    await view.list_aggregates()
    with pytest.raises(ComputeAPIError):
        await view.create_aggregate("az1", "az1")
    await view.list_aggregates()
    assert backend.count("list_aggregates") == 2


async def test_a_failed_read_is_not_shared_the_next_caller_asks_again() -> None:
    backend, clock = Backend(fail={"list_services": ComputeAPIError("boom", status=503)}), Clock()
    view = views(backend, clock).view("ns", "nova", CREDS, "http://nova")
    with pytest.raises(ComputeAPIError):
        await view.list_services()
    assert await view.list_services() == {}
    assert (backend.count("token"), backend.count("list_services")) == (1, 2)


async def test_a_401_drops_the_token() -> None:
    backend, clock = Backend(fail={"list_services": ComputeAPIError("expired", status=401)}), Clock()
    view = views(backend, clock).view("ns", "nova", CREDS, "http://nova")
    with pytest.raises(ComputeAPIError):
        await view.list_services()
    await view.list_services()
    assert backend.count("token") == 2


async def test_a_failed_authentication_is_not_shared() -> None:
    backend, clock = Backend(fail={"token": ComputeAPIError("HTTP 401", status=401)}), Clock()
    view = views(backend, clock).view("ns", "nova", CREDS, "http://nova")
    with pytest.raises(ComputeAPIError):
        await view.list_aggregates()
    assert await view.list_aggregates() == []
    assert backend.count("token") == 2


async def test_each_nova_has_its_view_and_a_changed_service_user_gets_a_new_one() -> None:
    backend, clock = Backend(), Clock()
    shared = views(backend, clock)
    a = shared.view("ns", "a", CREDS, "http://a")
    assert shared.view("ns", "a", CREDS, "http://a") is a
    assert shared.view("ns", "b", CREDS, "http://b") is not a
    rotated = Credentials("http://keystone", "nova", "pw2", "service", "Default", "Default")
    assert shared.view("ns", "a", rotated, "http://a") is not a
    await shared.view("ns", "a", rotated, "http://a").list_services()
    await shared.view("ns", "b", CREDS, "http://b").list_services()
    assert backend.count("list_services") == 2


async def test_a_view_nobody_asked_for_in_a_while_is_dropped() -> None:
    backend, clock = Backend(), Clock()
    shared = views(backend, clock)
    shared.view("ns", "gone", CREDS, "http://gone")
    clock.now += 61
    shared.view("ns", "kept", CREDS, "http://kept")
    assert len(shared) == 1


def test_the_view_never_shows_the_password() -> None:
    assert "pw" not in repr(NovaView(CREDS, "http://nova"))
