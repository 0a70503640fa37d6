"""The informer's loop against a scripted API: relist on 410, reconnect after errors and silence."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from nova_operator.kube.errors import Gone, Unreachable
from nova_operator.kube.resources import CONFIGMAPS, NODES
from nova_operator.metrics import Metrics
from nova_operator.runtime.informer import WATCH_RESTART_REASONS, Informer
from tests.unit.runtime.scripted import FAST, Event, Rec, ScriptedAPI, run_until_exhausted

Until = Callable[[Callable[[], bool]], Awaitable[None]]


def cm(name: str, rv: str, ns: str = "ns", **data: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": ns, "resourceVersion": rv, "managedFields": [{}]},
        "data": data,
    }


async def test_gone_relists_and_delivers_only_the_difference() -> None:
    api = ScriptedAPI(
        lists=[[cm("a", "1"), cm("b", "1")], [cm("a", "1"), cm("b", "5", v="2"), cm("c", "6")]],
        watches=[[Event("ADDED", cm("x", "3")), Event("DELETED", cm("x", "4")), Gone("too old")]],
    )
    metrics = Metrics()
    informer = Informer(api, CONFIGMAPS, settings=FAST, metrics=metrics)
    rec = Rec()
    informer.add_handler(rec)
    await run_until_exhausted(informer, api)
    assert rec.events == [
        ("add", "a"),
        ("add", "b"),
        ("add", "x"),
        ("delete", "x"),
        ("update", "b"),
        ("add", "c"),
    ]
    assert api.list_calls == 2
    assert api.watch_rvs == ["10", "20"]
    assert "managedFields" not in informer.cache.get("a", "ns")["metadata"]  # type: ignore[index]
    assert informer.cache.get("a", "ns")["kind"] == "ConfigMap"  # type: ignore[index]
    assert metrics.registry.get_sample_value(
        "nova_operator_informer_watch_restarts_total", {"resource": "configmaps", "reason": "gone"}
    )


async def test_errors_and_silence_rewatch_from_the_last_resource_version_without_relisting() -> None:
    api = ScriptedAPI(
        lists=[[cm("a", "1")]],
        watches=[
            [Event("MODIFIED", cm("a", "11", v="1")), Unreachable("reset")],
            [Unreachable("refused")],
            [Event("BOOKMARK", {"metadata": {"resourceVersion": "15"}}), "hang"],  # silent: inactivity
            [Event("ADDED", cm("b", "16")), Event("DELETED", cm("b", "17"))],  # closed normally
        ],
    )
    metrics = Metrics()
    informer = Informer(api, CONFIGMAPS, settings=FAST, metrics=metrics)
    rec = Rec()
    informer.add_handler(rec)
    await run_until_exhausted(informer, api)
    assert api.list_calls == 1
    assert api.watch_rvs == ["10", "11", "11", "15", "17"]
    assert rec.events == [("add", "a"), ("update", "a"), ("add", "b"), ("delete", "b")]

    def restarts(reason: str) -> float | None:
        return metrics.registry.get_sample_value(
            "nova_operator_informer_watch_restarts_total", {"resource": "configmaps", "reason": reason}
        )

    assert (restarts("error"), restarts("inactive"), restarts("closed")) == (2, 1, 1)
    # Every reason has its series from the start (0 until it happens), and no other reason shows up.
    assert {r: restarts(r) for r in WATCH_RESTART_REASONS} == {
        "closed": 1,
        "inactive": 1,
        "gone": 0,
        "open_timeout": 0,
        "short": 0,
        "error": 2,
    }
    reasons = {
        sample.labels["reason"]
        for family in metrics.registry.collect()
        if family.name == "nova_operator_informer_watch_restarts"
        for sample in family.samples
    }
    assert reasons == set(WATCH_RESTART_REASONS)


def test_a_new_informer_exports_every_watch_restart_reason_at_zero() -> None:
    metrics = Metrics()
    Informer(ScriptedAPI(lists=[], watches=[]), CONFIGMAPS, settings=FAST, metrics=metrics)
    for reason in WATCH_RESTART_REASONS:
        assert (
            metrics.registry.get_sample_value(
                "nova_operator_informer_watch_restarts_total", {"resource": "configmaps", "reason": reason}
            )
            == 0
        )


async def test_several_namespaces_share_one_cache_and_sync_when_all_have_listed(until: Until) -> None:
    api = ScriptedAPI(lists=[[cm("a", "1", ns="n1"), cm("b", "1", ns="n2")]], watches=[])
    informer = Informer(api, CONFIGMAPS, namespaces=["n1", "n2"], settings=FAST)
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.wait_for_sync(), 1)
        assert informer.has_synced
        assert sorted(api.namespaces) == ["n1", "n2"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_cluster_scoped_kinds_ignore_namespaces() -> None:
    informer = Informer(ScriptedAPI([[]], []), NODES, namespaces=["n1", "n2"])
    assert informer.namespaces == (None,)


async def test_a_failing_handler_does_not_stop_delivery_to_others() -> None:
    api = ScriptedAPI(lists=[[cm("a", "1")]], watches=[[Event("ADDED", cm("b", "2"))]])
    informer = Informer(api, CONFIGMAPS, settings=FAST)

    class Broken(Rec):
        def on_add(self, obj: dict[str, Any]) -> None:
            raise RuntimeError("bug in a mapper")

    rec = Rec()
    informer.add_handler(Broken())
    informer.add_handler(rec)
    await run_until_exhausted(informer, api)
    assert rec.events == [("add", "a"), ("add", "b")]


async def test_resync_delivers_every_cached_object_as_an_update() -> None:
    api = ScriptedAPI(lists=[[cm("a", "1"), cm("b", "1")]], watches=[])
    informer = Informer(api, CONFIGMAPS, settings=FAST)
    rec = Rec()
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.wait_for_sync(), 1)
        informer.add_handler(rec)  # a late handler gets the cached objects as adds
        informer.resync()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert rec.events == [("add", "a"), ("add", "b"), ("update", "a"), ("update", "b")]


async def test_a_large_list_is_read_in_pages_as_one_snapshot() -> None:
    objs = [cm(f"o{i:02d}", "1") for i in range(25)]
    api = ScriptedAPI(lists=[objs], watches=[])
    informer = Informer(api, CONFIGMAPS, settings=dataclasses.replace(FAST, list_page_size=10))
    await run_until_exhausted(informer, api)
    assert len(informer.cache) == 25
    assert api.list_calls == 1
    assert api.watch_rvs == ["10"]


async def test_a_watched_deletion_hands_the_handlers_the_objects_final_state() -> None:
    # Issue 26 item 13: the DELETED event's object (what the object last was), not the cached one.
    final = cm("a", "3", v="final")
    final["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    api = ScriptedAPI(lists=[[cm("a", "1", v="cached")]], watches=[[Event("DELETED", final)]])
    informer = Informer(api, CONFIGMAPS, settings=FAST)
    deleted: list[dict[str, Any]] = []

    class Deletions(Rec):
        def on_delete(self, obj: dict[str, Any]) -> None:
            deleted.append(obj)

    informer.add_handler(Deletions())
    await run_until_exhausted(informer, api)
    assert [(o["metadata"]["resourceVersion"], o["data"]) for o in deleted] == [("3", {"v": "final"})]
    assert deleted[0]["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:00Z"
    assert "managedFields" not in deleted[0]["metadata"]  # the stored form, as every handler gets
    assert informer.cache.get("a", "ns") is None
