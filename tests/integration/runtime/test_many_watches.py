"""Watches never starve requests: 7 kinds x 20 watched namespaces (140 watches) on the real API server.

Issue 18, item 1: with watches on the request pool (100 HTTP/1.1 connections) 114 watches filled
it, the Lease GET timed out and the replica never led. Watches now have a pool of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio import client
from simcluster import ControlPlane

from nova_operator.kube import Kube
from nova_operator.kube.resources import (
    CONFIGMAPS,
    DAEMONSETS,
    DEPLOYMENTS,
    JOBS,
    PODS,
    SECRETS,
    SERVICES,
)
from nova_operator.metrics import Metrics
from nova_operator.runtime.informer import Informer
from nova_operator.runtime.leaderelection import LeaderElector
from nova_operator.settings import LeaderElectionSettings, WatchSettings

pytestmark = pytest.mark.integration

KINDS = (CONFIGMAPS, SECRETS, SERVICES, PODS, DEPLOYMENTS, DAEMONSETS, JOBS)
NAMESPACES = 20


@pytest.fixture
async def namespaces(admin_api: client.ApiClient) -> AsyncIterator[list[str]]:
    core = client.CoreV1Api(admin_api)
    names = [f"w-{uuid.uuid4().hex[:8]}" for _ in range(NAMESPACES)]
    for name in names:
        await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield names
    for name in names:
        with contextlib.suppress(client.ApiException):
            await core.delete_namespace(name)


async def test_140_watches_leave_the_request_pool_to_requests(
    control_plane: ControlPlane, namespaces: list[str]
) -> None:
    metrics = Metrics()
    settings = WatchSettings(resync_period=None, sync_timeout=30)
    async with await Kube.connect(
        kubeconfig=str(control_plane.kubeconfig), context="admin", metrics=metrics
    ) as kube:
        informers = [
            Informer(kube, ref, namespaces=namespaces, settings=settings, metrics=metrics) for ref in KINDS
        ]
        tasks = [asyncio.create_task(inf.run()) for inf in informers]
        try:
            t0 = time.monotonic()
            async with asyncio.timeout(30):
                await asyncio.gather(*(inf.wait_for_sync() for inf in informers))
            synced = time.monotonic() - t0
            # Every reflector has listed and is opening or holding its watch: 140 of them.
            async with asyncio.timeout(10):
                while metrics.api_request_count(frozenset({"watch"})) < len(KINDS) * NAMESPACES:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)  # let the watches settle on their connections

            # The Lease: acquired at once although 140 watches are open.
            lease_ns = namespaces[0]
            elector = LeaderElector(
                kube, LeaderElectionSettings(namespace=lease_ns, identity="many-watches"), metrics=metrics
            )
            t1 = time.monotonic()
            async with asyncio.timeout(5):
                assert await elector.try_acquire_or_renew()
            leader_after = time.monotonic() - t1

            # And a burst of 200 ordinary requests is served within the request timeout.
            t2 = time.monotonic()
            async with asyncio.timeout(15):
                await asyncio.gather(*(kube.list(CONFIGMAPS, ns) for ns in namespaces for _ in range(10)))
            burst = time.monotonic() - t2

            watch_pool = kube._watch_client().rest_client.pool_manager.connector
            request_pool = kube._api.rest_client.pool_manager.connector
            open_watches = len(watch_pool._acquired)
            assert open_watches == len(KINDS) * NAMESPACES, open_watches
            assert len(request_pool._acquired) == 0  # no watch holds a request connection
            print(
                f"\n{len(KINDS) * NAMESPACES} watches: synced in {synced:.2f} s, "
                f"lease in {leader_after:.3f} s, 200 LISTs in {burst:.2f} s, {open_watches} watch connections"
            )
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
