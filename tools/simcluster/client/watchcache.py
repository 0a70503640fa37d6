"""Watch-driven plumbing for the stand-ins: a cache per collection kept current by list + watch, and a
deduplicating work queue of object keys.

``Store`` holds one collection's objects by (namespace, name). ``reflect`` lists it, then watches
from the list's resourceVersion (relisting on 410 Gone or an error) and reports every change to
``on_change(store, obj, deleted)``. ``KeyQueue`` hands each key to one worker at a time: a key
added while queued is not queued twice, a key added while in work is queued again when the worker
is done, so the latest state is always seen without two workers racing on one object.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Hashable, Iterator
from typing import Any, Generic, TypeVar

import aiohttp

from simcluster.client.asynckube import JSON, ApiError, AsyncKube

log = logging.getLogger("simcluster.standins")
K = TypeVar("K", bound=Hashable)
ObjKey = tuple[str, str]  # namespace ("" for cluster-scoped), name


def key_of(obj: JSON) -> ObjKey:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _rv(obj: JSON | None) -> int:
    try:
        return int(((obj or {}).get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


class Store:
    """The objects of one collection (``path``), by (namespace, name)."""

    def __init__(self, kind: str, path: str) -> None:
        self.kind = kind
        self.path = path
        self.objects: dict[ObjKey, JSON] = {}
        self.synced = asyncio.Event()

    def get(self, namespace: str, name: str) -> JSON | None:
        return self.objects.get((namespace, name))

    def list(self, namespace: str | None = None) -> Iterator[JSON]:
        for (ns, _), obj in list(self.objects.items()):
            if namespace is None or ns == namespace:
                yield obj

    def put(self, obj: JSON) -> None:
        """Keep ``obj`` unless the cache already holds a newer version (a write's answer can be
        overtaken by the watch)."""
        key = key_of(obj)
        if _rv(obj) >= _rv(self.objects.get(key)):
            self.objects[key] = obj

    def remove(self, obj: JSON) -> None:
        self.objects.pop(key_of(obj), None)


OnChange = Callable[[Store, JSON, bool], None]


async def reflect(kube: AsyncKube, store: Store, on_change: OnChange, stop: asyncio.Event) -> None:
    """Keep ``store`` current until ``stop``; every object listed or changed goes to ``on_change``."""
    rv = ""
    while not stop.is_set():
        try:
            if not rv:
                listed = await kube.request("GET", store.path)
                rv = str((listed.get("metadata") or {}).get("resourceVersion") or "")
                fresh = {key_of(o): o for o in listed.get("items") or []}
                gone = [o for k, o in store.objects.items() if k not in fresh]
                store.objects = fresh
                for obj in gone:
                    on_change(store, obj, True)
                for obj in fresh.values():
                    on_change(store, obj, False)
                store.synced.set()
            sep = "&" if "?" in store.path else "?"
            async for event in kube.watch(f"{store.path}{sep}resourceVersion={rv}", timeout_seconds=240):
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":  # 410 Gone: the resourceVersion is too old, list again
                    rv = ""
                    break
                rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                if kind == "DELETED":
                    store.remove(obj)
                    on_change(store, obj, True)
                elif kind in ("ADDED", "MODIFIED"):
                    store.put(obj)
                    on_change(store, obj, False)
        except asyncio.CancelledError:
            raise
        except (ApiError, OSError, ValueError, RuntimeError, aiohttp.ClientError) as exc:
            # the CRD is not installed yet, the API server restarts, the stream broke: list again
            log.debug("watch %s: %s", store.path, exc)
            rv = ""
            await asyncio.sleep(0.5)


class KeyQueue(Generic[K]):
    """A set-like FIFO of keys; see the module docstring."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._queued: set[K] = set()
        self._active: set[K] = set()
        self._again: set[K] = set()

    def add(self, key: K) -> None:
        if key in self._active:
            self._again.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def add_later(self, key: K, seconds: float) -> None:
        asyncio.get_running_loop().call_later(seconds, self.add, key)

    async def get(self) -> K:
        key = await self._queue.get()
        self._queued.discard(key)
        self._active.add(key)
        return key

    def done(self, key: K) -> None:
        self._active.discard(key)
        if key in self._again:
            self._again.discard(key)
            self.add(key)

    def __len__(self) -> int:
        return len(self._queued)


async def run_workers(
    queue: KeyQueue[K], handle: Callable[[K], object], workers: int, stop: asyncio.Event
) -> None:
    """``workers`` tasks taking keys from ``queue`` and awaiting ``handle(key)``; an ApiError (a
    conflict, a busy server) retries the key after a moment, anything else is logged and retried
    after a second: its traceback once, then one line per retry while the same error repeats (a
    backing server stopped for a while)."""
    failing: dict[K, str] = {}

    async def worker() -> None:
        while not stop.is_set():
            key = await queue.get()
            try:
                result = handle(key)
                if asyncio.iscoroutine(result):
                    await result
                failing.pop(key, None)
            except asyncio.CancelledError:
                raise
            except ApiError as exc:
                log.info("stand-in %s retried: %s", key, exc)
                queue.add_later(key, 0.3)
            except Exception as exc:  # a stand-in must keep going; the log tells why
                what = f"{type(exc).__name__}: {exc}"
                if failing.get(key) == what:
                    log.warning("stand-in %s still failing: %s", key, what)
                else:
                    log.exception("stand-in %s failed", key)
                failing[key] = what
                queue.add_later(key, 1.0)
            finally:
                queue.done(key)

    await run_until(
        stop, [asyncio.create_task(worker(), name=f"stand-in worker {i}") for i in range(workers)]
    )


async def run_until(stop: asyncio.Event, tasks: list[asyncio.Task[Any]]) -> None:
    """Wait for ``stop``, then cancel ``tasks`` and wait for them to end (their errors are dropped)."""
    try:
        await stop.wait()
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
