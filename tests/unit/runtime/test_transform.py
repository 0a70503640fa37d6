"""The cache transform: what an informer keeps of each object, declared by its users (SetTransform)."""

from __future__ import annotations

import json
import zlib
from typing import Any

import pytest
import structlog

from nova_operator.kube.resources import CONFIGMAPS
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.informer import Informer
from nova_operator.runtime.transform import ALL, LAST_APPLIED, Transform, prune, union
from tests.unit.runtime.scripted import FAST, Event, Rec, ScriptedAPI, run_until_exhausted


def cluster(rv: str = "1", **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "rabbitmq.com/v1beta1",
        "kind": "RabbitmqCluster",
        "metadata": {
            "name": "bus",
            "namespace": "ns",
            "resourceVersion": rv,
            "labels": {"team": "a"},
            "ownerReferences": [{"uid": "u1", "controller": True}],
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
            "annotations": {LAST_APPLIED: '{"spec": {}}', "keep": "me"},
        },
        "spec": {"replicas": 3, "override": {"statefulSet": {"spec": {"template": {}}}}},
        "status": {
            "defaultUser": {"secretReference": {"name": "bus-default-user", "keys": {"a": "b"}}},
            "conditions": [{"type": "Ready", "status": "True", "message": "m", "reason": "r"}],
            **status,
        },
    }


def test_without_a_declaration_only_the_bookkeeping_goes() -> None:
    got = Transform()(cluster())
    meta = got["metadata"]
    assert "managedFields" not in meta
    assert meta["annotations"] == {"keep": "me"}
    expected = cluster()
    del expected["metadata"]["managedFields"]
    del expected["metadata"]["annotations"][LAST_APPLIED]
    assert got == expected


def test_a_declared_tree_keeps_identity_metadata_and_the_named_fields_only() -> None:
    t = Transform()
    t.keep({"status": {"defaultUser": {"secretReference": {"name": ALL}}}})
    got = t(cluster())
    assert got == {
        "apiVersion": "rabbitmq.com/v1beta1",
        "kind": "RabbitmqCluster",
        "metadata": {
            "name": "bus",
            "namespace": "ns",
            "resourceVersion": "1",
            "labels": {"team": "a"},
            "ownerReferences": [{"uid": "u1", "controller": True}],
            "annotations": {"keep": "me"},
        },
        "status": {"defaultUser": {"secretReference": {"name": "bus-default-user"}}},
    }


def test_users_of_a_shared_informer_get_the_union_and_one_that_declares_nothing_keeps_everything() -> None:
    t = Transform()
    t.keep({"status": {"conditions": ALL}})
    t.keep({"status": {"defaultUser": ALL}, "spec": {"replicas": ALL}})
    got = t(cluster())
    assert set(got) == {"apiVersion", "kind", "metadata", "spec", "status"}
    assert got["spec"] == {"replicas": 3}
    assert set(got["status"]) == {"conditions", "defaultUser"}
    t.keep(ALL)  # a third user reads everything: nobody's fields may go
    assert t(cluster())["spec"]["override"] == {"statefulSet": {"spec": {"template": {}}}}
    t.keep({"status": {"conditions": ALL}})  # and it stays whole whatever comes after
    assert t.kept is ALL


def test_a_tree_applies_to_every_element_of_a_list_and_unexpected_shapes_are_kept() -> None:
    tree = {"status": {"conditions": {"type": ALL, "status": ALL}}}
    obj = cluster()
    assert prune(obj, tree)["status"]["conditions"] == [{"type": "Ready", "status": "True"}]
    odd = cluster()
    odd["status"]["conditions"] = "not a list of maps"
    assert prune(odd, tree)["status"]["conditions"] == "not a list of maps"
    odd["status"] = ["not", "a", "map"]
    assert prune(odd, tree)["status"] == ["not", "a", "map"]
    assert union({"a": {"b": ALL}}, {"a": {"c": ALL}}) == {"a": {"b": ALL, "c": ALL}}
    assert union({"a": {"b": ALL}}, {"a": ALL}) == {"a": ALL}


def test_the_cache_stores_compressed_compact_json_and_every_read_is_a_new_object() -> None:
    cache = Cache("rabbitmqclusters")
    obj = Transform()(cluster())
    cache.upsert(obj)
    obj["status"]["defaultUser"] = {}  # the caller's dict is not the stored object
    first, second = cache.get("bus", "ns"), cache.get("bus", "ns")
    assert first == second
    assert first is not second
    assert first is not None
    assert first["status"]["defaultUser"]["secretReference"]["name"] == "bus-default-user"
    first["metadata"]["labels"]["team"] = "changed"
    assert cache.by_label("team", "a")[0]["metadata"]["labels"] == {"team": "a"}
    assert cache.resource_version(next(iter(cache.list_keys()))) == "1"
    entry = cache._items[next(iter(cache.list_keys()))]
    stored = zlib.decompress(entry.data).decode()  # compact JSON, deflated
    assert stored == json.dumps(cache.get("bus", "ns"), separators=(",", ":"))
    assert len(entry.data) < len(stored)


async def test_the_informer_stores_and_delivers_what_its_users_declared() -> None:
    api = ScriptedAPI(lists=[[cluster("1")]], watches=[[Event("MODIFIED", cluster("2", extra="x"))]])
    informer = Informer(api, CONFIGMAPS, settings=FAST)
    informer.keep({"status": {"defaultUser": ALL}})
    seen: list[dict[str, Any]] = []

    class Keep(Rec):
        def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
            seen.extend([old, new])

    informer.add_handler(Keep())
    await run_until_exhausted(informer, api)
    stored = informer.cache.get("bus", "ns")
    assert stored is not None
    assert set(stored) == {"apiVersion", "kind", "metadata", "status"}
    assert set(stored["status"]) == {"defaultUser"}
    assert "managedFields" not in stored["metadata"]
    assert [set(o["status"]) for o in seen] == [
        {"defaultUser"},
        {"defaultUser"},
    ]  # handlers see the kept form
    assert [o["metadata"]["resourceVersion"] for o in seen] == ["1", "2"]


async def test_a_failing_transform_is_logged_with_the_object_and_the_object_is_stored_whole() -> None:
    api = ScriptedAPI(
        lists=[[cluster("1")]],
        watches=[
            [Event("ADDED", {**cluster("2"), "metadata": {**cluster("2")["metadata"], "name": "other"}})]
        ],
    )
    informer = Informer(api, CONFIGMAPS, settings=FAST)

    def broken(obj: dict[str, Any]) -> dict[str, Any]:
        raise ValueError("bug in a transform")

    informer.transform = broken  # type: ignore[assignment]
    rec = Rec()
    informer.add_handler(rec)
    with structlog.testing.capture_logs() as logs:
        await run_until_exhausted(informer, api)
    assert rec.events == [("add", "bus"), ("add", "other")]  # nothing lost, the informer goes on
    whole = informer.cache.get("bus", "ns")
    assert whole is not None
    assert whole["spec"]["override"]
    assert "managedFields" not in whole["metadata"]
    failures = [e for e in logs if e["event"] == "cache transform failed, object stored whole"]
    assert [(e["resource"], e["namespace"], e["name"]) for e in failures] == [
        ("configmaps", "ns", "bus"),
        ("configmaps", "ns", "other"),
    ]
    assert all(e["log_level"] == "error" for e in failures)


async def test_what_is_kept_cannot_grow_once_the_informer_runs() -> None:
    api = ScriptedAPI(lists=[[cluster("1")]], watches=[])
    informer = Informer(api, CONFIGMAPS, settings=FAST)
    informer.keep({"status": {"conditions": ALL}})
    await run_until_exhausted(informer, api)
    informer.keep({"status": {"conditions": ALL}})  # nothing new: accepted (a second lookup of the informer)
    with pytest.raises(RuntimeError, match="before it runs"):
        informer.keep({"spec": ALL})
    with pytest.raises(RuntimeError, match="before it runs"):
        informer.keep(ALL)
