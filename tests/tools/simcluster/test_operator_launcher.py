"""The one operator launcher (``simcluster.platform.operator``): its command line parses as the
operator's own settings, the caller's flags win, and leadership is read from /metrics."""

from __future__ import annotations

import pathlib
import sys
from collections.abc import Mapping

import pytest
from simcluster.platform.operator import leading, operator_argv, start_operator, wait_leading
from simcluster.platform.process import ManagedProcess, spawn

from nova_operator.cli import parse_settings


class FakeCluster:
    def __init__(self, workdir: pathlib.Path) -> None:
        self.kubeconfig = workdir / "kubeconfig"
        self.workdir = workdir
        self.spawned: list[tuple[str, list[str], Mapping[str, str] | None, pathlib.Path | None]] = []

    def spawn(
        self,
        name: str,
        argv: list[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: pathlib.Path | None = None,
    ) -> ManagedProcess:
        self.spawned.append((name, argv, env, cwd))
        # a stand-in for the operator: exits at once, so a wait on it fails fast
        return spawn(name, [sys.executable, "-c", "print('no operator here')"], self.workdir)


def test_the_command_line_is_the_operators_as_its_service_account(tmp_path: pathlib.Path) -> None:
    cluster = FakeCluster(tmp_path)
    argv = operator_argv(cluster, 9100, "--log-level", "debug", health_port=9101)
    assert argv[:3] == [sys.executable, "-m", "nova_operator"]
    settings = parse_settings(argv[3:])
    assert settings.kube.kubeconfig == str(cluster.kubeconfig)
    assert settings.kube.context == "operator"
    assert settings.servers.metrics_bind_address == "127.0.0.1:9100"
    assert settings.servers.health_probe_bind_address == "127.0.0.1:9101"
    assert argv[argv.index("--log-format") + 1] == "json"
    assert settings.log.level == "debug"


def test_a_later_flag_of_the_caller_wins(tmp_path: pathlib.Path) -> None:
    argv = operator_argv(FakeCluster(tmp_path), 9100, "--log-format", "console")
    assert parse_settings(argv[3:]).log.format == "console"


def test_start_spawns_under_the_name_with_its_ports(tmp_path: pathlib.Path) -> None:
    cluster = FakeCluster(tmp_path)
    op = start_operator(cluster, "operator-a", "--namespace", "ns1", cwd=tmp_path, env={"X": "1"})
    op.process.popen.wait(30)
    ((name, argv, env, cwd),) = cluster.spawned
    assert (name, env, cwd) == ("operator-a", {"X": "1"}, tmp_path)
    assert f"127.0.0.1:{op.metrics_port}" in argv
    assert f"127.0.0.1:{op.health_port}" in argv
    assert op.metrics_url == f"http://127.0.0.1:{op.metrics_port}/metrics"
    assert argv[-2:] == ["--namespace", "ns1"]


def test_waiting_for_leadership_fails_with_the_log_when_the_operator_exits(tmp_path: pathlib.Path) -> None:
    op = start_operator(FakeCluster(tmp_path), "operator")
    op.process.popen.wait(30)
    with pytest.raises(RuntimeError, match="the operator exited:\nno operator here"):
        wait_leading(op, 60)


def test_leading_reads_the_leader_gauge() -> None:
    gauge = "nova_operator_leader_election_master_status"
    assert leading(f'# HELP {gauge} x\n# TYPE {gauge} gauge\n{gauge}{{name="nova-operator"}} 1.0\n')
    assert not leading(f'{gauge}{{name="nova-operator"}} 0.0\n')
    assert not leading("")
