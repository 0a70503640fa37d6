"""``make run REAL_NODES=1``: the flag reaches ``launch_real`` as real compute nodes with the sample
release's image, the operator gets ``--default-image-pull-policy IfNotPresent`` (the caller's flag
wins), and without the flag nothing changes."""

from __future__ import annotations

import os
import pathlib
import signal
from typing import Any, NoReturn

import prepare.__main__ as prepare_main
import pytest
import simcluster.__main__ as simcluster_main
from prepare.plans import run_plan, sample_release
from prepare.runner import Outcome
from simcluster import run

from nova_operator.cli import parse_settings


def _launch_and_start(monkeypatch: pytest.MonkeyPatch, real_nodes: bool) -> tuple[dict[str, Any], list[str]]:
    launched: dict[str, Any] = {}
    started: list[list[str]] = []

    class Handle:
        def stop(self) -> None:
            pass

    def launch_real(workdir: object, **kw: Any) -> Handle:
        launched.update(kw)
        return Handle()

    def start(handle: object, real: bool, metrics: int, operator_args: list[str]) -> object:
        started.append(list(operator_args))
        raise RuntimeError("stop here")

    monkeypatch.setattr(signal, "signal", lambda *a: None)  # not this test process's handlers
    monkeypatch.setattr(run, "launch_real", launch_real)
    monkeypatch.setattr(run, "_start", start)
    with pytest.raises(RuntimeError, match="stop here"):
        run.run_simulated(None, ["--workers=2"], real=True, real_nodes=real_nodes)
    (args,) = started
    return launched, args


def test_real_nodes_launch_the_pool_nodes_real_with_the_sample_release_and_pull_if_not_present(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    launched, args = _launch_and_start(monkeypatch, real_nodes=True)
    assert launched["real_compute_nodes"] is True
    assert tuple(launched["real_node_releases"]) == (sample_release(),)
    assert tuple(launched["compute_nodes"]) == run.REAL_POOL_NODES
    assert set(launched["node_labels"]) == set(run.REAL_POOL_NODES)
    settings = parse_settings(args)
    assert settings.default_image_pull_policy == "IfNotPresent"
    assert not settings.leader_election.enabled
    assert args[-1] == "--workers=2"


def test_without_the_flag_the_nodes_stay_stand_ins_and_the_pull_policy_the_operators_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    launched, args = _launch_and_start(monkeypatch, real_nodes=False)
    assert launched["real_compute_nodes"] is False
    assert args == ["--leader-elect=false", "--workers=2"]
    assert parse_settings(args).default_image_pull_policy is None


def test_the_callers_pull_policy_wins() -> None:
    args = run.run_args(["--default-image-pull-policy", "Always"], real_nodes=True)
    assert parse_settings(args).default_image_pull_policy == "Always"


def test_real_nodes_are_refused_with_the_stand_ins() -> None:
    with pytest.raises(ValueError, match="stand-ins"):
        run.run_simulated(None, [], real=False, real_nodes=True)
    with pytest.raises(SystemExit):
        simcluster_main.main(["run", "--standins", "--real-compute-nodes"])
    with pytest.raises(SystemExit):
        prepare_main.main(["run", "--standins", "--real-compute-nodes"])


@pytest.mark.parametrize("flag", [True, False])
def test_simcluster_run_passes_the_flag(monkeypatch: pytest.MonkeyPatch, flag: bool) -> None:
    seen: list[tuple[object, list[str], dict[str, Any]]] = []

    def run_simulated(workdir: object, operator_args: list[str], **kw: Any) -> int:
        seen.append((workdir, list(operator_args), kw))
        return 0

    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setattr(simcluster_main, "run_simulated", run_simulated)
    argv = ["run", "--workdir", "/tmp/x", *(["--real-compute-nodes"] if flag else []), "--", "--workers=2"]
    assert simcluster_main.main(argv) == 0
    assert seen == [(pathlib.Path("/tmp/x"), ["--workers=2"], {"real": True, "real_nodes": flag})]


@pytest.mark.parametrize("flag", [True, False])
def test_prepare_run_builds_the_real_nodes_and_hands_the_flag_on(
    monkeypatch: pytest.MonkeyPatch, flag: bool
) -> None:
    plans: list[dict[str, Any]] = []
    execs: list[list[str]] = []

    def plan(**kw: Any) -> list[list[object]]:
        plans.append(kw)
        return []

    def execve(path: str, argv: list[str], env: dict[str, str]) -> NoReturn:
        execs.append(argv)
        raise SystemExit(0)

    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setattr(prepare_main, "run_plan", plan)
    monkeypatch.setattr(prepare_main, "prepare", lambda *a: Outcome())
    monkeypatch.setattr(os, "execve", execve)
    monkeypatch.setattr(os, "chdir", lambda path: None)
    with pytest.raises(SystemExit):
        prepare_main.main(["run", "--python", "/bin/py", *(["--real-compute-nodes"] if flag else [])])
    assert plans[0]["real_nodes"] is flag
    (argv,) = execs
    assert argv[:4] == ["/bin/py", "-m", "simcluster", "run"]
    assert ("--real-compute-nodes" in argv) is flag


def test_the_plan_with_real_nodes_adds_their_binaries_and_the_sample_releases_oci_image() -> None:
    def keys(lanes: list[list[Any]]) -> list[list[str]]:
        return [[s.key for s in lane] for lane in lanes]

    plain = run_plan(standins=False, kubeconfig=False, make_venv=False)
    real = run_plan(standins=False, kubeconfig=False, make_venv=False, real_nodes=True)
    assert keys(real) == [[*keys(plain)[0], "nova-oci-image"], [*keys(plain)[1], "realnode"]]
    stages = {s.key: s for lane in real for s in lane}
    assert stages["nova-oci-image"].argv[-1] == sample_release()
    assert stages["realnode"].needs == ("apt",)
