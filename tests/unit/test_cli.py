"""The command line: flags and environment to settings; one-line errors and exit codes."""

from __future__ import annotations

import json
import pathlib
import re
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Coroutine, Iterator
from typing import Any

import pytest
import structlog
from simcluster.client import jsonlog

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
    # /metrics on loopback only: a bare nova-operator is never more open than the chart's pod IP
    assert (s.servers.metrics_bind_address, s.servers.health_probe_bind_address) == (
        "127.0.0.1:8080",
        ":8081",
    )
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


def one_error_line(err: str, fmt: str) -> str:
    """The message of the one line a failed start writes: a JSON record, or ``nova-operator: error: ...``."""
    lines = err.splitlines()
    assert len(lines) == 1, err
    if fmt == "console":
        assert lines[0].startswith("nova-operator: error: "), lines[0]
        return lines[0].removeprefix("nova-operator: error: ")
    entry = json.loads(lines[0])
    assert list(entry) == ["ts", "level", "logger", "msg"]
    assert (entry["level"], entry["logger"]) == ("error", "nova_operator.cli")
    return str(entry["msg"])


@pytest.mark.parametrize("fmt", ["json", "console"])
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
def test_a_bad_flag_exits_2_with_one_line(
    argv: list[str], fmt: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NOVA_OPERATOR_LOG_FORMAT", fmt)  # --log-format=xml: the variable decides
    assert cli.main(argv) == 2
    assert one_error_line(capsys.readouterr().err, fmt).endswith("(see --help)")


def test_a_bad_flag_error_follows_the_log_format_flag_before_it_is_parsed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("NOVA_OPERATOR_LOG_FORMAT", raising=False)
    assert cli.main(["--log-format", "console", "--bogus"]) == 2
    assert "unrecognized arguments: --bogus" in one_error_line(capsys.readouterr().err, "console")
    assert cli.main(["--bogus", "--log-format=json"]) == 2
    assert "unrecognized arguments: --bogus" in one_error_line(capsys.readouterr().err, "json")
    assert cli.main(["--bogus"]) == 2  # pytest's stderr is no TTY: json
    one_error_line(capsys.readouterr().err, "json")


def test_lease_timing_flags_and_variables_reach_the_elector(monkeypatch: pytest.MonkeyPatch) -> None:
    le = cli.parse_settings(
        [
            "--leader-elect-lease-duration=6",
            "--leader-elect-renew-deadline",
            "4",
            "--leader-elect-retry-period=1.5",
        ]
    ).leader_election
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (6.0, 4.0, 1.5)
    monkeypatch.setenv("NOVA_OPERATOR_LEADER_ELECT_LEASE_DURATION", "30")
    monkeypatch.setenv("NOVA_OPERATOR_LEADER_ELECT_RENEW_DEADLINE", "20")
    le = cli.parse_settings(["--leader-elect-renew-deadline=25"]).leader_election
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (30.0, 25.0, 2.0)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--leader-elect-lease-duration=10"], "--leader-elect-lease-duration (10) must be longer than"),
        (["--leader-elect-renew-deadline=15"], "--leader-elect-lease-duration (15) must be longer than"),
        (
            ["--leader-elect-retry-period=9"],
            "--leader-elect-renew-deadline (10) must be longer than 1.2 times",
        ),
        (["--leader-elect-retry-period=0"], "invalid number of seconds '0'"),
        (["--leader-elect-lease-duration=soon"], "invalid number of seconds 'soon'"),
    ],
)
def test_inconsistent_lease_timing_exits_2_naming_the_flags(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    assert message in one_error_line(capsys.readouterr().err, "json")


def test_a_bad_environment_variable_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NOVA_OPERATOR_LEADER_ELECT", "perhaps")
    assert cli.main([]) == 2
    assert "NOVA_OPERATOR_LEADER_ELECT" in one_error_line(capsys.readouterr().err, "json")


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_a_missing_kubeconfig_exits_1_with_one_line(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--kubeconfig=/does/not/exist", "--log-level=error", f"--log-format={fmt}"]) == 1
    assert one_error_line(capsys.readouterr().err, fmt) == (
        "no usable Kubernetes configuration: kubeconfig file not found: /does/not/exist"
    )


def test_an_unreachable_api_server_is_retried_and_sigterm_ends_the_wait(tmp_path: pathlib.Path) -> None:
    """Start-up does not exit when the API server does not answer (a restart cannot bring it back,
    and exiting puts the pod in CrashLoopBackOff): each failure is logged and retried with backoff;
    /healthz stays 200 meanwhile; SIGTERM ends the process at once, exit 0 (issue 26 item 11)."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        "clusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n"
        "users:\n- name: u\n  user:\n    token: t\n"
        "contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n"
        "current-context: c\n"
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = [f"--kubeconfig={kubeconfig}", "--log-format=json", "--metrics-bind-address=0"]
    args.append(f"--health-probe-bind-address=127.0.0.1:{port}")
    proc = subprocess.Popen(
        [sys.executable, "-m", "nova_operator", *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stderr is not None
        failures: list[dict[str, Any]] = []
        for line in proc.stderr:
            record = json.loads(line)
            if record["msg"] == "cannot reach the Kubernetes API server; retrying":
                failures.append(record)
            if len(failures) == 3:
                break
        assert proc.poll() is None  # still waiting, not exited
        assert [r["attempt"] for r in failures] == [1, 2, 3]
        assert [r["retry_in"] for r in failures] == [0.5, 1.0, 2.0]
        assert all(r["level"] == "warning" and "127.0.0.1:1" in r["error"] for r in failures)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as resp:
            assert resp.status == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def test_an_unexpected_failure_is_logged_with_its_traceback_and_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def run_with_a_bug(coro: Coroutine[Any, Any, None]) -> None:
        coro.close()
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(cli.asyncio, "run", run_with_a_bug)
    assert cli.main(["--log-format=json"]) == 1
    started, entry = jsonlog.records(capsys.readouterr().err)
    assert started["msg"] == "starting"
    assert list(entry)[:4] == ["ts", "level", "logger", "msg"]
    assert (entry["level"], entry["msg"]) == ("critical", "unexpected failure, exiting")
    assert entry["exception"].endswith("ZeroDivisionError: a bug")


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


def test_reconcile_timeout_defaults_to_five_minutes_below_the_stuck_worker_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(cli.ENV_PREFIX + "RECONCILE_TIMEOUT", raising=False)
    s = cli.parse_settings([])
    assert s.queue.reconcile_timeout == 300.0
    assert s.queue.reconcile_timeout < s.queue.stuck_after
    monkeypatch.setenv("NOVA_OPERATOR_RECONCILE_TIMEOUT", "45")
    assert cli.parse_settings([]).queue.reconcile_timeout == 45.0
    assert cli.parse_settings(["--reconcile-timeout", "120.5"]).queue.reconcile_timeout == 120.5


def test_the_pass_budget_defaults_to_30_s_and_reaches_both_controllers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from nova_operator.controllers import compute_settings, with_settings
    from nova_operator.reconcilers.nova.context import NovaOptions

    for var in ("PASS_BUDGET", "RECONCILE_TIMEOUT"):
        monkeypatch.delenv(cli.ENV_PREFIX + var, raising=False)
    s = cli.parse_settings([])
    assert s.queue.pass_budget == 30.0
    assert s.queue.pass_budget < s.queue.reconcile_timeout
    monkeypatch.setenv("NOVA_OPERATOR_PASS_BUDGET", "12")
    assert cli.parse_settings([]).queue.pass_budget == 12.0
    s = cli.parse_settings(["--pass-budget", "7.5"])
    assert s.queue.pass_budget == 7.5
    assert with_settings(NovaOptions(), s).pass_budget == 7.5
    assert compute_settings(s).pass_budget == 7.5


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["--pass-budget", "0"], {}, "want more than 0"),
        (["--pass-budget", "300"], {}, "--pass-budget 300: want less than --reconcile-timeout (300 s)"),
        (
            ["--pass-budget", "60", "--reconcile-timeout", "45"],
            {},
            "--pass-budget 60: want less than --reconcile-timeout (45 s)",
        ),
        ([], {"NOVA_OPERATOR_PASS_BUDGET": "soon"}, "NOVA_OPERATOR_PASS_BUDGET: invalid number"),
        (["--reconcile-timeout", "0"], {}, "want more than 0"),
        (["--reconcile-timeout", "600"], {}, "--reconcile-timeout 600: want less than 600 s"),
        ([], {"NOVA_OPERATOR_RECONCILE_TIMEOUT": "never"}, "NOVA_OPERATOR_RECONCILE_TIMEOUT: invalid number"),
        (["--drain-timeout", "-1"], {}, "invalid number of seconds '-1'"),
        (["--drain-timeout", "soon"], {}, "invalid number of seconds 'soon'"),
        (["--drain-timeout", "nan"], {}, "invalid number of seconds 'nan'"),
        (["--watch-inactivity-timeout", "0"], {}, "want more than 0"),
        (
            [],
            {"NOVA_OPERATOR_DRAIN_TIMEOUT": "inf"},
            "NOVA_OPERATOR_DRAIN_TIMEOUT: invalid number of seconds",
        ),
        (
            ["--leader-elect=maybe"],
            {},
            "argument --leader-elect: invalid boolean 'maybe' (want true or false)",
        ),
        (["--leader-elect="], {}, "argument --leader-elect: invalid boolean ''"),
        (["--no-leader-elect=true"], {}, "argument --no-leader-elect: ignored explicit argument 'true'"),
        (
            [],
            {"NOVA_OPERATOR_LEADER_ELECT": "perhaps"},
            "NOVA_OPERATOR_LEADER_ELECT: invalid boolean 'perhaps' (want true or false)",
        ),
        (
            ["--default-image-pull-policy=always"],
            {},
            "argument --default-image-pull-policy: invalid image pull policy 'always' "
            "(want one of Always, IfNotPresent, Never)",
        ),
        (["--default-image-pull-policy="], {}, "invalid image pull policy ''"),
        (["--default-image-pull-policy"], {}, "argument --default-image-pull-policy: expected one argument"),
        (
            [],
            {"NOVA_OPERATOR_DEFAULT_IMAGE_PULL_POLICY": "Sometimes"},
            "NOVA_OPERATOR_DEFAULT_IMAGE_PULL_POLICY: invalid image pull policy 'Sometimes'",
        ),
    ],
)
def test_bad_values_exit_2_with_one_line(
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


@pytest.mark.parametrize(
    ("argv", "env", "want"),
    [
        ([], None, True),
        (["--leader-elect"], "false", True),
        (["--leader-elect", "--namespace=x"], None, True),  # a following flag is not its value
        (["--leader-elect=true"], None, True),
        (["--leader-elect=True"], "false", True),
        (["--leader-elect=false"], None, False),
        (["--leader-elect=FALSE"], "true", False),
        (["--leader-elect", "false"], None, False),
        (["--leader-elect=0"], None, False),
        (["--leader-elect=on"], "off", True),
        (["--no-leader-elect"], "true", False),
        (["--no-leader-elect", "--leader-elect=true"], None, True),  # the last one wins
        ([], "false", False),
        ([], "TRUE", True),
        ([], "0", False),
    ],
)
def test_leader_elect_accepts_every_boolean_form(
    argv: list[str], env: str | None, want: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if env is None:
        monkeypatch.delenv("NOVA_OPERATOR_LEADER_ELECT", raising=False)
    else:
        monkeypatch.setenv("NOVA_OPERATOR_LEADER_ELECT", env)
    assert cli.parse_settings(argv).leader_election.enabled is want


def test_default_image_pull_policy_from_flag_or_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOVA_OPERATOR_DEFAULT_IMAGE_PULL_POLICY", raising=False)
    assert cli.parse_settings([]).default_image_pull_policy is None  # the derived rule (§9.7)
    for policy in ("Always", "IfNotPresent", "Never"):
        assert (
            cli.parse_settings([f"--default-image-pull-policy={policy}"]).default_image_pull_policy == policy
        )
    monkeypatch.setenv("NOVA_OPERATOR_DEFAULT_IMAGE_PULL_POLICY", "Never")
    assert cli.parse_settings([]).default_image_pull_policy == "Never"
    assert cli.parse_settings(["--default-image-pull-policy=Always"]).default_image_pull_policy == "Always"


HELP_GROUPS = {
    "cluster and scope": ["--kubeconfig", "--context", "--namespace"],
    "leader election": [
        "--leader-elect",
        "--no-leader-elect",
        "--leader-elect-lease-duration",
        "--leader-elect-renew-deadline",
        "--leader-elect-retry-period",
        "--leader-election-namespace",
    ],
    "workers, queue and watches": [
        "--workers",
        "--max-concurrent-reconciles",
        "--drain-timeout",
        "--reconcile-timeout",
        "--pass-budget",
        "--watch-inactivity-timeout",
    ],
    "probes and metrics": ["--metrics-bind-address", "--health-probe-bind-address"],
    "logging": ["--log-format", "--log-level"],
    "defaults for what the operator renders": ["--default-image-pull-policy", "--nova-api-url"],
    "what a CR may make the operator read": ["--secret-ref-label"],
}


def test_help_groups_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    sections: dict[str, list[str]] = {}
    current = ""
    for line in out.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            current = line[:-1]
            sections[current] = []
        elif current and line.startswith("  -"):
            sections[current] += [f.split()[0].rstrip(",") for f in line.strip().split(", ")]
    assert {k: v for k, v in sections.items() if k != "options"} == HELP_GROUPS
    assert sections["options"] == ["-h", "--help"]


def flags_of_the_parser() -> set[str]:
    return {
        flag
        for action in cli.build_parser()._actions
        for flag in action.option_strings
        if flag.startswith("--") and flag != "--help"
    }


def test_the_documented_flag_table_names_every_flag_and_no_other() -> None:
    page = (pathlib.Path(__file__).parents[2] / "docs" / "running.md").read_text()
    section = page.split("\n## Command line\n", 1)[1].split("\n#", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `--")]
    assert rows, "no flag table under 'Command line' in docs/running.md"
    documented = {flag for row in rows for flag in re.findall(r"`(--[a-z-]+)", row.split(" | ")[0])}
    assert documented == flags_of_the_parser()


def test_the_default_metrics_address_is_loopback_in_the_settings_and_the_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 36 §6: without a flag, /metrics listens on 127.0.0.1, not on every address."""
    from nova_operator.runtime.health import parse_address
    from nova_operator.settings import ServerSettings

    assert parse_address(ServerSettings().metrics_bind_address) == ("127.0.0.1", 8080)
    assert cli.main(["--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "host:port for /metrics, 0 to disable (127.0.0.1:8080)" in out
