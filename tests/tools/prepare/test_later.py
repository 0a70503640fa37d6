"""What CI builds beside ``make test`` (``prepare ci-later``: kwok, prometheus) and how the tests that
need it find it: the tiers that use it run last, a lookup that finds what it wants does not wait
for a build of something else, and one that lacks kwok asks the build script (which waits)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from prepare.plans import ci_later_plan, ci_plan
from simcluster.platform import controlplane
from simcluster.platform.controlplane import ControlPlaneError, find_binaries

from tests.conftest import TIER_ORDER, pytest_collection_modifyitems

REPO = Path(__file__).resolve().parents[3]
CORE = ("kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler")


def test_the_later_plan_builds_what_the_first_plan_leaves_out() -> None:
    first = {s.key: s for lane in ci_plan() for s in lane}
    later = {s.key: s for lane in ci_later_plan() for s in lane}
    assert sorted(later) == ["kwok", "prometheus"]
    assert not set(first) & set(later)
    assert later["kwok"].argv == ("bash", "tools/envtest/build.sh")
    assert "ENVTEST_NO_KWOK" not in later["kwok"].env  # it adds kwok to the control plane's directory
    assert later["prometheus"].argv == ("bash", "tools/prometheus/build.sh")


def test_the_tiers_that_use_kwok_or_prometheus_run_after_the_real_ones_each_in_its_own_order() -> None:
    ids = [
        "tests/e2e/test_scenarios.py::a",
        "tests/integration/monitoring/test_alert_rules.py::b",
        "tests/realnova/test_make_run.py::c",
        "tests/unit/test_x.py::d",
        "tests/e2e/test_leaks.py::e",
        "tests/realnova/test_backends.py::f",
        "tests/realnode/test_node.py::g",
        "tests/tools/test_y.py::h",
        "tests/unit/test_a.py::i",
    ]
    items = [cast(Any, SimpleNamespace(nodeid=i)) for i in ids]
    pytest_collection_modifyitems(items)
    assert [i.nodeid[-1] for i in items] == ["d", "i", "h", "g", "c", "f", "b", "a", "e"]
    assert TIER_ORDER.index("realnova") < TIER_ORDER.index("integration") < TIER_ORDER.index("e2e")


def _bindir(path: Path, names: tuple[str, ...]) -> Path:
    path.mkdir(parents=True)
    for name in names:
        (path / name).write_text("#!/bin/sh\n")
        (path / name).chmod(0o755)
    return path


def test_a_control_plane_without_kwok_is_found_as_it_is_and_kwok_is_asked_of_the_build_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    core = _bindir(tmp_path / "core", CORE)
    built = _bindir(tmp_path / "built", (*CORE, "kwok"))
    # a stand-in for tools/envtest/build.sh that records how it was called
    script = tmp_path / "repo" / "tools" / "envtest" / "build.sh"
    script.parent.mkdir(parents=True)
    script.write_text(f'echo "NO_KWOK=${{ENVTEST_NO_KWOK:-}}" > {tmp_path}/called\necho {built}\n')
    monkeypatch.setattr(controlplane, "REPO", tmp_path / "repo")
    monkeypatch.setenv("ENVTEST_BIN", str(core))
    monkeypatch.setenv("ENVTEST_NO_KWOK", "1")  # even so: kwok is what is asked for

    assert find_binaries() == core
    assert not (tmp_path / "called").exists()
    assert find_binaries(kwok=True) == built
    assert (tmp_path / "called").read_text() == "NO_KWOK=\n"
    with pytest.raises(ControlPlaneError, match="ENVTEST_BIN is without kwok"):
        find_binaries(kwok=True, build=False)
    monkeypatch.setenv("ENVTEST_BIN", str(built))
    assert find_binaries(kwok=True) == built


GO_ENV = {
    "GOTOOLCHAIN": "local",
    "GOFLAGS": "-modcacherw",
    # the module cache the build scripts use (tools/lib/gocache.sh): the pinned versions are in it
    "GOMODCACHE": os.environ.get("GOMODCACHE")
    or str(Path(os.environ.get("ENVTEST_CACHE", "/var/cache/nova-envtest")) / "gomod"),
    "PATH": f"/usr/local/go/bin:{os.environ['PATH']}",
}


def _go(module_dir: str, *args: str) -> str:
    env = {**os.environ, **GO_ENV}
    done = subprocess.run(
        ["go", *args], cwd=REPO / module_dir, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def _envtest_out(cache: Path) -> Path:
    """The directory tools/envtest/build.sh names in ``cache`` (the versions its go.mod files pin)."""
    kv = _go("tools/envtest", "list", "-m", "-f", "{{.Version}}", "k8s.io/kubernetes")
    kwok = _go("tools/kwok", "list", "-m", "-f", "{{.Version}}", "sigs.k8s.io/kwok")
    return cache / f"bin-{kv}-kwok{kwok}-{_go('tools/envtest', 'env', 'GOVERSION')}"


def test_the_build_script_prints_a_complete_directory_at_once_even_while_kwok_is_being_built(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    out = _bindir(_envtest_out(cache), CORE)
    env = {**os.environ, **GO_ENV, "ENVTEST_CACHE": str(cache)}
    script = str(REPO / "tools" / "envtest" / "build.sh")
    # another caller holds the script's lock (as CI's build of kwok beside the tests does)
    lock = str(cache / ".build.lock")
    holder = subprocess.Popen(["flock", lock, "sleep", "120"])
    try:
        deadline = time.monotonic() + 30
        while subprocess.run(["flock", "-n", lock, "true"], check=False).returncode == 0:
            assert time.monotonic() < deadline, "the holder never took the lock"
            time.sleep(0.1)
        done = subprocess.run(
            ["bash", script],
            env={**env, "ENVTEST_NO_KWOK": "1"},
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        assert done.stdout.strip() == str(out)
        # one that wants kwok, which is missing, waits for the holder
        waiting = subprocess.Popen(
            ["bash", script],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # killed with its flock below
        )
        try:
            with pytest.raises(subprocess.TimeoutExpired):
                waiting.wait(timeout=3)
        finally:
            os.killpg(waiting.pid, signal.SIGKILL)
            waiting.wait()
    finally:
        holder.kill()
        holder.wait()
