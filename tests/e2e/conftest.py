"""Fixtures of the e2e tier: one simulated cluster for all e2e tests (or an existing cluster).

With ``E2E_KUBECONFIG`` set, the tests run against that cluster (kind, for example); the
tests that need kwok stages, fake nodes or the stand-ins are skipped with a reason.
Otherwise ``simcluster.platform.launch`` starts etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok, the stand-ins and the fake OpenStack API on first use and stops them after
the last e2e test. Scenarios run the operator with ``sim.spawn(...)`` under ``sim.operator_env()``;
``sim_module`` gives module-scoped fixtures (one operator per scenario group) the same cluster. The
terminal summary prints the cluster's start-up time, lines the tests add through ``summary_line``
(time to Ready, upgrade time) and every operator scenario's setup + call time.
"""

from __future__ import annotations

import os
import pathlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from kubernetes_asyncio import client, config
from simcluster import SimHandle, launch

E2E_KUBECONFIG = os.environ.get("E2E_KUBECONFIG")
_HANDLE: SimHandle | None = None
_STARTUP: list[str] = []  # shown in the terminal summary (print() is captured without -s)
_SCENARIO_TIMES: list[str] = []  # setup + call time of each operator scenario (test_scenarios.py)

# Node layout: 3 plain nodes, 3 in pool "a", 2 in pool "b" (label sim.nova.openstack.c5c3.io/pool).
POOL_A = "a"
POOL_B = "b"


def _started(tmp_path_factory: pytest.TempPathFactory) -> SimHandle:
    """The simulated cluster, started on first use (and again if a test needs it after it stopped)."""
    global _HANDLE
    if _HANDLE is None:
        t0 = time.monotonic()
        _HANDLE = launch(tmp_path_factory.mktemp("simcluster"), nodes=3, pools={POOL_A: 3, POOL_B: 2})
        took, procs = time.monotonic() - t0, _HANDLE.cluster.startup_seconds
        _STARTUP.append(
            f"simulated cluster up in {took:.1f} s (etcd, apiserver, controller-manager, scheduler, kwok: "
            f"{procs:.1f} s; then nodes, dependency CRDs, stand-ins, fake OpenStack)"
        )
    return _HANDLE


def _stop() -> None:
    global _HANDLE
    if _HANDLE is not None:
        t0 = time.monotonic()
        _HANDLE.stop()
        parts = ", ".join(f"{name} {s:.1f} s" for name, s in _HANDLE.stop_seconds.items() if s >= 0.05)
        _STARTUP.append(f"simulated cluster stopped in {time.monotonic() - t0:.1f} s ({parts or 'at once'})")
        _HANDLE = None


@pytest.fixture
def sim(tmp_path_factory: pytest.TempPathFactory) -> SimHandle | None:
    """The simulated cluster, or None when the tests run against ``E2E_KUBECONFIG``.

    One cluster serves every e2e test; it stops right after the last e2e test (see
    ``pytest_runtest_teardown``), so it is not alive while the integration tier runs its own
    control plane.
    """
    return None if E2E_KUBECONFIG else _started(tmp_path_factory)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    result = yield  # the test's own fixtures (namespaces, clients) are torn down first
    here = pathlib.Path(__file__).parent
    if nextitem is None or here not in pathlib.Path(nextitem.path).parents:
        _stop()
    return result


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """test_leaks.py right after test_scenarios.py: its leak test deletes the Nova that the upgrade
    scenario shares with it (``release``), so it goes second. Either runs correctly alone or in any
    order (a fresh Nova then); this order saves an install and an upgrade."""
    here = pathlib.Path(__file__).parent
    leaks = [i for i in items if pathlib.Path(i.path) == here / "test_leaks.py"]
    rest = [i for i in items if pathlib.Path(i.path) != here / "test_leaks.py"]
    scenarios = [n for n, i in enumerate(rest) if pathlib.Path(i.path) == here / "test_scenarios.py"]
    if leaks and scenarios:
        items[:] = [*rest[: scenarios[-1] + 1], *leaks, *rest[scenarios[-1] + 1 :]]


def pytest_sessionfinish(session: pytest.Session) -> None:
    _stop()


@pytest.fixture(scope="module")
def sim_module(tmp_path_factory: pytest.TempPathFactory) -> SimHandle:
    """The simulated cluster for module-scoped fixtures (one operator per scenario group); skips on
    an external cluster, since the operator scenarios need the stand-ins and the fake OpenStack API."""
    if E2E_KUBECONFIG:
        pytest.skip("needs the simulated cluster (stand-ins, fake OpenStack); E2E_KUBECONFIG is set")
    return _started(tmp_path_factory)


@pytest.fixture
def summary_line() -> Callable[[str], None]:
    """Add a line to the e2e part of the terminal summary (e.g. a measured time to Ready)."""
    return _STARTUP.append


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    timed = ("test_scenarios.py", "test_install.py")
    if not any(f in report.nodeid for f in timed) or report.when == "teardown":
        return
    if report.when == "setup":
        _SETUP_SECONDS[report.nodeid] = report.duration
    elif report.when == "call":
        setup = _SETUP_SECONDS.pop(report.nodeid, 0.0)
        name = report.nodeid.split("::")[-1]
        _SCENARIO_TIMES.append(
            f"  {name}: {report.duration + setup:6.1f} s (setup {setup:.1f} s) {report.outcome}"
        )


_SETUP_SECONDS: dict[str, float] = {}


@pytest.fixture
def simcluster(sim: SimHandle | None) -> SimHandle:
    """The simulated cluster; skips the test on an external cluster."""
    if sim is None:
        pytest.skip("needs the simulated cluster (kwok stages, fake nodes, stand-ins); E2E_KUBECONFIG is set")
    return sim


@pytest.fixture
def kubeconfig(sim: SimHandle | None) -> pathlib.Path:
    return pathlib.Path(E2E_KUBECONFIG) if E2E_KUBECONFIG else sim.kubeconfig  # type: ignore[union-attr]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    uses_sim = {"sim", "sim_module"} & set(getattr(item, "fixturenames", ()))
    if report.failed and _HANDLE is not None and uses_sim:
        report.sections.append(("simulated cluster logs", _HANDLE.logs(6000)))
    if report.failed and _HANDLE is not None and "test_scenarios.py" in item.nodeid:
        for proc in _HANDLE.processes[-2:]:  # the operator replicas of the failing scenario
            report.sections.append((f"{proc.name} log (alive: {proc.alive})", proc.output(8000)))
    return report


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in _STARTUP:
        terminalreporter.write_line(line)
    if _SCENARIO_TIMES:
        terminalreporter.write_line("operator scenarios (setup + call):")
        for line in _SCENARIO_TIMES:
            terminalreporter.write_line(line)


@pytest.fixture
async def api(kubeconfig: pathlib.Path) -> AsyncIterator[client.ApiClient]:
    """An admin API client (context ``admin`` of the simulated cluster, current context otherwise)."""
    cfg = client.Configuration()
    context = None if E2E_KUBECONFIG else "admin"
    await config.load_kube_config(config_file=str(kubeconfig), context=context, client_configuration=cfg)
    async with client.ApiClient(configuration=cfg) as api:
        yield api


@pytest.fixture
async def ns(api: client.ApiClient) -> AsyncIterator[str]:
    """A fresh namespace per test, deleted afterwards (the namespace controller finishes it)."""
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(api)
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    await core.delete_namespace(name)
