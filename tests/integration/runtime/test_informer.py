"""The informer against the real API server: events, a restart mid-watch, a forced 410."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest
from simcluster import ControlPlane

from nova_operator.kube import Kube
from nova_operator.kube.resources import CONFIGMAPS, ResourceRef
from nova_operator.metrics import Metrics
from nova_operator.runtime.informer import Informer, WatchStreamLike
from nova_operator.settings import WatchSettings
from tests.integration.runtime.restarts import restart_apiserver_here

from .conftest import Recorder  # type: ignore[import-not-found]

pytestmark = pytest.mark.integration

FAST = WatchSettings(backoff_initial=0.05, backoff_max=0.5, inactivity_timeout=20, resync_period=None)
# kube-apiserver does not end open watches on SIGTERM; it exits when they go away (or is killed
# after 20 s). A short inactivity timeout is the client noticing a silent stream, and lets it go.
SILENCE_2S = dataclasses.replace(FAST, inactivity_timeout=2)


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


@contextlib.asynccontextmanager
async def running(informer: Informer) -> AsyncIterator[None]:
    task = asyncio.create_task(informer.run())
    try:
        async with asyncio.timeout(20):
            await informer.wait_for_sync()
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def operator_kube(plane: ControlPlane) -> Kube:
    return await Kube.connect(kubeconfig=str(plane.kubeconfig), context="admin", metrics=Metrics())


def data_of(informer: Informer, name: str, namespace: str) -> dict[str, str] | None:
    obj = informer.cache.get(name, namespace)
    return None if obj is None else obj.get("data", {})


async def test_informer_sees_add_update_delete(
    control_plane: ControlPlane, kube: Kube, namespace: str
) -> None:
    await kube.create(CONFIGMAPS, cm("before", v="0"), namespace)
    async with await operator_kube(control_plane) as ok:
        informer = Informer(ok, CONFIGMAPS, namespaces=[namespace], settings=FAST, metrics=ok.metrics)
        rec = Recorder()
        informer.add_handler(rec)
        async with running(informer):
            assert rec.events == [("add", "before", {"v": "0"})]
            assert "managedFields" not in informer.cache.get("before", namespace)["metadata"]  # type: ignore[index]
            await kube.create(CONFIGMAPS, cm("x", v="1"), namespace)
            await kube.patch(CONFIGMAPS, "x", {"data": {"v": "2"}}, namespace)
            await kube.delete(CONFIGMAPS, "x", namespace)
            await rec.until(lambda: len(rec.events) == 4)
    assert rec.events[1:] == [
        ("add", "x", {"v": "1"}),
        ("update", "x", {"v": "2"}),
        ("delete", "x", {"v": "2"}),
    ]


async def test_objects_larger_than_a_read_buffer_arrive_whole(
    control_plane: ControlPlane, kube: Kube, namespace: str
) -> None:
    big = "x" * 400_000  # far beyond aiohttp's 64 KiB line limit
    async with await operator_kube(control_plane) as ok:
        informer = Informer(ok, CONFIGMAPS, namespaces=[namespace], settings=FAST, metrics=ok.metrics)
        rec = Recorder()
        informer.add_handler(rec)
        async with running(informer):
            await kube.create(CONFIGMAPS, cm("big", v=big), namespace)
            await rec.until(lambda: len(rec.events) == 1)
        assert data_of(informer, "big", namespace) == {"v": big}


async def test_label_selected_informer_caches_only_matching_objects(
    control_plane: ControlPlane, kube: Kube, namespace: str
) -> None:
    async with await operator_kube(control_plane) as ok:
        informer = Informer(
            ok,
            CONFIGMAPS,
            namespaces=[namespace],
            label_selector="owned=yes",
            settings=FAST,
            metrics=ok.metrics,
        )
        rec = Recorder()
        informer.add_handler(rec)
        async with running(informer):
            mine = cm("mine")
            mine["metadata"]["labels"] = {"owned": "yes"}
            await kube.create(CONFIGMAPS, cm("other"), namespace)
            await kube.create(CONFIGMAPS, mine, namespace)
            await rec.until(lambda: len(rec.events) == 1)
            # Dropping the label makes the object leave the selection: a delete.
            await kube.patch(CONFIGMAPS, "mine", {"metadata": {"labels": {"owned": None}}}, namespace)
            await rec.until(lambda: len(rec.events) == 2)
        assert [(e[0], e[1]) for e in rec.events] == [("add", "mine"), ("delete", "mine")]
        assert informer.cache.list_keys() == []


async def test_cache_converges_after_apiserver_restart_mid_watch(
    control_plane: ControlPlane, kube: Kube, namespace: str
) -> None:
    for name in ("keep", "change", "drop"):
        await kube.create(CONFIGMAPS, cm(name, v="0"), namespace)
    async with await operator_kube(control_plane) as ok:
        informer = Informer(ok, CONFIGMAPS, namespaces=[namespace], settings=SILENCE_2S, metrics=ok.metrics)
        rec = Recorder()
        informer.add_handler(rec)
        async with running(informer):
            await kube.patch(CONFIGMAPS, "change", {"data": {"v": "1"}}, namespace)
            await rec.until(lambda: data_of(informer, "change", namespace) == {"v": "1"})

            await asyncio.to_thread(control_plane.stop_apiserver)  # the watch breaks mid-stream
            restart_apiserver_here(control_plane)
            # Write at once, racing the informer's reconnect.
            for i in range(2, 12):
                await kube.patch(CONFIGMAPS, "change", {"data": {"v": str(i)}}, namespace)
            await kube.delete(CONFIGMAPS, "drop", namespace)
            await kube.create(CONFIGMAPS, cm("new", v="n"), namespace)

            await rec.until(
                lambda: (
                    data_of(informer, "change", namespace) == {"v": "11"}
                    and data_of(informer, "new", namespace) == {"v": "n"}
                    and data_of(informer, "drop", namespace) is None
                )
            )
            server = await kube.list(CONFIGMAPS, namespace)
            assert {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in server["items"]} == {
                o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in informer.cache.list()
            }
    # The handlers saw the last value of every object, and the delete.
    assert ("delete", "drop", {"v": "0"}) in rec.events
    assert [e for e in rec.events if e[1] == "change"][-1] == ("update", "change", {"v": "11"})


class PausableWatch:
    """Wraps ``Kube``: ``pause()`` closes the open watch and holds new ones until ``resume()``."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._open = asyncio.Event()
        self._open.set()
        self.streams: list[Any] = []
        self.watching = asyncio.Event()

    async def pause(self) -> None:
        self._open.clear()
        for stream in self.streams:
            await stream.__aexit__(None, None, None)

    def resume(self) -> None:
        self._open.set()

    async def list(self, ref: ResourceRef, namespace: str | None = None, **kw: Any) -> dict[str, Any]:
        return await self.kube.list(ref, namespace, **kw)

    def watch(self, ref: ResourceRef, namespace: str | None = None, **kw: Any) -> WatchStreamLike:
        outer = self

        class Held:
            async def __aenter__(self) -> Any:
                await outer._open.wait()
                self.inner = outer.kube.watch(ref, namespace, **kw)
                stream = await self.inner.__aenter__()
                outer.streams.append(self.inner)
                outer.watching.set()
                return stream

            async def __aexit__(self, *exc: object) -> None:
                await self.inner.__aexit__(*exc)

        return Held()


async def test_expired_resource_version_relists_and_loses_no_event(
    control_plane: ControlPlane, kube: Kube, namespace: str
) -> None:
    for name in ("keep", "change", "drop"):
        await kube.create(CONFIGMAPS, cm(name, v="0"), namespace)
    async with await operator_kube(control_plane) as ok:
        lw = PausableWatch(ok)
        informer = Informer(lw, CONFIGMAPS, namespaces=[namespace], settings=FAST, metrics=ok.metrics)
        rec = Recorder()
        informer.add_handler(rec)
        async with running(informer):
            await asyncio.wait_for(lw.watching.wait(), 10)
            await lw.pause()  # the informer's watch is cut and the next one waits
            # A restart of the API server discards its watch cache: every resourceVersion the
            # informer holds is now too old (410 Gone), as after an etcd compaction.
            await asyncio.to_thread(control_plane.stop_apiserver)
            restart_apiserver_here(control_plane)
            before = len(rec.events)
            await kube.patch(CONFIGMAPS, "change", {"data": {"v": "1"}}, namespace)
            await kube.delete(CONFIGMAPS, "drop", namespace)
            await kube.create(CONFIGMAPS, cm("new", v="n"), namespace)
            lw.resume()
            await rec.until(lambda: len(rec.events) >= before + 3)
            gone = ok.metrics.registry.get_sample_value(
                "nova_operator_informer_watch_restarts_total", {"resource": "configmaps", "reason": "gone"}
            )
            assert gone == 1
            assert sorted(rec.events[before:]) == [
                ("add", "new", {"v": "n"}),
                ("delete", "drop", {"v": "0"}),
                ("update", "change", {"v": "1"}),
            ]
            assert ok.metrics.registry.get_sample_value(
                "nova_operator_informer_relists_total", {"resource": "configmaps"}
            ) == pytest.approx(2)
            assert sorted(o["metadata"]["name"] for o in informer.cache.list()) == ["change", "keep", "new"]
