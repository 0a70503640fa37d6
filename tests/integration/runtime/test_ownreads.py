"""``OwnReads`` on the real API server: the object from the cache, with a GET only while the cache
lags our own write (issue 39, item 6).

The object (a ConfigMap: read-your-writes knows no kind) is stored by kube-apiserver, our writes are
finalizer patches the server answers with its own resourceVersions, and the GETs are counted from the
reader's request metrics. The test fills the ``Cache`` itself, playing the watch, so it decides when
the watch "delivers" what the server holds.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from simcluster import ControlPlane

from nova_operator.kube import Kube
from nova_operator.kube.errors import NotFound
from nova_operator.kube.resources import CONFIGMAPS
from nova_operator.kube.types import Object
from nova_operator.metrics import Metrics
from nova_operator.reconcilers.finalizers import ensure_finalizer, has_finalizer, remove_finalizer
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.ownreads import OwnReads
from nova_operator.runtime.request import Request

pytestmark = pytest.mark.integration

FINALIZER = "nova.openstack.c5c3.io/finalizer"
NAME = "nova"


@pytest.fixture
async def reader(control_plane: ControlPlane) -> AsyncIterator[Kube]:
    """The controller's client: its requests alone are counted (the test's own go through ``kube``)."""
    k = await Kube.connect(kubeconfig=str(control_plane.kubeconfig), context="admin", metrics=Metrics())
    async with k:
        yield k


def gets(kube: Kube) -> int:
    return kube.metrics.api_request_count(frozenset({"get"}))


class World:
    def __init__(self, kube: Kube, reader: Kube, namespace: str) -> None:
        self.kube, self.reader, self.ns = kube, reader, namespace
        self.cache = Cache(str(CONFIGMAPS))
        self.reads = OwnReads(reader, CONFIGMAPS, self.cache)

    async def stored(self) -> Object:
        return await self.kube.get(CONFIGMAPS, NAME, self.ns)

    async def deliver(self) -> Object:
        """The watch catches up: the cache holds what the server holds (and the handler hears of it)."""
        live = await self.stored()
        old = self.cache.get(NAME, self.ns)
        self.cache.upsert(live)
        self.reads.on_update(old or {}, live)
        return live

    async def edit(self, **labels: str) -> Object:
        """Somebody else changes the object."""
        return await self.kube.patch(CONFIGMAPS, NAME, {"metadata": {"labels": labels}}, self.ns)


@pytest.fixture
async def world(kube: Kube, reader: Kube, namespace: str) -> World:
    w = World(kube, reader, namespace)
    made = await kube.create(CONFIGMAPS, {"metadata": {"name": NAME}, "data": {"k": "v"}}, namespace)
    w.cache.upsert(made)
    return w


async def pass_adding_the_finalizer(w: World, meanwhile: Callable[[], Any] | None = None) -> Object:
    """One pass: read, add the finalizer (our own write), record the pass; the object it read.

    ``meanwhile`` runs after the write, before the pass records it (the watch delivering it early)."""
    obj = await w.reads.read(w.ns, NAME)
    assert obj is not None
    seen = obj["metadata"]["resourceVersion"]
    assert await ensure_finalizer(w.reader, CONFIGMAPS, obj, FINALIZER)
    if meanwhile is not None:
        await meanwhile()
    w.reads.after_pass(obj, seen)
    return obj


async def test_a_converged_read_comes_from_the_cache_as_a_copy(world: World) -> None:
    for _ in range(3):
        obj = await world.reads.read(world.ns, NAME)
        assert obj is not None
        obj["metadata"]["labels"] = {"changed": "by the pass"}
        world.reads.after_pass(obj, obj["metadata"]["resourceVersion"])
    assert gets(world.reader) == 0
    assert "labels" not in (world.cache.get(NAME, world.ns) or {})["metadata"]
    assert len(world.reads) == 0


async def test_after_our_own_write_a_lagging_cache_is_not_trusted(world: World) -> None:
    w = world
    await pass_adding_the_finalizer(w)
    # the watch has not delivered the patch yet: the cache still lacks the finalizer
    again = await w.reads.read(w.ns, NAME)
    assert again is not None
    assert has_finalizer(again, FINALIZER)
    assert gets(w.reader) == 1
    # so the pass does not add it a second time (which the server would refuse as a Conflict)
    assert not await ensure_finalizer(w.reader, CONFIGMAPS, again, FINALIZER)
    w.reads.after_pass(again, again["metadata"]["resourceVersion"])
    assert await w.reads.read(w.ns, NAME) is not None
    assert gets(w.reader) == 2  # still lagging: still a GET

    w.cache.upsert(await w.stored())  # the watch catches up
    for _ in range(3):
        caught = await w.reads.read(w.ns, NAME)
        assert caught is not None
        assert has_finalizer(caught, FINALIZER)
        w.reads.after_pass(caught, caught["metadata"]["resourceVersion"])
    assert gets(w.reader) == 2
    assert len(w.reads) == 0


async def test_a_write_by_someone_else_after_ours_ends_the_gets(world: World) -> None:
    w = world
    await pass_adding_the_finalizer(w)
    w.cache.upsert(await w.edit(edited="yes"))  # a user edit lands; the watch skips straight to it
    first = await w.reads.read(w.ns, NAME)
    assert first is not None
    assert first["metadata"]["labels"] == {"edited": "yes"}
    assert has_finalizer(first, FINALIZER)
    w.reads.after_pass(first, first["metadata"]["resourceVersion"])
    assert gets(w.reader) == 1  # once: the GET showed the version the cache holds
    assert await w.reads.read(w.ns, NAME) is not None
    assert gets(w.reader) == 1


async def test_a_failed_pass_is_followed_by_a_get(world: World) -> None:
    obj = await world.reads.read(world.ns, NAME)
    assert obj is not None
    world.reads.after_pass(obj, obj["metadata"]["resourceVersion"], failed=True)
    assert await world.reads.read(world.ns, NAME) is not None
    assert gets(world.reader) == 1


async def test_a_released_object_is_forgotten_and_a_gone_one_reads_none(world: World) -> None:
    w = world
    await pass_adding_the_finalizer(w)
    await w.kube.delete(CONFIGMAPS, NAME, w.ns)  # held by our finalizer: terminating
    await w.deliver()
    obj = await w.reads.read(w.ns, NAME)
    assert obj is not None
    assert obj["metadata"]["deletionTimestamp"]
    read_version = obj["metadata"]["resourceVersion"]
    assert await remove_finalizer(w.reader, CONFIGMAPS, obj, FINALIZER)  # the server deletes it now
    w.reads.after_pass(obj, read_version)
    assert len(w.reads) == 0
    with pytest.raises(NotFound):
        await w.stored()

    before = gets(w.reader)
    held = await w.reads.read(w.ns, NAME)  # the watch has not told of the deletion yet
    assert held is not None
    assert has_finalizer(held, FINALIZER)
    w.reads.after_pass(held, held["metadata"]["resourceVersion"], failed=True)  # the next read GETs
    assert gets(w.reader) == before
    assert await w.reads.read(w.ns, NAME) is None  # the server has: gone
    assert gets(w.reader) == before + 1
    assert len(w.reads) == 0  # a gone object leaves nothing behind
    w.cache.remove(Request(w.ns, NAME))
    assert await w.reads.read(w.ns, NAME) is None
    assert gets(w.reader) == before + 1


async def test_without_a_cache_every_read_is_a_get(world: World) -> None:
    reads = OwnReads(world.reader, CONFIGMAPS, None)
    for _ in range(2):
        assert await reads.read(world.ns, NAME) is not None
    assert await reads.read(world.ns, "missing") is None
    assert gets(world.reader) == 3


async def test_once_the_watch_delivered_our_write_a_later_edit_is_read_from_the_cache(world: World) -> None:
    w = world
    await pass_adding_the_finalizer(w)
    await w.deliver()  # the informer delivers our write: nothing left to wait for
    assert len(w.reads) == 0
    w.cache.upsert(await w.edit(edited="yes"))  # a later edit by the user
    later = await w.reads.read(w.ns, NAME)
    assert later is not None
    assert later["metadata"]["labels"] == {"edited": "yes"}
    assert gets(w.reader) == 0


async def test_a_delete_from_the_watch_forgets_the_object(world: World) -> None:
    obj = await world.reads.read(world.ns, NAME)
    assert obj is not None
    world.reads.after_pass(obj, obj["metadata"]["resourceVersion"], failed=True)
    assert len(world.reads) == 1
    await world.kube.delete(CONFIGMAPS, NAME, world.ns)
    world.cache.remove(Request(world.ns, NAME))
    world.reads.on_delete(obj)
    assert len(world.reads) == 0


async def test_run_pass_records_a_raising_pass_and_answers_gone_for_a_missing_object(world: World) -> None:
    async def boom(obj: Object) -> str:
        raise RuntimeError("the pass failed")

    with pytest.raises(RuntimeError):
        await world.reads.run_pass(world.ns, NAME, boom, "gone")
    assert gets(world.reader) == 0

    async def name_of(obj: Object) -> str:
        return str(obj["metadata"]["name"])

    assert await world.reads.run_pass(world.ns, NAME, name_of, "gone") == NAME
    assert gets(world.reader) == 1  # after the failure, one GET
    assert await world.reads.run_pass(world.ns, "missing", name_of, "gone") == "gone"


async def test_a_write_the_watch_delivered_before_the_pass_ended_is_not_waited_for(world: World) -> None:
    """The echo of our write can reach the cache while the pass is still running: no GET after it."""
    w = world
    await pass_adding_the_finalizer(w, w.deliver)
    assert len(w.reads) == 0
    w.cache.upsert(await w.edit(touched="later"))  # somebody else's change, later
    again = await w.reads.read(w.ns, NAME)
    assert again is not None
    assert again["metadata"]["labels"] == {"touched": "later"}
    assert gets(w.reader) == 0


async def test_a_version_the_watch_delivers_while_the_get_runs_ends_the_gets(world: World) -> None:
    """Our write, then a pass that GETs because the cache lags it; the watch delivers that very
    version while the GET is out. That version is not waited for again: a later change (the
    bench's wake-up touch) is read from the cache, with no request."""
    w = world
    await pass_adding_the_finalizer(w)
    get = w.reader.get

    async def get_while_the_watch_delivers(*args: Any, **kw: Any) -> Object:
        live = await get(*args, **kw)
        await w.deliver()
        return live

    w.reader.get = get_while_the_watch_delivers  # type: ignore[method-assign]
    again = await w.reads.read(w.ns, NAME)
    assert again is not None
    w.reads.after_pass(again, again["metadata"]["resourceVersion"])
    assert gets(w.reader) == 1
    w.cache.upsert(await w.edit(touch="1"))  # someone else's change, delivered by the watch
    woken = await w.reads.read(w.ns, NAME)
    assert woken is not None
    assert woken["metadata"]["labels"] == {"touch": "1"}
    assert gets(w.reader) == 1  # from the cache
    assert len(w.reads) == 0
