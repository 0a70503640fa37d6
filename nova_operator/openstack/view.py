"""One Nova's compute API as all its pools see it within a short window (issue 41, item 2).

Every pool of a Nova reads the same three lists each pass (the nova-compute services, the
hypervisors' hosts, the aggregates) with the same service user. A ``NovaView`` answers them from one
read per kind, shared by every pass that asks within ``ttl`` seconds of that read's start, and from
one Keystone token shared the same way:

- **one read in flight**: passes that ask while a read of that kind is under way wait for it rather
  than send their own; a failed read is dropped, so the next caller asks again;
- **the operator's own writes invalidate**: a service disabled or deleted drops the services and
  hypervisor reads, an aggregate created, marked or deleted drops the aggregates read, whether the
  write succeeded or not (a timed-out write may have landed); a read started before the write is
  not handed to anybody who asks after it;
- **a 401 drops the token** (it expired or was revoked), so the next call authenticates again.

A per-host call (the servers on a host) is never shared. ``NovaViews`` keeps the view of each Nova,
replaced when the Nova's API URL or service user changes, and drops views nobody asked for within a
few windows.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

from nova_operator.openstack.client import (
    REQUEST_TIMEOUT,
    Aggregate,
    ComputeAPIError,
    ComputeClient,
    ComputeService,
    Credentials,
    DeleteOutcome,
)

T = TypeVar("T")

VIEW_TTL: Final = 10.0
"""Seconds a read (and a token) is shared after it started: shorter than every poll of §19."""
UNAUTHORIZED: Final = 401


class ComputeAPI(Protocol):
    """What the NovaCompute steps call: a ``ComputeClient``, or a ``NovaView`` in front of one."""

    async def list_services(self) -> dict[str, ComputeService]: ...
    async def disable_service(self, service_id: str, reason: str) -> None: ...
    async def delete_service(self, service_id: str) -> DeleteOutcome: ...
    async def mapped_hosts(self) -> set[str]: ...
    async def count_servers(self, host: str) -> int: ...
    async def list_aggregates(self) -> list[Aggregate]: ...
    async def create_aggregate(self, name: str, availability_zone: str) -> Aggregate: ...
    async def set_aggregate_metadata(self, aggregate_id: int, metadata: Mapping[str, str]) -> None: ...
    async def delete_aggregate(self, aggregate_id: int) -> DeleteOutcome: ...


Connect = Callable[[Credentials, str, float], Awaitable[ComputeAPI]]


async def connect(credentials: Credentials, nova_url: str, request_timeout: float) -> ComputeAPI:
    return await ComputeClient.connect(credentials, nova_url, request_timeout=request_timeout)


SERVICES: Final = "services"
HYPERVISORS: Final = "hypervisors"
AGGREGATES: Final = "aggregates"
TOKEN: Final = "token"


@dataclass
class _Shared:
    started: float
    task: asyncio.Future[Any]


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Mark a failure as seen when every waiter was cancelled (no 'never retrieved' warning)."""
    if not task.cancelled():
        task.exception()


class NovaView:
    """The shared reads and token of one Nova's compute API (see the module docstring)."""

    def __init__(
        self,
        credentials: Credentials,
        nova_url: str,
        *,
        request_timeout: float = REQUEST_TIMEOUT,
        ttl: float = VIEW_TTL,
        monotonic: Callable[[], float] = time.monotonic,
        connect: Connect = connect,
    ) -> None:
        self.credentials = credentials
        self.nova_url = nova_url
        self._timeout = request_timeout
        self._ttl = ttl
        self._now = monotonic
        self._connect = connect
        self._shared: dict[str, _Shared] = {}
        self.last_used = monotonic()

    def __repr__(self) -> str:  # never the credentials
        return f"NovaView({self.nova_url!r})"

    # -- sharing -----------------------------------------------------------------------------

    async def _once(self, kind: str, read: Callable[[], Awaitable[T]]) -> T:
        """The result of the read of ``kind`` in flight or started within ``ttl``, else a new one."""
        now = self._now()
        self.last_used = now
        shared = self._shared.get(kind)
        if shared is None or (shared.task.done() and now - shared.started >= self._ttl):
            shared = _Shared(now, asyncio.ensure_future(read()))
            shared.task.add_done_callback(_retrieve)
            self._shared[kind] = shared
        try:
            result: T = await asyncio.shield(shared.task)
        except ComputeAPIError as exc:
            self._drop(kind, shared)
            if exc.status == UNAUTHORIZED:
                self.invalidate(TOKEN)
            raise
        except Exception:
            self._drop(kind, shared)
            raise
        return result

    def _drop(self, kind: str, shared: _Shared) -> None:
        if self._shared.get(kind) is shared:
            del self._shared[kind]

    def invalidate(self, *kinds: str) -> None:
        """Forget the reads of ``kinds``: the next caller reads again."""
        for kind in kinds:
            self._shared.pop(kind, None)

    async def _client(self) -> ComputeAPI:
        return await self._once(TOKEN, lambda: self._connect(self.credentials, self.nova_url, self._timeout))

    async def _direct(self, kinds: tuple[str, ...], call: Callable[[ComputeAPI], Awaitable[T]]) -> T:
        """A call of its own (never shared), then ``kinds`` forgotten: the next read shows what it wrote."""
        client = await self._client()
        try:
            return await call(client)
        except ComputeAPIError as exc:
            if exc.status == UNAUTHORIZED:
                self.invalidate(TOKEN)
            raise
        finally:
            self.invalidate(*kinds)

    async def _read(self, kind: str, call: Callable[[ComputeAPI], Awaitable[T]]) -> T:
        async def read() -> T:
            return await call(await self._client())

        return await self._once(kind, read)

    # -- the calls ---------------------------------------------------------------------------

    async def list_services(self) -> dict[str, ComputeService]:
        return dict(await self._read(SERVICES, lambda c: c.list_services()))

    async def mapped_hosts(self) -> set[str]:
        return set(await self._read(HYPERVISORS, lambda c: c.mapped_hosts()))

    async def list_aggregates(self) -> list[Aggregate]:
        return list(await self._read(AGGREGATES, lambda c: c.list_aggregates()))

    async def count_servers(self, host: str) -> int:
        return await self._direct((), lambda c: c.count_servers(host))

    async def disable_service(self, service_id: str, reason: str) -> None:
        await self._direct((SERVICES,), lambda c: c.disable_service(service_id, reason))

    async def delete_service(self, service_id: str) -> DeleteOutcome:
        return await self._direct((SERVICES, HYPERVISORS), lambda c: c.delete_service(service_id))

    async def create_aggregate(self, name: str, availability_zone: str) -> Aggregate:
        return await self._direct((AGGREGATES,), lambda c: c.create_aggregate(name, availability_zone))

    async def set_aggregate_metadata(self, aggregate_id: int, metadata: Mapping[str, str]) -> None:
        await self._direct((AGGREGATES,), lambda c: c.set_aggregate_metadata(aggregate_id, metadata))

    async def delete_aggregate(self, aggregate_id: int) -> DeleteOutcome:
        return await self._direct((AGGREGATES,), lambda c: c.delete_aggregate(aggregate_id))


class NovaViews:
    """The ``NovaView`` of every Nova, by namespace and name; one per operator process."""

    def __init__(
        self,
        *,
        ttl: float = VIEW_TTL,
        monotonic: Callable[[], float] = time.monotonic,
        connect: Connect = connect,
    ) -> None:
        self.ttl = ttl
        self._now = monotonic
        self._connect = connect
        self._views: dict[tuple[str, str], NovaView] = {}

    def view(
        self,
        namespace: str,
        nova: str,
        credentials: Credentials,
        nova_url: str,
        *,
        request_timeout: float = REQUEST_TIMEOUT,
    ) -> NovaView:
        """The Nova's view; a new one when its URL or service user changed since the last."""
        self._forget_idle()
        key = (namespace, nova)
        view = self._views.get(key)
        if view is None or view.credentials != credentials or view.nova_url != nova_url:
            view = NovaView(
                credentials,
                nova_url,
                request_timeout=request_timeout,
                ttl=self.ttl,
                monotonic=self._now,
                connect=self._connect,
            )
            self._views[key] = view
        return view

    def _forget_idle(self) -> None:
        """Drop the views nobody asked for within a few windows (a Nova gone, its pools deleted)."""
        horizon = self._now() - 6 * self.ttl
        for key in [k for k, v in self._views.items() if v.last_used < horizon]:
            del self._views[key]

    def __len__(self) -> int:
        return len(self._views)
