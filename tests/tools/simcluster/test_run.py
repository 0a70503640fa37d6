"""``make run`` runs the operator without leader election (as kubebuilder's run target does), and
``make run ARGS=--leader-elect`` turns it back on."""

from __future__ import annotations

import os
import pathlib
import signal
import sys
from typing import NoReturn

import pytest
from simcluster import run

from nova_operator.cli import parse_settings


def test_make_run_against_a_kubeconfig_runs_the_operator_without_leader_election(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[list[str]] = []

    def execv(path: str, argv: list[str]) -> NoReturn:
        seen.append(argv)
        raise SystemExit(0)

    monkeypatch.setattr(os, "execv", execv)
    with pytest.raises(SystemExit):
        run.run_against_kubeconfig(["--log-level", "debug"])
    (argv,) = seen
    assert argv[:3] == [sys.executable, "-m", "nova_operator"]
    settings = parse_settings(argv[3:])
    assert not settings.leader_election.enabled
    assert settings.log.level == "debug"


@pytest.mark.parametrize("flag", ["--leader-elect", "--leader-elect=true"])
def test_the_callers_flag_turns_leader_election_back_on(flag: str) -> None:
    assert parse_settings(run.run_args([flag])).leader_election.enabled


def test_the_simulated_cluster_gets_the_same_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    """``run_simulated`` starts the operator with ``run_args`` of the caller's flags."""
    started: list[list[str]] = []

    class Handle:
        workdir = pathlib.Path("/nonexistent/simcluster-test")  # nothing to keep the logs of

        def stop(self) -> None:
            pass

    def start(handle: object, real: bool, metrics: int, operator_args: list[str]) -> object:
        started.append(list(operator_args))
        raise RuntimeError("stop here")

    monkeypatch.setattr(signal, "signal", lambda *a: None)  # not this test process's handlers
    monkeypatch.setattr(run, "launch", lambda *a, **k: Handle())
    monkeypatch.setattr(run, "_start", start)
    with pytest.raises(RuntimeError, match="stop here"):
        run.run_simulated(None, ["--workers=2"], real=False)
    assert started == [["--leader-elect=false", "--workers=2"]]
    assert not parse_settings(started[0]).leader_election.enabled
