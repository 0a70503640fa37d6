"""Shared helpers of the tests beside this module (not a test module)."""

from __future__ import annotations

import asyncio
from typing import Any

from nova_operator.kube.resources import ResourceRef
from nova_operator.runtime.informer import Informer, WatchEventLike
from nova_operator.settings import WatchSettings

FAST = WatchSettings(backoff_initial=0.001, backoff_max=0.002, inactivity_timeout=0.05, resync_period=None)


class Event:
    def __init__(self, type: str, object: dict[str, Any]) -> None:
        self.type, self.object = type, object


class Stream:
    def __init__(self, script: list[Any]) -> None:
        self.script = script

    async def __aenter__(self) -> Stream:
        if self.script and isinstance(self.script[0], Exception):
            raise self.script.pop(0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def __aiter__(self) -> Stream:
        return self

    async def __anext__(self) -> WatchEventLike:
        if not self.script:
            raise StopAsyncIteration
        item = self.script.pop(0)
        if item == "hang":
            await asyncio.Event().wait()
        if isinstance(item, Exception):
            raise item
        return item  # type: ignore[no-any-return]


class ScriptedAPI:
    """Each list() returns the next listing; each watch() plays the next script."""

    def __init__(self, lists: list[list[dict[str, Any]]], watches: list[list[Any]]) -> None:
        self.lists, self.watches = lists, watches
        self.list_calls = 0
        self.watch_rvs: list[str] = []
        self.namespaces: list[str | None] = []
        self.exhausted = asyncio.Event()

    async def list(self, ref: ResourceRef, namespace: str | None = None, **kw: Any) -> dict[str, Any]:
        """Pages of ``limit`` items; the continue token is the offset of the next page."""
        start = int(kw.get("continue_token") or 0)
        if start == 0:
            self.list_calls += 1
            self.namespaces.append(namespace)
            self.current = self.lists.pop(0) if len(self.lists) > 1 else self.lists[0]
        limit = kw.get("limit") or len(self.current)
        page = self.current[start : start + limit]
        meta = {"resourceVersion": str(10 * self.list_calls)}
        if start + limit < len(self.current):
            meta["continue"] = str(start + limit)
        return {"metadata": meta, "items": [dict(i) for i in page]}

    def watch(self, ref: ResourceRef, namespace: str | None = None, **kw: Any) -> Stream:
        self.watch_rvs.append(kw["resource_version"])
        if not self.watches:
            self.exhausted.set()
            return Stream(["hang"])
        return Stream(self.watches.pop(0))


class Rec:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def on_add(self, obj: dict[str, Any]) -> None:
        self.events.append(("add", obj["metadata"]["name"]))

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.events.append(("update", new["metadata"]["name"]))

    def on_delete(self, obj: dict[str, Any]) -> None:
        self.events.append(("delete", obj["metadata"]["name"]))


async def run_until_exhausted(informer: Informer, api: ScriptedAPI) -> None:
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(api.exhausted.wait(), 5)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
