"""Issue 26 item 12 on the real API server: another writer's change is never taken for a pass's own.

A controller keeps a derived Secret for a Nova through ``PassContext.ensure`` (the Nova steps' write
path), its Secrets informer behind a switch that takes the watch down. During the outage the pass
writes the Secret (its cache still shows the version before), a user adds a key, and a second pass
re-sends the apply from the lagging cache: the server has nothing to do and answers with the
user's version. When the watch is back (410, relist), the relist's update must wake the Nova,
whose next pass drops the foreign key. On e59040d the second pass recorded the user's version as
its own write and the relist woke nobody: the key stayed until the 10 h resync.
"""

from __future__ import annotations

import asyncio
import base64
import copy
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from simcluster import ControlPlane

from nova_operator import apply
from nova_operator.kube import Kube
from nova_operator.kube.errors import Gone
from nova_operator.kube.resources import NOVAS, SECRETS
from nova_operator.kube.types import Object
from nova_operator.metrics import Metrics
from nova_operator.models.nova import Nova
from nova_operator.reconcilers.metrics import NovaMetrics
from nova_operator.reconcilers.nova.context import PassContext
from nova_operator.runtime import Controller, Informer, Request, Result
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.echoes import OwnWrites
from nova_operator.runtime.handlers import enqueue_for_owner
from nova_operator.settings import WatchSettings
from tests.integration.nova.inputs import nova_body
from tests.integration.nova.passes import make_ctx, stored_nova
from tests.integration.nova.requests import Recorder

pytestmark = pytest.mark.integration

SETTINGS = WatchSettings(backoff_initial=0.05, backoff_max=0.5, inactivity_timeout=60, resync_period=None)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class Outage:
    """The operator's list/watch with a switch: while down, no watch event arrives; back up, the
    held watch answers 410 (the outage outlasted the watch cache) and the informer relists."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.up = asyncio.Event()
        self.up.set()

    async def list(self, *args: Any, **kw: Any) -> Object:
        return await self.kube.list(*args, **kw)

    def watch(self, *args: Any, **kw: Any) -> _Gated:
        return _Gated(self.kube.watch(*args, **kw), self.up)


class _Gated:
    def __init__(self, inner: Any, up: asyncio.Event) -> None:
        self.inner, self.up = inner, up

    async def __aenter__(self) -> _Gated:
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.inner.__aexit__(*exc)

    def __aiter__(self) -> _Gated:
        return self

    async def __anext__(self) -> Any:
        event = await anext(self.inner)
        if not self.up.is_set():  # the outage began: this event never reaches the operator
            await self.up.wait()
            raise Gone("too old resource version")
        return event


class Nudge:
    """Sets ``event`` on every event of an informer."""

    def __init__(self, event: asyncio.Event) -> None:
        self.event = event

    def on_add(self, obj: Object) -> None:
        self.event.set()

    def on_update(self, old: Object, new: Object) -> None:
        self.event.set()

    def on_delete(self, obj: Object) -> None:
        self.event.set()


class DerivedSecret:
    """For a Nova, a Secret ``<name>-derived`` holding ``password``, written through ``ctx.ensure``."""

    def __init__(self, kube: Kube, novas: Informer, secrets: Informer) -> None:
        self.kube, self.novas, self.secrets = kube, novas, secrets
        self.password = "old"
        self.started = 0
        self.finished = 0  # the highest ``started`` number among the passes that ended
        self.progress = asyncio.Event()
        self.controller: Controller | None = None

    async def reconcile(self, request: Request) -> Result:
        self.started += 1
        number = self.started
        try:
            nova = self.novas.cache.get(request.name, request.namespace)
            if nova is None:
                return Result()
            assert self.controller is not None
            ctx = PassContext(
                kube=self.kube,
                obj=nova,
                nova=Nova.model_validate(nova),
                status={},
                now=lambda: datetime.now(UTC),
                events=None,  # type: ignore[arg-type]  # this controller emits none
                caches={SECRETS: self.secrets.cache},
                metrics=NovaMetrics.of(self.kube.metrics),
                writes=self.controller.own_writes,
            )
            desired = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": f"{request.name}-derived", "namespace": request.namespace},
                "type": "Opaque",
                "data": {"password": b64(self.password)},
            }
            await ctx.ensure(desired, digest_key=b"digest-key-of-the-nova")  # as the Secrets step keys it
            return Result()
        finally:
            self.finished = max(self.finished, number)
            self.progress.set()

    async def a_pass(self, request: Request) -> None:
        """Enqueues ``request`` and waits for a pass that began after it (not one already under way,
        which read the state before the caller changed it)."""
        begun = self.started
        assert self.controller is not None
        self.controller.enqueue(request)
        await self.until(lambda: self.finished > begun)

    async def until(self, condition: Callable[[], bool], within: float = 20) -> None:
        async with asyncio.timeout(within):
            while not condition():
                self.progress.clear()
                await self.progress.wait()


@pytest.fixture
async def operator(nova_cluster: ControlPlane, namespace: str) -> AsyncIterator[tuple[DerivedSecret, Outage]]:
    kube = await Kube.connect(kubeconfig=str(nova_cluster.kubeconfig), context="admin", metrics=Metrics())
    kube.timeout = 10
    outage = Outage(kube)
    novas = Informer(kube, NOVAS, namespaces=(namespace,), settings=SETTINGS)
    secrets = Informer(outage, SECRETS, namespaces=(namespace,), settings=SETTINGS)
    for informer in (novas, secrets):
        informer.keep(None)  # whole objects
    reconciler = DerivedSecret(kube, novas, secrets)
    secrets.add_handler(Nudge(reconciler.progress))  # a test waiting on the cache wakes on its events
    ctl = Controller("derived-secret", reconciler, metrics=kube.metrics)
    reconciler.controller = ctl
    ctl.watch_primary(novas)
    ctl.watch_owned(secrets, owner_group=NOVAS.group, owner_kind="Nova")
    tasks = [asyncio.create_task(inf.run()) for inf in (novas, secrets)]
    try:
        async with asyncio.timeout(20):
            await asyncio.gather(novas.wait_for_sync(), secrets.wait_for_sync())
        tasks.append(asyncio.create_task(ctl.run()))
        yield reconciler, outage
    finally:
        ctl.stop()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await kube.close()


async def test_a_key_added_during_a_secrets_watch_outage_is_dropped_once_the_watch_is_back(
    admin: Kube, operator: tuple[DerivedSecret, Outage], namespace: str
) -> None:
    reconciler, outage = operator
    await admin.create(NOVAS, nova_body(), namespace)
    cached = lambda: reconciler.secrets.cache.get("nova-derived", namespace)  # noqa: E731
    await reconciler.until(lambda: (cached() or {}).get("data") == {"password": b64("old")})
    before = cached()
    assert before is not None

    outage.up.clear()  # the Secrets watch goes down
    reconciler.password = "new"  # a pass writes the Secret; its cache keeps showing the old one
    await reconciler.a_pass(Request(namespace, "nova"))
    ours = await admin.get(SECRETS, "nova-derived", namespace)
    assert ours["data"] == {"password": b64("new")}

    # a user adds a key
    theirs = await admin.patch(
        SECRETS, "nova-derived", {"data": {"extra": b64("user")}}, namespace, field_manager="kubectl-edit"
    )
    # a pass re-sends its apply from the lagging cache: nothing to do, answered with the user's version
    await reconciler.a_pass(Request(namespace, "nova"))
    now = await admin.get(SECRETS, "nova-derived", namespace)
    assert now["metadata"]["resourceVersion"] == theirs["metadata"]["resourceVersion"]  # a no-op
    assert cached() == before  # the cache still lags

    outage.up.set()  # the watch is back: 410, relist, the user's version reaches the cache
    await reconciler.until(lambda: (cached() or {}).get("data", {}).get("extra") is not None, within=10)
    # ... and wakes the Nova, whose pass drops the key nobody but it may put there
    await reconciler.until(lambda: set((cached() or {}).get("data") or {}) == {"password"}, within=10)
    final = await admin.get(SECRETS, "nova-derived", namespace)
    assert final["data"] == {"password": b64("new")}


# -- one pass's write on a lagging cache: whose is the answer? ------------------------------------
# ``PassContext.ensure`` in a pass over a Nova stored by kube-apiserver, its Secrets cache a ``Cache``
# the test fills (a lagging watch: a version older than the server's, or nothing); the user's edits
# are the admin's merge patches under another field manager; ``woken`` is what the Secrets watch's
# owner handler does with the event a relist then delivers.

DIGEST_KEY = b"digest-key-of-the-nova"


def derived(**data: str) -> Object:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "nova-derived"},
        "type": "Opaque",
        "data": {k: b64(v) for k, v in data.items()},
    }


def lagging_cache(obj: Object | None) -> Cache:
    cache = Cache(str(SECRETS))
    if obj is not None:
        cache.upsert(copy.deepcopy(obj))
    return cache


async def ensure(kube: Kube, nova: Object, cache: Cache, writes: OwnWrites, **data: str) -> None:
    """One pass's write of the derived Secret through ``ctx.ensure``, its Secrets cache ``cache``."""
    ctx = make_ctx(kube, nova, caches={SECRETS: cache}, writes=writes)
    ctx.state.digest_key = DIGEST_KEY  # the Secrets step reads it before any ensure
    desired = derived(**data)
    desired["metadata"]["namespace"] = nova["metadata"]["namespace"]
    await ctx.ensure(desired)


def woken(writes: OwnWrites, old: Object | None, new: Object) -> list[Request]:
    """The keys the Secrets watch wakes for the event ``old`` -> ``new`` (a relist's difference)."""
    keys: list[Request] = []
    handler = enqueue_for_owner(keys.append, group=NOVAS.group, kind="Nova", echoes=writes)
    if old is None:
        handler.on_add(copy.deepcopy(new))
    else:
        handler.on_update(copy.deepcopy(old), copy.deepcopy(new))
    return keys


async def user_edit(admin: Kube, ns: str, **data: str) -> Object:
    """Another writer (``kubectl edit``) adds keys."""
    patch = {"data": {k: b64(v) for k, v in data.items()}}
    return await admin.patch(SECRETS, "nova-derived", patch, ns, field_manager="kubectl-edit")


async def test_a_no_op_apply_answered_with_another_writers_version_wakes_the_nova(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    # The case: the cache lags (the Secrets watch is down), a pass re-sends an apply the
    # server finds nothing to do for, and the server answers with the user's version.
    nova, writes = await stored_nova(admin, namespace), OwnWrites()
    await ensure(ours, nova, lagging_cache(None), writes, password="old")
    first = await admin.get(SECRETS, "nova-derived", namespace)  # cached, then the watch goes down
    await ensure(ours, nova, lagging_cache(first), writes, password="new")  # our write
    await user_edit(admin, namespace, extra="user")  # a user adds a key during the outage
    await ensure(ours, nova, lagging_cache(first), writes, password="new")  # the cache still lags
    live = await admin.get(SECRETS, "nova-derived", namespace)
    assert live["data"]["extra"] == b64("user")  # the pass could not see it: it must be woken
    assert woken(writes, first, live) == [Request(namespace, "nova")]  # the relist's update wakes it


async def test_a_write_on_the_cached_basis_is_still_the_passs_own(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova, writes = await stored_nova(admin, namespace), OwnWrites()
    await ensure(ours, nova, lagging_cache(None), writes, password="old")
    first = await admin.get(SECRETS, "nova-derived", namespace)
    assert woken(writes, None, first) == []  # the create's echo
    await ensure(ours, nova, lagging_cache(first), writes, password="new")
    second = await admin.get(SECRETS, "nova-derived", namespace)
    assert second["data"] == {"password": b64("new")}
    assert woken(writes, first, second) == []  # its echo wakes nobody
    # one request per write, no refusal on a fresh cache, and no read: the child the cache did not
    # hold yet (its first write) is created first (``apply.create``)
    assert [(v, c) for v, _, _, c in ours.calls] == [("apply", "201"), ("apply", "200")]


async def test_a_child_the_cache_lacks_is_read_first_so_the_write_has_a_known_basis(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    # An earlier life of the object, edited by a user, that the cache does not hold: the create-first
    # write is refused (the object exists), so the ownership check reads it before the write, which
    # goes out on the server's own version and is the pass's (the pass saw the user's key); without
    # that read the write's answer would hold a change no pass saw, and apply's managedFields rule
    # would make it wake the Nova.
    nova, writes = await stored_nova(admin, namespace), OwnWrites()
    await ensure(ours, nova, lagging_cache(None), OwnWrites(), password="new")
    seen = await user_edit(admin, namespace, extra="user")
    ours.calls.clear()
    await ensure(ours, nova, lagging_cache(None), writes, password="new")  # the cache: absent
    live = await admin.get(SECRETS, "nova-derived", namespace)
    assert [(v, c) for v, _, _, c in ours.calls[:2]] == [("apply", "409"), ("get", "200")]  # refused, read
    assert "extra" not in live["data"]  # the key the pass saw is dropped
    assert woken(writes, seen, live) == []


async def test_dropping_foreign_keys_from_a_lagging_cache_is_not_the_passs_own(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova, writes = await stored_nova(admin, namespace), OwnWrites()
    await ensure(ours, nova, lagging_cache(None), writes, password="new")
    seen = await user_edit(admin, namespace, extra="user")  # the cache saw the first extra key ...
    await user_edit(admin, namespace, more="more")  # ... not the second
    await ensure(ours, nova, lagging_cache(seen), writes, password="new")
    live = await admin.get(SECRETS, "nova-derived", namespace)
    assert live["data"]["more"] == b64("more")  # only the keys the pass saw are dropped
    assert "extra" not in live["data"]
    assert woken(writes, seen, live) == [Request(namespace, "nova")]  # the next pass must see the rest
    # on a fresh cache the drop is the pass's own
    await ensure(ours, nova, lagging_cache(live), writes, password="new")
    final = await admin.get(SECRETS, "nova-derived", namespace)
    assert set(final["data"]) == {"password"}
    assert woken(writes, live, final) == []
    assert apply.APPLIED_DIGEST in final["metadata"]["annotations"]
