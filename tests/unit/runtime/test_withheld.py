"""Issue 26 item 2: an informer keeps the content of the objects its users read, a reference of the rest.

A conditional declaration (``keep(fields, when=...)``) keeps ``fields`` of the objects its predicate
admits; the others are stored withheld (name, version, owners only), the cache says so
(``answers``), a reader hands back what it read (``fill``), ``reconsider`` narrows again, and a
LIST is stored-formed item by item as it is decoded (``each``), page by page.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from nova_operator.kube.resources import SECRETS, ResourceRef
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.informer import Informer
from nova_operator.runtime.request import Request
from nova_operator.runtime.transform import ALL, REFERENCE, Transform
from tests.unit.runtime.scripted import FAST, Event, Rec, ScriptedAPI, run_until_exhausted

BIG = "A" * 4096


def secret(name: str, rv: str = "1", ns: str = "ns", value: str = BIG, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"uid-{name}",
            "resourceVersion": rv,
            "labels": {"owner": "helm"},
            "annotations": {"big": BIG},
            "managedFields": [{"manager": "helm"}],
            "ownerReferences": [{"kind": "Nova", "name": "x", "uid": "u"}],
            **meta,
        },
        "data": {"value": value},
    }


def named(*names: str) -> Any:
    wanted = set(names)
    return lambda obj: obj["metadata"]["name"] in wanted


def test_a_conditional_declaration_keeps_admitted_objects_and_a_reference_of_the_rest() -> None:
    t = Transform()
    t.keep(ALL, when=named("db"))
    kept, whole = t.apply(secret("db"))
    assert whole
    assert kept["data"] == {"value": BIG}
    assert "managedFields" not in kept["metadata"]
    ref, whole = t.apply(secret("helm-release"))
    assert not whole
    assert "data" not in ref
    assert set(ref["metadata"]) == {"name", "namespace", "uid", "resourceVersion", "ownerReferences"}
    assert set(ref["metadata"]) < set(REFERENCE["metadata"] or ())
    assert ref["metadata"]["ownerReferences"] == [{"kind": "Nova", "name": "x", "uid": "u"}]
    assert ref["kind"] == "Secret"
    assert ref["metadata"]["resourceVersion"] == "1"


def test_an_unconditional_declaration_of_another_user_keeps_every_object_whole() -> None:
    t = Transform()
    t.keep(ALL, when=named("db"))
    t.keep(ALL)  # a user that reads every Secret whole: nothing is withheld from it
    assert t.apply(secret("helm-release")) == (t(secret("helm-release")), True)
    assert "data" in t(secret("helm-release"))


def test_two_predicates_are_a_union_and_a_failing_predicate_keeps_the_object() -> None:
    t = Transform()
    t.keep(ALL, when=named("a"))
    t.keep(ALL, when=named("b"))
    assert [t.apply(secret(n))[1] for n in "abc"] == [True, True, False]

    def broken(obj: dict[str, Any]) -> bool:
        raise RuntimeError("bug")

    t = Transform()
    t.keep(ALL, when=broken)
    kept, whole = t.apply(secret("c"))
    assert whole
    assert "data" in kept


def test_the_cache_answers_only_for_whole_entries_and_fill_restores_the_same_version() -> None:
    cache = Cache()
    cache.cover({"ns"})
    t = Transform()
    t.keep(ALL, when=named("db"))
    kept, whole = t.apply(secret("other", rv="7"))
    assert not whole
    cache.upsert(kept, whole=whole)
    assert "other" in [k.name for k in cache.list_keys()]
    assert not cache.answers("other", "ns")  # present, but a reference only
    assert cache.answers("missing", "ns")  # a miss in a listed namespace is an answer: absent
    assert not cache.answers("x", "elsewhere")  # a namespace not listed never answers
    assert not cache.fill(secret("other", rv="8"))  # another version: its watch event will bring it
    assert cache.withheld(Request("ns", "other"))
    fetched = secret("other", rv="7")
    assert cache.fill(fetched)
    assert "managedFields" in fetched["metadata"]  # the reader's object is not changed
    assert cache.answers("other", "ns")
    got = cache.get("other", "ns")
    assert got is not None
    assert got["data"] == {"value": BIG}
    assert "managedFields" not in got["metadata"]
    assert not cache.fill(secret("other", rv="7"))  # nothing withheld any more


async def test_the_informer_withholds_unread_objects_on_list_and_watch_and_still_delivers_their_events() -> (
    None
):
    reads = {"db"}
    api = ScriptedAPI(
        lists=[[secret("db"), secret("helm-1"), secret("helm-2")]],
        watches=[
            [Event("MODIFIED", secret("helm-1", rv="2", value="B")), Event("ADDED", secret("db2", rv="3"))]
        ],
    )
    informer = Informer(api, SECRETS, settings=FAST)
    informer.keep(ALL, when=lambda o: o["metadata"]["name"] in reads)
    rec = Rec()
    informer.add_handler(rec)
    reads.add("db2")
    await run_until_exhausted(informer, api)
    cache = informer.cache
    assert rec.events == [
        ("add", "db"),
        ("add", "helm-1"),
        ("add", "helm-2"),
        ("update", "helm-1"),
        ("add", "db2"),
    ]
    assert [cache.withheld(k) for k in cache.list_keys()] == [
        False,
        False,
        True,
        True,
    ]  # db, db2, helm-1, helm-2
    assert cache.get("db2", "ns")["data"] == {"value": BIG}  # type: ignore[index]
    assert "data" not in cache.get("helm-1", "ns")  # type: ignore[operator]
    assert cache.resource_version(Request("ns", "helm-1")) == "2"


async def test_reconsider_narrows_an_entry_no_predicate_admits_any_more_and_a_relist_restores_one() -> None:
    reads = {"db"}
    api = ScriptedAPI(lists=[[secret("db"), secret("other")]], watches=[])
    informer = Informer(api, SECRETS, settings=FAST)
    informer.keep(ALL, when=lambda o: o["metadata"]["name"] in reads)
    rec = Rec()
    informer.add_handler(rec)
    await run_until_exhausted(informer, api)
    reads.clear()
    informer.reconsider([Request("ns", "db"), Request("ns", "absent")])
    assert informer.cache.withheld(Request("ns", "db"))
    assert "data" not in informer.cache.get("db", "ns")  # type: ignore[operator]
    assert rec.events == [("add", "db"), ("add", "other")]  # the object did not change: no event
    # a relist of unchanged objects now admitted stores them whole, again without an event
    reads.add("other")
    changes = informer.cache.replace(
        [informer.transform.apply(secret("db"))[0], informer.transform.apply(secret("other"))[0]],
        "ns",
        withheld={Request("ns", "db")},
    )
    assert changes == []
    assert not informer.cache.withheld(Request("ns", "other"))
    assert informer.cache.get("other", "ns")["data"] == {"value": BIG}  # type: ignore[index]


class StreamingAPI(ScriptedAPI):
    """Calls ``each`` on every item of a page, in order, as a streaming lister does; records when."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        super().__init__(lists=[items], watches=[])
        self.log: list[str] = []

    async def list(self, ref: ResourceRef, namespace: str | None = None, **kw: Any) -> dict[str, Any]:
        each = kw.pop("each")
        page = await super().list(ref, namespace, **kw)
        self.log.append(f"page {kw.get('continue_token') or 0}")
        formed = []
        for item in page["items"]:
            formed.append(each(item))
            self.log.append(f"{item['metadata']['name']} has data: {'data' in formed[-1]}")
        return {**page, "items": formed}


async def test_a_list_is_read_in_pages_and_each_item_is_formed_as_it_is_decoded() -> None:
    api = StreamingAPI([secret(f"s{i}") for i in range(5)])
    informer = Informer(api, SECRETS, settings=dataclasses.replace(FAST, list_page_size=2))
    informer.keep(ALL, when=named("s3"))
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(api.exhausted.wait(), 5)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert api.log == [
        "page 0",
        "s0 has data: False",
        "s1 has data: False",
        "page 2",
        "s2 has data: False",
        "s3 has data: True",
        "page 4",
        "s4 has data: False",
    ]
    assert [k.name for k in informer.cache.list_keys() if not informer.cache.withheld(k)] == ["s3"]
    assert informer.cache.get("s0", "ns")["kind"] == "Secret"  # type: ignore[index]
