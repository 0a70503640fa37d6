"""List+watch for one resource kind, feeding a ``Cache`` and then the event handlers.

Concurrency model: ``run()`` starts one reflector loop per watched namespace (one loop
for all namespaces or a cluster-scoped kind); all of them write the same cache. A loop:

1. LIST (no resourceVersion: a consistent read); replace its part of the cache and
   deliver the difference as add/update/delete. Once every loop has listed, the
   informer ``has_synced``.
2. WATCH from the list's resourceVersion with bookmarks and a randomized server-side
   timeout; apply each event to the cache, then call the handlers. A bookmark only
   advances the resourceVersion.
3. Every step is bounded: opening the watch (connect and response headers) by
   ``open_timeout``, each event by ``inactivity_timeout`` (no event, no bookmark for that
   long: the stream is dead). A stream that ends normally after a while, goes silent, or whose
   connection breaks after it delivered an event or lasted ``min_watch_duration`` (client-go
   takes a broken stream for an ended one), is re-opened at once from the last resourceVersion.
4. Everything else is backed off like client-go's reflector (0.8 s doubling to 30 s, with
   jitter; a ``Retry-After`` from the server is waited out): an error, an open that timed
   out, a watch that ended within ``min_watch_duration`` having delivered nothing (a server
   that closes every watch at once), and 410 Gone, after which the loop relists (step 1) —
   so relists are paced too. The backoff starts over after a watch that went silent, or ended
   normally, or after an attempt that reached the server and ran for ``backoff_max``.

LISTs and watch opens pass a gate shared by the manager's informers (``max_concurrent_opens``
in flight at once): 19 kinds x 20 namespaces starting together would otherwise be answered 429.

Each reflector records when it last heard from the server (a list, an opened watch, an
event or a bookmark); ``stale()`` names the ones that have been quiet for longer than a
given time (``/readyz`` turns 503 on them: an API server outage, which a restart cannot fix).

Handlers run synchronously on the loop and only enqueue; an exception in one is logged
and does not stop the informer.

Before an object is stored it passes the informer's ``transform`` (``runtime.transform``): the
union of what the informer's users declared they read (``keep``), bookkeeping never kept. A
transform that fails on an object is logged with the object's kind and key, and the object is
stored whole (bookkeeping aside): a reader may get more than it declared, never less. Handlers
receive the stored (transformed) objects; a watched deletion hands them the event's object (the
object's final state), a deletion a relist found the last cached one. A user may declare what it
keeps of some objects only (``keep(fields, when=predicate)``): the others are stored withheld (a
reference: name, version, owners), and ``reconsider`` narrows the entries a predicate no longer
admits.

A LIST is read page by page (``list_page_size``, ``limit``/``continue`` as client-go's reflector
does), and each item passes the transform as it is decoded (``ListWatcher.list``'s ``each``): a
namespace of large objects the users do not keep is never held whole at once, only one item of it.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any, Protocol

import structlog

from nova_operator.clock import Clock, LoopClock
from nova_operator.kube.errors import Gone, KubeError, Unreachable
from nova_operator.kube.resources import ResourceRef
from nova_operator.kube.types import Object
from nova_operator.metrics import Metrics
from nova_operator.runtime.cache import Bound, Cache, key_of
from nova_operator.runtime.handlers import EventHandler
from nova_operator.runtime.request import Request
from nova_operator.runtime.transform import Admits, Fields, Transform, drop_bookkeeping
from nova_operator.settings import WatchSettings

log = structlog.get_logger("nova_operator.informer")


class _Silent(Exception):
    """The watch stream said nothing (no event, no bookmark) for the inactivity timeout."""


class WatchOpenTimeout(Exception):
    """Opening a watch (connect, response headers) took longer than ``open_timeout``."""


class _Broken(Exception):
    """The connection broke under a watch that had delivered events or lasted: re-opened at once."""


class ShortWatch(Exception):
    """The server ended a watch at once without an event: treated as an error (backed off)."""


class WatchEventLike(Protocol):
    @property
    def type(self) -> str: ...
    @property
    def object(self) -> Object: ...


class WatchStreamLike(Protocol):
    async def __aenter__(self) -> AsyncIterator[WatchEventLike]: ...
    async def __aexit__(self, *exc: object) -> None: ...


class ListWatcher(Protocol):
    """What an informer needs of the API (``nova_operator.kube.Kube`` provides it)."""

    async def list(
        self,
        ref: ResourceRef,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        resource_version: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        each: Callable[[Object], Object] | None = None,
    ) -> Object:
        """A List page. With ``each``, its ``items`` are what ``each`` returned for each item, called
        as the item is decoded (a lister that cannot do that may ignore ``each``: the informer then
        applies it to what the page holds)."""
        ...

    def watch(
        self,
        ref: ResourceRef,
        namespace: str | None = None,
        *,
        resource_version: str,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
        allow_bookmarks: bool = True,
    ) -> WatchStreamLike: ...


WATCH_RESTART_REASONS = ("closed", "inactive", "gone", "open_timeout", "short", "error")
"""The ``reason`` values of ``nova_operator_informer_watch_restarts_total``. Each resource's series
exist at 0 from the informer's start: a dashboard shows no restarts as 0, not as no data, and
``increase()`` sees the first restart (a series born at 1 has no earlier sample to rise from)."""


class Informer:
    def __init__(
        self,
        lw: ListWatcher,
        ref: ResourceRef,
        *,
        namespaces: Sequence[str] = (),
        label_selector: str | None = None,
        settings: WatchSettings | None = None,
        metrics: Metrics | None = None,
        clock: Clock | None = None,
        gate: asyncio.Semaphore | None = None,
    ) -> None:
        self.ref = ref
        self.label_selector = label_selector
        self.namespaces: tuple[str | None, ...] = (
            tuple(dict.fromkeys(namespaces)) if namespaces and ref.namespaced else (None,)
        )
        self.cache = Cache(str(ref))
        self._lw = lw
        self._settings = settings if settings is not None else WatchSettings()
        self._metrics = metrics
        if metrics is not None:  # every reason's series from the start, at 0 (see WATCH_RESTART_REASONS)
            for reason in WATCH_RESTART_REASONS:
                metrics.informer_watch_restarts.labels(str(ref), reason)
        self._handlers: list[EventHandler] = []
        self._listed: set[str | None] = set()
        self._rv: dict[str | None, str | None] = {}  # last resourceVersion seen, per reflector
        self._clock: Clock = clock if clock is not None else LoopClock()
        # Shared by the manager's informers: how many LISTs and watch opens may be in flight at
        # once, so that kinds x namespaces reflectors starting together do not flood the API server.
        self._gate = gate if gate is not None else asyncio.Semaphore(self._settings.max_concurrent_opens)
        self._heard: dict[str | None, float] = {}  # when each reflector last heard from the server
        self._contacts: dict[str | None, int] = {}  # how often (a list, an opened watch, an event)
        self._synced = asyncio.Event()
        self.transform = Transform()
        self._started = False

    def keep(self, fields: Fields | None, when: Admits | None = None) -> None:
        """One user's declaration of what it reads of each object (``ALL``: everything), or, with
        ``when``, of the objects ``when`` admits (asked as each object arrives); see ``transform``.

        Before ``run`` only (objects stored earlier would lack what a later declaration adds); once
        running, a declaration that keeps nothing new is accepted.
        """
        if self._started and not self.transform.covers(fields):
            raise RuntimeError(f"informer {self.ref}: what is kept must be declared before it runs")
        self.transform.keep(fields, when)

    def bound(self, bound: Bound) -> None:
        """Bound the size of what the cache holds whole (``Cache.bound``) and serve it as
        ``nova_operator_informer_held_bytes{resource}``. A second call with the same bound (a
        shared informer) changes nothing; another bound is refused."""
        if self.cache.bounded == bound:
            return
        if self.cache.bounded is not None:
            raise RuntimeError(f"informer {self.ref}: bounded already, with other limits")
        self.cache.bound(bound)
        if self._metrics is not None:
            cache = self.cache
            self._metrics.informer_held_bytes.labels(str(self.ref)).set_function(lambda: cache.held_bytes)

    def reconsider(self, keys: Iterable[Request]) -> None:
        """Ask the predicates again about the cached objects of ``keys``: one held whole that no
        declaration admits any more is narrowed to its reference (no event: the object did not
        change). One withheld that is admitted now stays so until its next event or a reader's
        ``Cache.fill``: its content is not here to restore."""
        for key in keys:
            if key not in self.cache or self.cache.withheld(key):
                continue
            obj = self.cache.peek(key)
            if obj is None:
                continue
            stored, whole = self._stored_form(obj)
            if not whole:
                self.cache.hold(stored, whole=False)

    def _stored_form(self, obj: Object) -> tuple[Object, bool]:
        """``obj`` as the cache keeps it, and whether it is whole (False: withheld); kept whole
        when the transform fails on it."""
        try:
            return self.transform.apply(obj)
        except Exception:
            meta = obj.get("metadata")
            meta = meta if isinstance(meta, dict) else {}
            log.exception(
                "cache transform failed, object stored whole",
                resource=str(self.ref),
                namespace=meta.get("namespace"),
                name=meta.get("name"),
            )
            return drop_bookkeeping(obj), True

    def add_handler(self, handler: EventHandler) -> None:
        """Register ``handler``; objects already cached are delivered to it as adds."""
        self._handlers.append(handler)
        for key in self.cache.list_keys():
            obj = self.cache.peek(key)
            if obj is not None:
                self._safe(handler.on_add, obj)

    @property
    def has_synced(self) -> bool:
        return self.cache.has_synced

    async def wait_for_sync(self) -> None:
        await self._synced.wait()

    def resync(self) -> None:
        """Deliver every cached object to the handlers as an update with old == new."""
        for key in self.cache.list_keys():
            obj = self.cache.peek(key)
            if obj is not None:
                for h in self._handlers:
                    self._safe(h.on_update, obj, obj)

    async def run(self) -> None:
        """Run until cancelled."""
        self._started = True
        now = self._clock.now()
        self._heard = dict.fromkeys(self.namespaces, now)
        async with asyncio.TaskGroup() as tg:
            for ns in self.namespaces:
                tg.create_task(self._reflect(ns), name=f"informer {self.ref} {ns or '*'}")
            if self._settings.resync_period:
                tg.create_task(self._resync_loop(self._settings.resync_period), name=f"resync {self.ref}")

    def stale(self, after: float) -> list[str]:
        """The reflectors (``ref`` or ``ref in ns``) that heard nothing from the server for ``after`` s."""
        now = self._clock.now()
        return [
            f"{self.ref} in {ns}" if ns else str(self.ref)
            for ns, heard in self._heard.items()
            if now - heard > after
        ]

    # -- the reflector loop ------------------------------------------------------------------

    async def _reflect(self, namespace: str | None) -> None:
        s = self._settings
        backoff = s.backoff_initial
        self._rv[namespace] = None
        where = {"resource": str(self.ref), "namespace": namespace}
        while True:
            started, contacts = self._clock.now(), self._contacts.get(namespace, 0)
            try:
                if self._rv[namespace] is None:
                    async with self._gate:
                        self._rv[namespace] = await self._list(namespace)
                await self._watch(namespace)
                self._restarted("closed")
                backoff = s.backoff_initial
                continue
            except _Broken as exc:
                self._restarted("error")
                log.info("watch connection broke, re-opening", **where, error=str(exc))
                backoff = s.backoff_initial  # it had worked: the next failure starts the backoff over
                continue
            except _Silent:
                # No event and no bookmark for the inactivity timeout: drop the stream and re-open
                # at once (the open is bounded; if it fails, the backoff applies).
                self._restarted("inactive")
                log.info("watch silent, re-opening", **where, silent_for=s.inactivity_timeout)
                backoff = s.backoff_initial  # it had opened and lasted the inactivity timeout
                continue
            except Gone:
                self._restarted("gone")
                self._rv[namespace] = None
                reason, error, retry_after = "gone", "resourceVersion expired (410 Gone)", None
            except Exception as exc:  # KubeError, a timeout, bad JSON, a bug
                reason = {WatchOpenTimeout: "open_timeout", ShortWatch: "short"}.get(type(exc), "error")
                self._restarted(reason)
                error = str(exc) or type(exc).__name__
                retry_after = exc.retry_after if isinstance(exc, KubeError) else None
                if not isinstance(exc, KubeError | TimeoutError | WatchOpenTimeout | ShortWatch):
                    log.error("watch failed unexpectedly", **where, exc_info=exc)
            heard = self._contacts.get(namespace, 0) > contacts
            if heard and self._clock.now() - started >= s.backoff_max:  # it had been working a while
                backoff = s.backoff_initial
            delay = backoff * (1 + random.uniform(0, s.backoff_jitter))
            if retry_after is not None:
                delay = max(delay, min(retry_after, s.backoff_max))
            log.warning(
                "relisting after backoff" if reason == "gone" else "watch failed, retrying",
                **where,
                reason=reason,
                error=error,
                retry_in=round(delay, 3),
            )
            await self._clock.sleep(delay)
            backoff = min(backoff * 2, s.backoff_max)

    def _restarted(self, reason: str) -> None:
        if self._metrics is not None:
            self._metrics.informer_watch_restarts.labels(str(self.ref), reason).inc()

    def _hear(self, namespace: str | None) -> None:
        self._heard[namespace] = self._clock.now()
        self._contacts[namespace] = self._contacts.get(namespace, 0) + 1

    async def _list(self, namespace: str | None) -> str:
        """LIST in pages of ``list_page_size`` (one consistent snapshot); returns its resourceVersion.

        Each item is stored-formed as it is decoded: what is held across the pages is what the
        cache will keep, never the whole list.
        """
        items: list[Object] = []
        withheld: set[Request] = set()
        formed: set[int] = set()  # ids of the objects ``each`` returned (a lister may not call it)
        kind, api_version = self.ref.kind, self.ref.api_version

        def each(obj: Object) -> Object:
            obj.setdefault("kind", kind)  # list items carry no kind/apiVersion; objects from a watch do
            obj.setdefault("apiVersion", api_version)
            stored, whole = self._stored_form(obj)
            if not whole:
                withheld.add(key_of(stored))
            formed.add(id(stored))
            return stored

        token: str | None = None
        rv = ""
        while True:
            doc = await self._lw.list(
                self.ref,
                namespace,
                label_selector=self.label_selector,
                limit=self._settings.list_page_size,
                continue_token=token,
                each=each,
            )
            items.extend(obj if id(obj) in formed else each(obj) for obj in doc.get("items") or [])
            meta = doc.get("metadata") or {}
            rv = rv or str(meta.get("resourceVersion", ""))
            token = meta.get("continue") or None
            del doc
            if token is None:
                break
        self._hear(namespace)
        changes = self.cache.replace(items, namespace, withheld)
        if self._metrics is not None:
            self._metrics.informer_relists.labels(str(self.ref)).inc()
        for old, new in changes:
            self._deliver(old, new)
        self._listed.add(namespace)
        if len(self._listed) == len(self.namespaces) and not self._synced.is_set():
            self.cache.mark_synced()
            self._synced.set()
            log.debug("cache synced", resource=str(self.ref), objects=len(self.cache))
        return rv

    async def _watch(self, namespace: str | None) -> None:
        """Watch from the last resourceVersion until the stream ends, advancing it with each event.

        Raises ``WatchOpenTimeout``, ``_Silent``, ``ShortWatch`` or what the stream raised.
        """
        s = self._settings
        timeout = int(random.uniform(s.watch_timeout_min, s.watch_timeout_max))
        rv = self._rv[namespace] or ""
        where = f"watch {self.ref}" + (f" in {namespace}" if namespace else "")
        watch = self._lw.watch(
            self.ref,
            namespace,
            resource_version=rv,
            label_selector=self.label_selector,
            timeout_seconds=timeout,
        )
        try:
            async with self._gate, self._clock.timeout(s.open_timeout):
                stream = await watch.__aenter__()
        except TimeoutError:
            raise WatchOpenTimeout(f"{where}: not opened within {s.open_timeout:g} s (timed out)") from None
        self._hear(namespace)
        opened, delivered = self._clock.now(), 0
        try:
            events = aiter(stream)
            while True:
                try:
                    async with self._clock.timeout(s.inactivity_timeout):
                        event = await anext(events)
                except StopAsyncIteration:
                    lasted = self._clock.now() - opened
                    if not delivered and lasted < s.min_watch_duration:
                        raise ShortWatch(f"{where}: ended after {lasted:.3g} s without an event") from None
                    return
                except Unreachable as exc:
                    # The connection broke under an open stream (a reset, a proxy cutting it): like
                    # client-go, a watch that had delivered events or lasted is re-opened at once
                    # from the last resourceVersion; one that broke at once is backed off.
                    lasted = self._clock.now() - opened
                    if not delivered and lasted < s.min_watch_duration:
                        raise
                    raise _Broken(f"{where}: {exc}") from exc
                except TimeoutError:
                    raise _Silent(f"{where}: no event within {s.inactivity_timeout:g} s") from None
                delivered += 1
                self._hear(namespace)
                self._rv[namespace] = self._apply(event.type, event.object) or self._rv[namespace]
        finally:
            await watch.__aexit__(None, None, None)

    def _apply(self, kind: str, obj: Object) -> str | None:
        new_rv: str | None = obj.get("metadata", {}).get("resourceVersion")
        if kind == "BOOKMARK":
            return new_rv
        if self._metrics is not None:
            self._metrics.informer_events.labels(str(self.ref), kind).inc()
        if kind in ("ADDED", "MODIFIED"):
            obj, whole = self._stored_form(obj)
            old = self.cache.upsert(obj, whole=whole)
            self._deliver(old, obj)
        elif kind == "DELETED":
            # Handlers get the event's object, the object's final state (client-go's DeleteFunc
            # does too), not the cached one, which may lag it (the last update before the delete).
            self.cache.remove(key_of(obj))
            self._deliver(self._stored_form(obj)[0], None)
        return new_rv

    def _deliver(self, old: Object | None, new: Object | None) -> None:
        for h in self._handlers:
            if old is None and new is not None:
                self._safe(h.on_add, new)
            elif old is not None and new is not None:
                self._safe(h.on_update, old, new)
            elif old is not None:
                self._safe(h.on_delete, old)

    async def _resync_loop(self, period: float) -> None:
        await self._synced.wait()
        while True:
            await self._clock.sleep(period * (1 + random.uniform(0, 0.1)))
            self.resync()

    def _safe(self, fn: Any, *args: Object) -> None:
        try:
            fn(*args)
        except Exception:
            log.exception("event handler failed", resource=str(self.ref))
