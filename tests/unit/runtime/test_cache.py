"""The cache: copies on read, managedFields stripped, indexes, namespace-scoped replace."""

from __future__ import annotations

from typing import Any

from nova_operator.runtime.cache import Cache
from nova_operator.runtime.request import Request


def cm(name: str, ns: str = "a", rv: str = "1", **labels: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": ns,
            "resourceVersion": rv,
            "labels": labels,
            "managedFields": [{"manager": "x"}],
            "ownerReferences": [{"uid": "owner-1", "name": "p", "kind": "P", "apiVersion": "v1"}],
        },
        "data": {"k": "v"},
    }


def test_reads_return_copies_and_managed_fields_are_gone() -> None:
    cache = Cache()
    cache.upsert(cm("x"))
    got = cache.get("x", "a")
    assert got is not None
    assert "managedFields" not in got["metadata"]
    got["data"]["k"] = "changed"
    assert cache.get("x", "a")["data"]["k"] == "v"  # type: ignore[index]
    listed = cache.list()
    listed[0]["data"]["k"] = "changed"
    assert cache.list()[0]["data"]["k"] == "v"


def test_label_and_owner_indexes_follow_updates_and_removal() -> None:
    cache = Cache()
    cache.upsert(cm("x", role="parent"))
    cache.upsert(cm("y", role="child"))
    assert [o["metadata"]["name"] for o in cache.by_label("role", "parent")] == ["x"]
    assert [o["metadata"]["name"] for o in cache.list(labels={"role": "child"})] == ["y"]
    assert len(cache.by_owner("owner-1")) == 2
    cache.upsert(cm("x", rv="2", role="child"))
    assert cache.by_label("role", "parent") == []
    assert len(cache.by_label("role", "child")) == 2
    cache.remove(Request("a", "x"))
    assert [o["metadata"]["name"] for o in cache.by_owner("owner-1")] == ["y"]


def test_custom_index_covers_existing_and_new_objects() -> None:
    cache = Cache()
    cache.upsert(cm("x"))
    cache.add_index("data-k", lambda o: [o.get("data", {}).get("k", "")])
    cache.upsert(cm("y"))
    assert cache.keys_by_index("data-k", "v") == [Request("a", "x"), Request("a", "y")]


def test_replace_reports_the_difference_within_its_namespace_only() -> None:
    cache = Cache()
    for obj in (cm("keep", "a"), cm("change", "a"), cm("gone", "a"), cm("other", "b")):
        cache.upsert(obj)
    changes = cache.replace([cm("keep", "a"), cm("change", "a", rv="2"), cm("new", "a")], namespace="a")
    summary = sorted(
        (
            old["metadata"]["name"] if old else "-",
            new["metadata"]["name"] if new else "-",
        )
        for old, new in changes
    )
    assert summary == [("-", "new"), ("change", "change"), ("gone", "-")]
    assert cache.list_keys() == [
        Request("a", "change"),
        Request("a", "keep"),
        Request("a", "new"),
        Request("b", "other"),
    ]
    assert not cache.has_synced
    cache.mark_synced()
    assert cache.has_synced
