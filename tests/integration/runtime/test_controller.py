"""A test controller over ConfigMaps on the real API server: convergence, then a write-free resync."""

from __future__ import annotations

import asyncio
import hashlib
import time
import urllib.request
from collections.abc import Callable

import pytest
from simcluster import ControlPlane

from nova_operator import apply
from nova_operator.kube import Kube
from nova_operator.kube.resources import CONFIGMAPS
from nova_operator.kube.types import Object
from nova_operator.metrics import READ_VERBS, WRITE_VERBS, Metrics
from nova_operator.runtime import Controller, Informer, Request, Result
from nova_operator.runtime.manager import Manager
from nova_operator.settings import ServerSettings, Settings

pytestmark = pytest.mark.integration

PARENTS = 200


class DerivedConfigMaps:
    """For each ConfigMap labelled role=parent, keep a child ``<name>-child`` holding a digest of its input.

    Reads only from the caches; writes only through ``apply``.
    """

    def __init__(self, kube: Kube, parents: Informer, children: Informer) -> None:
        self.kube, self.parents, self.children = kube, parents, children
        self.passes = 0
        self.progress = asyncio.Event()

    async def reconcile(self, request: Request) -> Result:
        self.passes += 1
        self.progress.set()
        parent = self.parents.cache.get(request.name, request.namespace)
        if parent is None:
            return Result()
        digest = hashlib.sha256(parent["data"]["input"].encode()).hexdigest()[:16]
        desired = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": f"{request.name}-child",
                "namespace": request.namespace,
                "labels": {"role": "child"},
            },
            "data": {"digest": digest},
        }
        cached = self.children.cache.get(f"{request.name}-child", request.namespace)
        await apply.apply(self.kube, desired, owner=parent, cached=cached)
        return Result()


def derived_factory(holder: dict[str, DerivedConfigMaps]) -> Callable[[Manager], Controller]:
    def factory(manager: Manager) -> Controller:
        parents = manager.informer(CONFIGMAPS, label_selector="role=parent")
        children = manager.informer(CONFIGMAPS, label_selector="role=child")
        reconciler = DerivedConfigMaps(manager.kube, parents, children)
        holder["reconciler"] = reconciler
        ctl = manager.controller("derived", reconciler)
        ctl.watch_primary(parents)
        ctl.watch_owned(children, owner_group="", owner_kind="ConfigMap")
        return ctl

    return factory


def parent(i: int) -> Object:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"p{i:03d}", "labels": {"role": "parent"}},
        "data": {"input": f"input-{i}"},
    }


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def converged(children: Informer) -> bool:
    objs = children.cache.list()
    return len(objs) == PARENTS and all(o.get("data", {}).get("digest") for o in objs)


async def test_converges_200_configmaps_and_a_forced_resync_writes_nothing(
    control_plane: ControlPlane, kube: Kube, namespace: str, fast_settings: Callable[..., Settings]
) -> None:
    base = fast_settings()
    settings = Settings(
        watch=base.watch,
        leader_election=base.leader_election,
        servers=ServerSettings(metrics_bind_address="127.0.0.1:0", health_probe_bind_address="127.0.0.1:0"),
        shutdown_timeout=5,
    )
    sem = asyncio.Semaphore(20)

    async def create(i: int) -> None:
        async with sem:
            await kube.create(CONFIGMAPS, parent(i), namespace)

    await asyncio.gather(*(create(i) for i in range(PARENTS)))

    async with await Kube.connect(
        kubeconfig=str(control_plane.kubeconfig), context="admin", metrics=Metrics()
    ) as operator:
        manager = Manager(operator, settings)
        holder: dict[str, DerivedConfigMaps] = {}
        ctl = derived_factory(holder)(manager)
        manager.add_controller(ctl)
        rec = holder["reconciler"]
        children = manager.informer(CONFIGMAPS, label_selector="role=child")
        started = time.monotonic()
        run = asyncio.create_task(manager.run())
        try:
            async with asyncio.timeout(60):
                while not converged(children):
                    rec.progress.clear()
                    await rec.progress.wait()
                # A reconcile that read the cache before the last child arrived may still write.
                await ctl.queue.drain()
            took = time.monotonic() - started
            assert manager.health_server is not None
            assert manager.metrics_server is not None
            assert (await asyncio.to_thread(http_get, manager.health_server.port, "/readyz"))[0] == 200
            status, text = await asyncio.to_thread(http_get, manager.metrics_server.port, "/metrics")
            assert status == 200
            assert 'code="201",resource="configmaps",verb="apply"' in text  # SSA created the children

            reads = operator.metrics.api_request_count(READ_VERBS)
            writes = operator.metrics.api_request_count(WRITE_VERBS)
            passes = rec.passes
            assert ctl.resync() == PARENTS
            async with asyncio.timeout(30):
                while rec.passes < passes + PARENTS:
                    rec.progress.clear()
                    await rec.progress.wait()
                await ctl.queue.drain()
            assert operator.metrics.api_request_count(WRITE_VERBS) - writes == 0
            assert operator.metrics.api_request_count(READ_VERBS) - reads == 0
        finally:
            manager.stop()
            await asyncio.wait_for(run, 10)

    server_children = (await kube.list(CONFIGMAPS, namespace, label_selector="role=child"))["items"]
    assert len(server_children) == PARENTS
    sample = next(c for c in server_children if c["metadata"]["name"] == "p007-child")
    assert sample["data"]["digest"] == hashlib.sha256(b"input-7").hexdigest()[:16]
    owner = sample["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("ConfigMap", "p007", True)
    assert {m["manager"] for m in sample["metadata"]["managedFields"]} == {apply.FIELD_MANAGER}
    print(f"converged {PARENTS} parents in {took:.2f} s with {writes} writes and {reads} reads")
