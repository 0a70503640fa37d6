"""The command line: flags and environment to settings; one-line errors and exit codes."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest
import structlog

from nova_operator import cli
from nova_operator.settings import LeaderElectionSettings, Settings


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """``cli.main`` configures structlog globally; put the defaults back for other tests."""
    yield
    structlog.reset_defaults()


def test_defaults_match_the_documented_values(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    for var in ("NAMESPACE", "WORKERS", "LEADER_ELECT", "LOG_FORMAT", "LOG_LEVEL", "METRICS_BIND_ADDRESS"):
        monkeypatch.delenv(cli.ENV_PREFIX + var, raising=False)
    # Outside a pod (even when the tests themselves run in one): no own namespace to pick up.
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    monkeypatch.setenv("NOVA_OPERATOR_SERVICE_ACCOUNT_DIR", str(tmp_path / "no-mount"))
    s = cli.parse_settings([])
    assert s.watch.namespaces == ()
    assert s.queue.workers == 2
    assert s.leader_election.enabled
    assert s.leader_election.namespace == "nova-system"
    assert (s.servers.metrics_bind_address, s.servers.health_probe_bind_address) == (":8080", ":8081")
    assert s.log.level == "info"
    assert s.log.format == "json"  # pytest's stderr is not a TTY


def test_flags_override_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOVA_OPERATOR_NAMESPACE", "a, b")
    monkeypatch.setenv("NOVA_OPERATOR_WORKERS", "5")
    monkeypatch.setenv("NOVA_OPERATOR_LEADER_ELECT", "false")
    monkeypatch.setenv("NOVA_OPERATOR_LOG_FORMAT", "console")
    s = cli.parse_settings([])
    assert s.watch.namespaces == ("a", "b")
    assert s.queue.workers == 5
    assert not s.leader_election.enabled
    assert s.log.format == "console"
    s = cli.parse_settings(
        [
            "--namespace=x",
            "--namespace=y",
            "--workers=3",
            "--leader-elect",
            "--leader-election-namespace=ops",
            "--metrics-bind-address=127.0.0.1:9000",
            "--health-probe-bind-address=0",
            "--log-format=json",
            "--log-level=debug",
            "--kubeconfig=/k",
            "--context=c",
        ]
    )
    assert s.watch.namespaces == ("x", "y")
    assert s.queue.workers == 3
    assert s.leader_election.enabled
    assert s.leader_election.namespace == "ops"
    assert s.servers.metrics_bind_address == "127.0.0.1:9000"
    assert s.servers.health_probe_bind_address == "0"
    assert (s.log.format, s.log.level) == ("json", "debug")
    assert (s.kube.kubeconfig, s.kube.context) == ("/k", "c")
    assert cli.parse_settings(["--no-leader-elect"]).leader_election.enabled is False
    assert cli.parse_settings(["--max-concurrent-reconciles=4"]).queue.workers == 4
    assert cli.parse_settings(["--workers=0"]).queue.workers == 2  # 0 or less: the default


@pytest.mark.parametrize(
    "argv",
    [
        ["--bogus"],
        ["--max-concurrent-reconciles=1.5"],
        ["--workers=two"],
        ["--log-format=xml"],
        ["--metrics-bind-address=nowhere"],
    ],
)
def test_a_bad_flag_exits_2_with_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("nova-operator: error: ")


def test_a_bad_environment_variable_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NOVA_OPERATOR_LEADER_ELECT", "perhaps")
    assert cli.main([]) == 2
    assert "NOVA_OPERATOR_LEADER_ELECT" in capsys.readouterr().err


def test_a_missing_kubeconfig_exits_1_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--kubeconfig=/does/not/exist", "--log-level=error"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "nova-operator: error: no usable Kubernetes configuration: kubeconfig file not found: /does/not/exist"
    ]


def test_an_unreachable_api_server_exits_1_with_one_line(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        "clusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n"
        "users:\n- name: u\n  user:\n    token: t\n"
        "contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n"
        "current-context: c\n"
    )
    assert cli.main([f"--kubeconfig={kubeconfig}", "--log-level=error", "--metrics-bind-address=0"]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("nova-operator: error: cannot reach the Kubernetes API server: ")
    assert "127.0.0.1:1" in lines[0]


def test_leader_election_defaults_are_15s_lease_10s_renew_2s_retry() -> None:
    le = LeaderElectionSettings()
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (15.0, 10.0, 2.0)
    s = Settings()
    assert (s.queue.backoff_base, s.queue.backoff_cap, s.queue.bucket_rate, s.queue.bucket_burst) == (
        0.005,
        30.0,
        10.0,
        100,
    )
    assert (s.watch.backoff_initial, s.watch.backoff_max) == (0.8, 30.0)
    assert (s.watch.watch_timeout_min, s.watch.watch_timeout_max) == (300.0, 600.0)
    assert s.watch.inactivity_timeout == 70.0


def test_drain_timeout_and_watch_inactivity_timeout_from_flags_and_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for var in ("DRAIN_TIMEOUT", "WATCH_INACTIVITY_TIMEOUT"):
        monkeypatch.delenv(cli.ENV_PREFIX + var, raising=False)
    s = cli.parse_settings([])
    assert s.shutdown_timeout == 10.0  # well under the kubelet's default 30 s grace period
    assert (s.watch.inactivity_timeout, s.watch.open_timeout) == (70.0, 30.0)
    monkeypatch.setenv("NOVA_OPERATOR_DRAIN_TIMEOUT", "4.5")
    monkeypatch.setenv("NOVA_OPERATOR_WATCH_INACTIVITY_TIMEOUT", "5")
    s = cli.parse_settings([])
    assert s.shutdown_timeout == 4.5
    assert (s.watch.inactivity_timeout, s.watch.open_timeout) == (5.0, 5.0)  # opening no longer than it
    s = cli.parse_settings(["--drain-timeout", "0", "--watch-inactivity-timeout", "90"])
    assert s.shutdown_timeout == 0.0
    assert (s.watch.inactivity_timeout, s.watch.open_timeout) == (90.0, 30.0)


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["--drain-timeout", "-1"], {}, "invalid number of seconds '-1'"),
        (["--drain-timeout", "soon"], {}, "invalid number of seconds 'soon'"),
        (["--drain-timeout", "nan"], {}, "invalid number of seconds 'nan'"),
        (["--watch-inactivity-timeout", "0"], {}, "want more than 0"),
        (
            [],
            {"NOVA_OPERATOR_DRAIN_TIMEOUT": "inf"},
            "NOVA_OPERATOR_DRAIN_TIMEOUT: invalid number of seconds",
        ),
    ],
)
def test_bad_timeouts_exit_2_with_one_line(
    argv: list[str],
    env: dict[str, str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert message in err[0]
