"""``OwnReads``: the CR from the cache, with a GET only while the cache lags our own write."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from nova_operator.kube.resources import NOVAS
from nova_operator.kube.types import Object
from nova_operator.reconcilers.finalizers import ensure_finalizer, has_finalizer
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.ownreads import OwnReads
from tests.unit.reconcilers.fakes import FakeKube

FINALIZER = "nova.openstack.c5c3.io/finalizer"


def nova(name: str = "nova") -> Object:
    return {"apiVersion": NOVAS.api_version, "kind": "Nova", "metadata": {"name": name, "namespace": "ns"}}


def gets(kube: FakeKube) -> int:
    return len([c for c in kube.calls if c[0] == "get"])


@pytest.fixture
def kube() -> FakeKube:
    return FakeKube()


@pytest.fixture
def world(kube: FakeKube) -> tuple[FakeKube, Cache, OwnReads]:
    cache = Cache("novas")
    cache.upsert(kube.put(NOVAS, nova()))
    return kube, cache, OwnReads(kube, NOVAS, cache)  # type: ignore[arg-type]


async def pass_adding_the_finalizer(
    kube: FakeKube, reads: OwnReads, meanwhile: Callable[[Object], None] | None = None
) -> Object:
    """One pass: read the CR, add the finalizer (our own write), record the pass; the CR it read.

    ``meanwhile`` gets the CR as stored after the write, before the pass records it (the watch)."""
    obj = await reads.read("ns", "nova")
    assert obj is not None
    seen = obj["metadata"]["resourceVersion"]
    assert await ensure_finalizer(kube, NOVAS, obj, FINALIZER)  # type: ignore[arg-type]
    if meanwhile is not None:
        meanwhile(copy.deepcopy(kube.store[(str(NOVAS), "ns", "nova")]))
    reads.after_pass(obj, seen)
    return obj


async def test_a_converged_read_comes_from_the_cache_as_a_copy(
    world: tuple[FakeKube, Cache, OwnReads],
) -> None:
    kube, cache, reads = world
    for _ in range(3):
        obj = await reads.read("ns", "nova")
        assert obj is not None
        obj["metadata"]["labels"] = {"changed": "by the pass"}
        reads.after_pass(obj, obj["metadata"]["resourceVersion"])
    assert gets(kube) == 0
    assert "labels" not in (cache.get("nova", "ns") or {})["metadata"]
    assert len(reads) == 0


async def test_after_our_own_write_a_lagging_cache_is_not_trusted(
    world: tuple[FakeKube, Cache, OwnReads],
) -> None:
    kube, cache, reads = world
    await pass_adding_the_finalizer(kube, reads)

    # the watch has not delivered the patch yet: the cache still lacks the finalizer
    again = await reads.read("ns", "nova")
    assert again is not None
    assert has_finalizer(again, FINALIZER)
    assert gets(kube) == 1
    # so the pass does not add it a second time (which would be a Conflict on the old version)
    assert not await ensure_finalizer(kube, NOVAS, again, FINALIZER)  # type: ignore[arg-type]
    reads.after_pass(again, again["metadata"]["resourceVersion"])
    assert await reads.read("ns", "nova") is not None
    assert gets(kube) == 2  # still lagging: still a GET

    cache.upsert(copy.deepcopy(kube.store[(str(NOVAS), "ns", "nova")]))  # the watch catches up
    for _ in range(3):
        caught = await reads.read("ns", "nova")
        assert caught is not None
        assert has_finalizer(caught, FINALIZER)
        reads.after_pass(caught, caught["metadata"]["resourceVersion"])
    assert gets(kube) == 2
    assert len(reads) == 0


async def test_a_write_by_someone_else_after_ours_ends_the_gets(
    world: tuple[FakeKube, Cache, OwnReads],
) -> None:
    kube, cache, reads = world
    await pass_adding_the_finalizer(kube, reads)
    # a user edit lands right after our write; the watch skips straight to it
    live = copy.deepcopy(kube.store[(str(NOVAS), "ns", "nova")])
    live["metadata"]["labels"] = {"edited": "yes"}
    cache.upsert(kube.put(NOVAS, live))
    first = await reads.read("ns", "nova")
    assert first is not None
    assert first["metadata"]["labels"] == {"edited": "yes"}
    reads.after_pass(first, first["metadata"]["resourceVersion"])
    assert gets(kube) == 1  # once: the GET showed the version the cache holds
    assert await reads.read("ns", "nova") is not None
    assert gets(kube) == 1


async def test_a_failed_pass_is_followed_by_a_get(world: tuple[FakeKube, Cache, OwnReads]) -> None:
    kube, _, reads = world
    obj = await reads.read("ns", "nova")
    assert obj is not None
    reads.after_pass(obj, obj["metadata"]["resourceVersion"], failed=True)
    assert await reads.read("ns", "nova") is not None
    assert gets(kube) == 1


async def test_a_released_cr_is_forgotten_and_a_gone_one_reads_none(
    world: tuple[FakeKube, Cache, OwnReads],
) -> None:
    kube, cache, reads = world
    obj = await reads.read("ns", "nova")
    assert obj is not None
    obj["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=[], resourceVersion="999")
    reads.after_pass(obj, "1")
    assert len(reads) == 0

    other = await reads.read("ns", "nova")
    assert other is not None
    reads.after_pass(other, "1", failed=True)  # remembered: the next read GETs
    del kube.store[(str(NOVAS), "ns", "nova")]
    cache.remove(next(iter(cache.list_keys())))
    assert await reads.read("ns", "nova") is None
    assert len(reads) == 0  # a gone CR leaves nothing behind


async def test_without_a_cache_every_read_is_a_get(kube: FakeKube) -> None:
    kube.put(NOVAS, nova())
    reads = OwnReads(kube, NOVAS, None)  # type: ignore[arg-type]
    for _ in range(2):
        assert await reads.read("ns", "nova") is not None
    assert await reads.read("ns", "missing") is None
    assert gets(kube) == 3


async def test_once_the_watch_delivered_our_write_a_later_edit_is_read_from_the_cache(
    world: tuple[FakeKube, Cache, OwnReads],
) -> None:
    kube, cache, reads = world
    await pass_adding_the_finalizer(kube, reads)
    ours = copy.deepcopy(kube.store[(str(NOVAS), "ns", "nova")])
    old = cache.get("nova", "ns")
    cache.upsert(ours)
    assert old is not None
    reads.on_update(old, ours)  # the informer delivers our write: nothing left to wait for
    assert len(reads) == 0
    edited = copy.deepcopy(ours)
    edited["metadata"]["labels"] = {"edited": "yes"}
    cache.upsert(kube.put(NOVAS, edited))  # a later edit by the user
    later = await reads.read("ns", "nova")
    assert later is not None
    assert later["metadata"]["labels"] == {"edited": "yes"}
    assert gets(kube) == 0


async def test_a_delete_from_the_watch_forgets_the_cr(world: tuple[FakeKube, Cache, OwnReads]) -> None:
    _, _, reads = world
    obj = await reads.read("ns", "nova")
    assert obj is not None
    reads.after_pass(obj, obj["metadata"]["resourceVersion"], failed=True)
    assert len(reads) == 1
    reads.on_delete(obj)
    assert len(reads) == 0


async def test_run_pass_records_a_raising_pass_and_answers_gone_for_a_missing_cr(
    world: tuple[FakeKube, Cache, OwnReads],
) -> None:
    kube, _, reads = world

    async def boom(obj: Object) -> str:
        raise RuntimeError("the pass failed")

    with pytest.raises(RuntimeError):
        await reads.run_pass("ns", "nova", boom, "gone")
    assert gets(kube) == 0

    async def name_of(obj: Object) -> str:
        return str(obj["metadata"]["name"])

    assert await reads.run_pass("ns", "nova", name_of, "gone") == "nova"
    assert gets(kube) == 1  # after the failure, one GET
    assert await reads.run_pass("ns", "missing", name_of, "gone") == "gone"


async def test_a_write_the_watch_delivered_before_the_pass_ended_is_not_waited_for(
    world: tuple[FakeKube, Cache, OwnReads],
) -> None:
    """The echo of our write can reach the cache while the pass is still running: no GET after it."""
    kube, cache, reads = world
    delivered: list[Object] = []

    def watch(live: Object) -> None:  # the watch: before the pass recorded its write
        cache.upsert(copy.deepcopy(live))
        reads.on_update(live, live)
        delivered.append(live)

    await pass_adding_the_finalizer(kube, reads, watch)
    assert len(reads) == 0
    live = delivered[0]
    touched = copy.deepcopy(live)
    touched["metadata"]["resourceVersion"] = "999"  # somebody else's change, later
    cache.upsert(touched)
    reads.on_update(live, touched)
    again = await reads.read("ns", "nova")
    assert again is not None
    assert again["metadata"]["resourceVersion"] == "999"
    assert gets(kube) == 0


async def test_a_version_the_watch_delivers_while_the_get_runs_ends_the_gets(
    world: tuple[FakeKube, Cache, OwnReads],
) -> None:
    """Our write, then a pass that GETs because the cache lags it; the watch delivers that very
    version while the GET is out. That version is not waited for again: a later change (the
    bench's wake-up touch) is read from the cache, with no request."""
    kube, cache, reads = world
    await pass_adding_the_finalizer(kube, reads)
    get = kube.get

    async def get_while_the_watch_delivers(*args: Any, **kw: Any) -> Object:
        live = await get(*args, **kw)
        old = cache.get("nova", "ns")
        cache.upsert(copy.deepcopy(live))
        reads.on_update(old or {}, copy.deepcopy(live))
        return live

    kube.get = get_while_the_watch_delivers  # type: ignore[method-assign]
    again = await reads.read("ns", "nova")
    assert again is not None
    reads.after_pass(again, again["metadata"]["resourceVersion"])
    assert gets(kube) == 1
    touched = copy.deepcopy(kube.store[(str(NOVAS), "ns", "nova")])
    touched["metadata"]["annotations"] = {"touch": "1"}
    cache.upsert(kube.put(NOVAS, touched))  # someone else's change, delivered by the watch
    woken = await reads.read("ns", "nova")
    assert woken is not None
    assert woken["metadata"]["annotations"] == {"touch": "1"}
    assert gets(kube) == 1  # from the cache
    assert len(reads) == 0
