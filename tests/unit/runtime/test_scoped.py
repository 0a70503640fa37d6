"""The scoped informer: Secrets of a namespace are listed only while a followed object lives there."""

from __future__ import annotations

import asyncio
from typing import Any

from nova_operator.kube.resources import NOVAS, SECRETS, ResourceRef
from nova_operator.runtime.echoes import OwnWrites
from nova_operator.runtime.handlers import enqueue_mapped
from nova_operator.runtime.informer import Informer
from nova_operator.runtime.request import Request
from nova_operator.runtime.scoped import ScopedInformer
from nova_operator.settings import WatchSettings

FAST = WatchSettings(backoff_initial=0.001, backoff_max=0.002, inactivity_timeout=5, resync_period=None)


def obj(name: str, ns: str, rv: str = "1") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "resourceVersion": rv}}


class _Quiet:
    async def __aenter__(self) -> _Quiet:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def __aiter__(self) -> _Quiet:
        return self

    async def __anext__(self) -> Any:
        await asyncio.Event().wait()


class PerNamespaceAPI:
    """Lists what ``store`` holds per (resource, namespace); watches say nothing."""

    def __init__(self, store: dict[tuple[str, str], list[dict[str, Any]]]) -> None:
        self.store = store
        self.lists: list[tuple[str, str | None]] = []

    async def list(self, ref: ResourceRef, namespace: str | None = None, **_: Any) -> dict[str, Any]:
        self.lists.append((str(ref), namespace))
        items = [
            dict(o)
            for (r, ns), objs in self.store.items()
            for o in objs
            if r == str(ref) and namespace in (None, ns)
        ]
        return {"metadata": {"resourceVersion": "5"}, "items": items}

    def watch(self, ref: ResourceRef, namespace: str | None = None, **_: Any) -> _Quiet:
        return _Quiet()


async def _until(check: Any, within: float = 2.0) -> None:
    async with asyncio.timeout(within):
        while not check():  # noqa: ASYNC110 - polling plain state that has no event to await
            await asyncio.sleep(0.001)


async def test_namespaces_follow_the_followed_objects_and_nothing_is_listed_cluster_wide() -> None:
    api = PerNamespaceAPI(
        {
            (str(NOVAS), "tenant-a"): [obj("nova", "tenant-a")],
            (str(SECRETS), "tenant-a"): [obj("db", "tenant-a")],
            (str(SECRETS), "tenant-b"): [obj("other", "tenant-b")],
        }
    )
    novas = Informer(api, NOVAS, settings=FAST)
    secrets = ScopedInformer(api, SECRETS, settings=FAST)
    secrets.follow(novas)
    assert secrets.has_synced  # never holds up the manager
    assert not secrets.cache.covers("tenant-a")
    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(novas.run()), tg.create_task(secrets.run())]
        await _until(lambda: secrets.cache.covers("tenant-a"))
        assert secrets.cache.get("db", "tenant-a") is not None
        assert not secrets.cache.covers("tenant-b")
        assert [ns for ref, ns in api.lists if ref == str(SECRETS)] == ["tenant-a"]

        # the last Nova of the namespace goes: the namespace is released and its Secrets dropped
        novas._apply("DELETED", obj("nova", "tenant-a", "6"))
        await _until(lambda: not secrets.cache.covers("tenant-a"))
        assert secrets.cache.list_keys() == []
        assert secrets.wanted == frozenset()
        for task in tasks:
            task.cancel()


def test_two_holders_keep_a_namespace_until_both_release_it() -> None:
    secrets = ScopedInformer(PerNamespaceAPI({}), SECRETS, settings=FAST)
    secrets.want("ns", "novas")
    secrets.want("ns", "novacomputes")
    secrets.release("ns", "novas")
    assert secrets.wanted == {"ns"}
    secrets.release("ns", "novacomputes")
    assert secrets.wanted == frozenset()


async def test_echo_entries_of_a_namespace_no_longer_watched_are_dropped() -> None:
    # Issue 26 item 13: the Secrets of a released namespace are dropped without delete events, so
    # their echo entries were never forgotten (800 entries after 200 Nova lifecycles).
    def secret(name: str, ns: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": ns, "resourceVersion": "3", "uid": f"{ns}-{name}"}}

    namespaces = [f"tenant-{i}" for i in range(20)]
    api = PerNamespaceAPI({(str(SECRETS), ns): [secret(f"s{j}", ns) for j in range(4)] for ns in namespaces})
    secrets = ScopedInformer(api, SECRETS, settings=FAST)
    echoes = OwnWrites()
    secrets.add_handler(enqueue_mapped(lambda key: None, lambda o: [], echoes=echoes))
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(secrets.run())
        for ns in namespaces:
            for j in range(4):
                echoes.wrote(secret(f"s{j}", ns), Request(ns, "nova"))
            secrets.want(ns, "novas")
        await _until(lambda: len(secrets.cache) == 80)
        assert len(echoes) == 80
        for ns in namespaces:
            secrets.release(ns, "novas")
        await _until(lambda: len(secrets.cache) == 0)
        assert len(echoes) == 0
        task.cancel()


async def test_a_followed_object_counts_only_while_the_predicate_admits_it() -> None:
    def nova(ns: str, rv: str, *, names: bool) -> dict[str, Any]:
        return {**obj("nova", ns, rv), "spec": {"policy": {"configMapRef": {"name": "p"}}} if names else {}}

    api = PerNamespaceAPI(
        {
            (str(NOVAS), "plain"): [nova("plain", "1", names=False)],
            (str(NOVAS), "named"): [nova("named", "1", names=True)],
        }
    )
    novas = Informer(api, NOVAS, settings=FAST)
    maps = ScopedInformer(api, SECRETS, settings=FAST)
    maps.follow(novas, when=lambda o: bool((o.get("spec") or {}).get("policy")))
    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(novas.run()), tg.create_task(maps.run())]
        await _until(lambda: maps.cache.covers("named"))
        assert maps.wanted == {"named"}  # the namespace whose Nova names nothing is not listed
        novas._apply("MODIFIED", nova("plain", "2", names=True))
        await _until(lambda: maps.cache.covers("plain"))
        novas._apply("MODIFIED", nova("named", "2", names=False))  # an edit that drops the reference
        await _until(lambda: not maps.cache.covers("named"))
        assert [ns for ref, ns in api.lists if ref == str(SECRETS)] == ["named", "plain"]
        novas._apply("DELETED", nova("plain", "3", names=True))
        await _until(lambda: maps.wanted == frozenset())
        for task in tasks:
            task.cancel()
