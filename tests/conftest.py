"""Fixtures shared by every tier.

The control plane is started lazily, once per session, only when a test asks for it.
When a test that used it fails, the tails of the etcd and kube-apiserver logs are
attached to the test's report.
"""

from __future__ import annotations

import asyncio
import pathlib
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from kubernetes_asyncio import client, config
from simcluster import ControlPlane, find_binaries

from nova_operator import log

_PLANE: ControlPlane | None = None
# Seconds each tier (tests/<tier>/) took, from a test's setup to the end of its teardown, summed:
# CI's log then says how long the real tier ran without a separate run (issue 23's budget for it).
_TIER_SECONDS: dict[str, float] = {}
_STARTED: dict[str, float] = {}


def pytest_configure(config: pytest.Config) -> None:
    # The production logging setup. structlog's default would render rich tracebacks with every
    # frame's locals (whole informer caches) on each logged error, blocking the event loop for
    # seconds and printing values no log line may carry.
    log.configure(fmt="console", level="info")


def _tier(nodeid: str) -> str:
    parts = nodeid.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else "other"


TIER_ORDER = ("unit", "tools", "realnode", "realnova", "integration", "e2e")
"""The order ``make test`` runs the tiers in: the tests without a cluster first (a mistake shows in
minutes), then the real nodes' and the real-Nova tiers, then the bare control plane's and the
simulated cluster's. The real tier is mostly waiting on nova, so CI builds what only the last two
use (kwok, prometheus) in its idle time (``.ci/run``); a tier's own order within it stays."""


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {tier: i for i, tier in enumerate(TIER_ORDER)}
    items.sort(key=lambda item: rank.get(_tier(item.nodeid), len(rank)))  # stable: within a tier as is


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    _STARTED[nodeid] = time.monotonic()


def pytest_runtest_logfinish(nodeid: str, location: tuple[str, int | None, str]) -> None:
    started = _STARTED.pop(nodeid, None)
    if started is not None:
        tier = _tier(nodeid)
        _TIER_SECONDS[tier] = _TIER_SECONDS.get(tier, 0.0) + time.monotonic() - started


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _TIER_SECONDS:
        return
    terminalreporter.write_sep("=", "wall time per tier (setup to teardown, fixtures included)")
    for tier, seconds in sorted(_TIER_SECONDS.items()):
        terminalreporter.write_line(f"{tier}: {seconds:.1f} s ({seconds / 60:.1f} min)")


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    global _PLANE
    plane = ControlPlane(tmp_path_factory.mktemp("envtest"), find_binaries()).start()
    _PLANE = plane
    try:
        yield plane
    finally:
        plane.stop()
        _PLANE = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed and _PLANE is not None and "control_plane" in getattr(item, "fixturenames", ()):
        report.sections.append(("control plane logs", _PLANE.logs()))
    return report


async def _api_client(plane: ControlPlane, context: str) -> client.ApiClient:
    cfg = client.Configuration()
    await config.load_kube_config(
        config_file=str(plane.kubeconfig), context=context, client_configuration=cfg
    )
    return client.ApiClient(configuration=cfg)


@pytest.fixture
async def admin_api(control_plane: ControlPlane) -> AsyncIterator[client.ApiClient]:
    """An API client with cluster-admin rights (it plays the missing controllers)."""
    api = await _api_client(control_plane, "admin")
    async with api:
        yield api


@pytest.fixture
async def operator_api(control_plane: ControlPlane) -> AsyncIterator[client.ApiClient]:
    """An API client authenticated as the operator's ServiceAccount (RBAC applies)."""
    api = await _api_client(control_plane, "operator")
    async with api:
        yield api


@pytest.fixture
async def namespace(admin_api: client.ApiClient) -> AsyncIterator[str]:
    """A fresh namespace per test. Never waited on: a bare control plane has no namespace controller."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    core = client.CoreV1Api(admin_api)
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    await core.delete_namespace(name)


@pytest.fixture(autouse=True)
async def _no_leaked_tasks() -> AsyncIterator[None]:
    """Fail a test that leaves asyncio tasks running behind it."""
    before = set(asyncio.all_tasks())
    yield
    await asyncio.sleep(0)
    leaked = [t for t in asyncio.all_tasks() - before if not t.done() and t is not asyncio.current_task()]
    if leaked:
        for t in leaked:
            t.cancel()
        pytest.fail(f"leaked asyncio tasks: {[t.get_name() + ' ' + repr(t.get_coro()) for t in leaked]}")


@pytest.fixture
def repo_root() -> pathlib.Path:
    return pathlib.Path(__file__).resolve().parents[1]
