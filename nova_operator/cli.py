"""Command line: flags (and ``NOVA_OPERATOR_*`` variables) -> ``Settings`` -> ``manager.run``.

Every flag has an environment variable: ``--metrics-bind-address`` is
``NOVA_OPERATOR_METRICS_BIND_ADDRESS``; ``--namespace`` takes a comma-separated list
there. A flag wins over its variable. Errors end the process with one line on stderr:
exit 2 for bad flags, 1 for an unusable kubeconfig or a failure while running. An API server
that does not answer at start-up is retried with backoff (``manager.wait_reachable``), never an
exit: a restart cannot bring it back.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn, TypeVar

import structlog

from nova_operator import __version__, log
from nova_operator.kube.config import ConfigError, pod_namespace
from nova_operator.kube.errors import KubeError
from nova_operator.rlimits import raise_open_files_limit
from nova_operator.runtime.health import parse_address
from nova_operator.runtime.leaderelection import LeaderElectionLost
from nova_operator.runtime.manager import CacheSyncTimeout, ControllerFactory, ControllerStopped
from nova_operator.secret_refs import parse_policy
from nova_operator.settings import (
    DEFAULT_NOVA_API_URL,
    DEFAULT_PASS_BUDGET,
    DEFAULT_RECONCILE_TIMEOUT,
    KubeSettings,
    LeaderElectionSettings,
    LogSettings,
    OpenStackSettings,
    QueueSettings,
    ServerSettings,
    Settings,
    WatchSettings,
)

T = TypeVar("T")
PROG = "nova-operator"
ENV_PREFIX = "NOVA_OPERATOR_"


class _Parser(argparse.ArgumentParser):
    log_format: log.Format = "console"

    def error(self, message: str) -> NoReturn:
        self.exit(2, log.error_line(self.log_format, self.prog, f"{message} (see --help)") + "\n")


def _env(name: str) -> str | None:
    value = os.environ.get(ENV_PREFIX + name)
    return value if value not in (None, "") else None


TRUE = ("true", "1", "yes", "on")
FALSE = ("false", "0", "no", "off")


def _bool(text: str) -> bool:
    """``true``/``false`` (also 1/0, yes/no, on/off; any case): one set for flags and variables."""
    if text.lower() in TRUE:
        return True
    if text.lower() in FALSE:
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean {text!r} (want true or false)")


def _env_parsed(name: str, parse: Callable[[str], T]) -> T | None:
    """``NOVA_OPERATOR_<name>`` through a flag's parser (None when unset); a bad value names the variable."""
    value = _env(name)
    if value is None:
        return None
    try:
        return parse(value)
    except argparse.ArgumentTypeError as exc:
        raise ValueError(f"{ENV_PREFIX}{name}: {exc}") from None


def _env_bool(name: str, default: bool) -> bool:
    value = _env_parsed(name, _bool)
    return default if value is None else value


PULL_POLICIES = ("Always", "IfNotPresent", "Never")
RETRY_JITTER = 1.2  # client-go: a renew deadline must exceed 1.2 retry periods (the retries are jittered)


def _pull_policy(text: str) -> str:
    """One of Kubernetes' imagePullPolicy values, spelled as the API server wants them."""
    if text in PULL_POLICIES:
        return text
    raise argparse.ArgumentTypeError(
        f"invalid image pull policy {text!r} (want one of {', '.join(PULL_POLICIES)})"
    )


def _early_format(argv: Sequence[str]) -> log.Format:
    """The log format asked for, before the flags are parsed: how a bad flag's error is written."""
    chosen: str | None = None
    for i, arg in enumerate(argv):
        if arg == "--log-format" and i + 1 < len(argv):
            chosen = argv[i + 1]
        elif arg.startswith("--log-format="):
            chosen = arg.partition("=")[2]
    for value in (chosen, _env("LOG_FORMAT")):
        if value in ("json", "console"):
            return "json" if value == "json" else "console"
    return log.default_format()


def _workers(text: str) -> int:
    """An integer; 0 or less means the default of 2 (reconciler spec, section 1)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
    return value if value > 0 else QueueSettings().workers


def _seconds(text: str) -> float:
    """A number of seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number of seconds {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"invalid number of seconds {text!r} (want a finite number >= 0)")
    return value


def _positive_seconds(text: str) -> float:
    value = _seconds(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"invalid number of seconds {text!r} (want more than 0)")
    return value


def _address(text: str) -> str:
    try:
        parse_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def build_parser() -> _Parser:
    p = _Parser(
        prog=PROG,
        description="Kubernetes operator for the OpenStack Nova control plane.",
        epilog=f"Every flag is also read from {ENV_PREFIX}<FLAG> (e.g. {ENV_PREFIX}LOG_LEVEL for "
        "--log-level); a flag wins. Bad flags exit 2, a failure to start or run exits 1.",
    )
    cluster = p.add_argument_group("cluster and scope")
    cluster.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, else in-cluster)"
    )
    cluster.add_argument("--context", help="kubeconfig context (default: its current context)")
    cluster.add_argument(
        "--namespace",
        action="append",
        dest="namespaces",
        metavar="NAMESPACE",
        help="namespace to watch; repeat for several (default: all namespaces)",
    )
    election = p.add_argument_group("leader election")
    election.add_argument(
        "--leader-elect",
        nargs="?",
        const=True,
        default=None,
        type=_bool,
        metavar="BOOL",
        help="elect a leader through a Lease before reconciling; --leader-elect, --leader-elect=true "
        "and --leader-elect=false (default: true)",
    )
    election.add_argument(
        "--no-leader-elect",
        dest="leader_elect",
        action="store_false",
        default=None,
        help="same as --leader-elect=false",
    )
    for flag, what, default in (
        (
            "--leader-elect-lease-duration",
            "a standby takes a Lease whose holder has not renewed it for this long",
            15,
        ),
        (
            "--leader-elect-renew-deadline",
            "a leader that could not renew its Lease for this long stops leading",
            10,
        ),
        ("--leader-elect-retry-period", "how often a leader renews and a standby tries to acquire", 2),
    ):
        election.add_argument(
            flag, type=_positive_seconds, metavar="SECONDS", help=f"{what} (default: {default})"
        )
    election.add_argument(
        "--leader-election-namespace",
        help="namespace of the Lease (default: the operator's own, from $POD_NAMESPACE or the "
        "ServiceAccount mount, else nova-system)",
    )
    queue = p.add_argument_group("workers, queue and watches")
    queue.add_argument(
        "--workers",
        "--max-concurrent-reconciles",
        dest="workers",
        type=_workers,
        help="concurrent reconciles per controller; 0 or less means the default (2)",
    )
    queue.add_argument(
        "--drain-timeout",
        type=_seconds,
        metavar="SECONDS",
        help="on SIGTERM, how long in-flight reconciles may finish before they are cancelled and the "
        "Lease is released; keep it below the pod's terminationGracePeriodSeconds (default: 10)",
    )
    queue.add_argument(
        "--reconcile-timeout",
        type=_positive_seconds,
        metavar="SECONDS",
        help="a reconcile still running after this long is cancelled, counted as an error and retried "
        f"with backoff; below the {QueueSettings().stuck_after:g} s after which /healthz calls a worker "
        f"stuck (default: {DEFAULT_RECONCILE_TIMEOUT:g})",
    )
    queue.add_argument(
        "--pass-budget",
        type=_positive_seconds,
        metavar="SECONDS",
        help="a pass begins no more work after this long (the steps left, the nodes not walked): the "
        "rest goes to its next pass, in its namespace's next turn; below --reconcile-timeout "
        f"(default: {DEFAULT_PASS_BUDGET:g})",
    )
    queue.add_argument(
        "--watch-inactivity-timeout",
        type=_positive_seconds,
        metavar="SECONDS",
        help="a watch that delivers no event and no bookmark for this long is dead and re-opened; "
        "opening one may take at most this long (and 30 s); /readyz reports a reflector quiet for "
        "3 times this long (default: 70)",
    )
    probes = p.add_argument_group("probes and metrics")
    probes.add_argument(
        "--metrics-bind-address", type=_address, help="host:port for /metrics, 0 to disable (127.0.0.1:8080)"
    )
    probes.add_argument(
        "--health-probe-bind-address",
        type=_address,
        help="host:port for /healthz and /readyz, 0 to disable (:8081)",
    )
    logging = p.add_argument_group("logging")
    logging.add_argument(
        "--log-format",
        choices=["json", "console"],
        help="json: one JSON object a line (ts, level, logger, msg, ...) for log pipelines; console: "
        "for humans (default: console on a TTY, else json)",
    )
    logging.add_argument("--log-level", choices=sorted(log.LEVELS), help="default: info")
    defaults = p.add_argument_group("defaults for what the operator renders")
    defaults.add_argument(
        "--default-image-pull-policy",
        type=_pull_policy,
        metavar="|".join(PULL_POLICIES),
        help="imagePullPolicy of the compute pods (DaemonSet, host discovery Job) whose image names "
        "none (default: Always for a tag, IfNotPresent for a digest)",
    )
    refs = p.add_argument_group("what a CR may make the operator read")
    refs.add_argument(
        "--secret-ref-label",
        metavar="KEY[=VALUE]",
        help="use a Secret a Nova or NovaCompute names only while it carries this label (with this value); "
        "a CR naming another gets SecretRefNotLabelled (default: any Secret of the CR's namespace)",
    )
    defaults.add_argument(
        "--nova-api-url",
        help="the compute API of a Nova, with {name} and {namespace} placeholders "
        f"(default: {DEFAULT_NOVA_API_URL})",
    )
    return p


def _nova_api_url(template: str) -> str:
    try:
        url = template.format(name="n", namespace="ns")
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"--nova-api-url {template!r}: only {{name}} and {{namespace}} may be used") from exc
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"--nova-api-url {template!r}: want an http:// or https:// URL")
    return template


def parse_settings(argv: Sequence[str] | None = None) -> Settings:
    """Flags over environment over defaults. Exits 2 on a bad flag or variable."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    parser.log_format = _early_format(argv)
    args = parser.parse_args(argv)
    try:
        leader_elect = args.leader_elect if args.leader_elect is not None else _env_bool("LEADER_ELECT", True)
        env_ns = _env("NAMESPACE")
        namespaces = args.namespaces or (
            [n.strip() for n in env_ns.split(",") if n.strip()] if env_ns else []
        )
        workers = args.workers or _workers(_env("WORKERS") or "2")
        metrics_addr = args.metrics_bind_address or _address(
            _env("METRICS_BIND_ADDRESS") or ServerSettings().metrics_bind_address
        )
        health_addr = args.health_probe_bind_address or _address(_env("HEALTH_PROBE_BIND_ADDRESS") or ":8081")
        fmt = args.log_format or _env("LOG_FORMAT") or log.default_format()
        level = (args.log_level or _env("LOG_LEVEL") or "info").lower()
        nova_api_url = _nova_api_url(args.nova_api_url or _env("NOVA_API_URL") or DEFAULT_NOVA_API_URL)
        drain_timeout = _from_env_or(
            args.drain_timeout, "DRAIN_TIMEOUT", _seconds, Settings().shutdown_timeout
        )
        inactivity = _from_env_or(
            args.watch_inactivity_timeout,
            "WATCH_INACTIVITY_TIMEOUT",
            _positive_seconds,
            WatchSettings().inactivity_timeout,
        )
        reconcile_timeout = _reconcile_timeout(
            _from_env_or(
                args.reconcile_timeout,
                "RECONCILE_TIMEOUT",
                _positive_seconds,
                DEFAULT_RECONCILE_TIMEOUT,
            )
        )
        pass_budget = _pass_budget(
            _from_env_or(args.pass_budget, "PASS_BUDGET", _positive_seconds, DEFAULT_PASS_BUDGET),
            reconcile_timeout,
        )
        timing = _lease_timing(args)
        pull_policy = args.default_image_pull_policy or _env_parsed("DEFAULT_IMAGE_PULL_POLICY", _pull_policy)
        secret_refs = parse_policy(
            args.secret_ref_label if args.secret_ref_label is not None else _env("SECRET_REF_LABEL") or ""
        )
        if fmt not in ("json", "console"):
            raise ValueError(f"{ENV_PREFIX}LOG_FORMAT={fmt!r}: want json or console")
        if level not in log.LEVELS:
            raise ValueError(f"{ENV_PREFIX}LOG_LEVEL={level!r}: want one of {', '.join(sorted(log.LEVELS))}")
    except (ValueError, argparse.ArgumentTypeError) as exc:
        parser.error(str(exc))
    kube = KubeSettings(
        kubeconfig=args.kubeconfig or _env("KUBECONFIG"),
        context=args.context or _env("CONTEXT"),
        service_account_dir=_env("SERVICE_ACCOUNT_DIR") or KubeSettings().service_account_dir,
    )
    own_namespace = pod_namespace(kube.service_account_dir) or Settings().operator_namespace
    return Settings(
        kube=kube,
        operator_namespace=own_namespace,
        watch=WatchSettings(
            namespaces=tuple(namespaces),
            inactivity_timeout=inactivity,
            open_timeout=min(WatchSettings().open_timeout, inactivity),
        ),
        queue=QueueSettings(workers=workers, reconcile_timeout=reconcile_timeout, pass_budget=pass_budget),
        leader_election=LeaderElectionSettings(
            enabled=leader_elect,
            namespace=args.leader_election_namespace or _env("LEADER_ELECTION_NAMESPACE") or own_namespace,
            lease_duration=timing[0],
            renew_deadline=timing[1],
            retry_period=timing[2],
        ),
        servers=ServerSettings(metrics_bind_address=metrics_addr, health_probe_bind_address=health_addr),
        log=LogSettings(format="console" if fmt == "console" else "json", level=level),
        openstack=OpenStackSettings(nova_api_url=nova_api_url),
        shutdown_timeout=drain_timeout,
        default_image_pull_policy=pull_policy,
        secret_refs=secret_refs,
    )


def _reconcile_timeout(seconds: float) -> float:
    stuck = QueueSettings().stuck_after
    if seconds >= stuck:
        raise ValueError(
            f"--reconcile-timeout {seconds:g}: want less than {stuck:g} s (the stuck-worker check)"
        )
    return seconds


def _pass_budget(seconds: float, reconcile_timeout: float) -> float:
    if seconds >= reconcile_timeout:
        raise ValueError(
            f"--pass-budget {seconds:g}: want less than --reconcile-timeout ({reconcile_timeout:g} s)"
        )
    return seconds


def _lease_timing(args: argparse.Namespace) -> tuple[float, float, float]:
    """Lease duration, renew deadline and retry period, checked like client-go checks them."""
    base = LeaderElectionSettings()
    lease, renew, retry = (
        _from_env_or(
            getattr(args, f"leader_elect_{name}"), f"LEADER_ELECT_{name.upper()}", _positive_seconds, default
        )
        for name, default in (
            ("lease_duration", base.lease_duration),
            ("renew_deadline", base.renew_deadline),
            ("retry_period", base.retry_period),
        )
    )
    if not lease > renew:
        raise ValueError(
            f"--leader-elect-lease-duration ({lease:g}) must be longer than "
            f"--leader-elect-renew-deadline ({renew:g})"
        )
    if not renew > RETRY_JITTER * retry:
        raise ValueError(
            f"--leader-elect-renew-deadline ({renew:g}) must be longer than {RETRY_JITTER:g} times "
            f"--leader-elect-retry-period ({retry:g})"
        )
    return lease, renew, retry


def _from_env_or(flag: float | None, name: str, parse: Callable[[str], float], default: float) -> float:
    if flag is not None:
        return flag
    value = _env_parsed(name, parse)
    return default if value is None else value


def main(argv: Sequence[str] | None = None, controllers: Sequence[ControllerFactory] | None = None) -> int:
    """Entry point of ``nova-operator`` and ``python -m nova_operator``; returns the exit code."""
    try:
        settings = parse_settings(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    log.configure(fmt=settings.log.format, level=settings.log.level)
    with log.process_hooks():
        return _run(settings, controllers)


def _run(settings: Settings, controllers: Sequence[ControllerFactory] | None) -> int:
    from nova_operator import controllers as registry
    from nova_operator.runtime.manager import run

    factories = list(controllers) if controllers is not None else registry.factories(settings)
    files_before, files = raise_open_files_limit()
    structlog.get_logger("nova_operator.cli").info(
        "starting",
        version=__version__,
        namespaces=list(settings.watch.namespaces) or "all",
        leader_election=settings.leader_election.enabled,
        workers=settings.queue.workers,
        metrics=settings.servers.metrics_bind_address,
        health=settings.servers.health_probe_bind_address,
        open_files_limit=files,
        **({"open_files_limit_raised_from": files_before} if files != files_before else {}),
    )
    try:
        asyncio.run(run(settings, factories))
    except KeyboardInterrupt:
        return 130
    except ConfigError as exc:
        return _fail(settings.log.format, f"no usable Kubernetes configuration: {exc}")
    except KubeError as exc:
        return _fail(settings.log.format, f"cannot reach the Kubernetes API server: {exc}")
    except LeaderElectionLost as exc:
        return _fail(settings.log.format, f"lost the leader election lease {exc}; exiting")
    except (CacheSyncTimeout, ControllerStopped) as exc:
        return _fail(settings.log.format, str(exc))
    except OSError as exc:
        return _fail(settings.log.format, f"cannot serve: {exc}")
    except Exception:  # a bug: logged with its traceback inside the log stream
        structlog.get_logger("nova_operator.cli").critical("unexpected failure, exiting", exc_info=True)
        return 1
    return 0


def _fail(fmt: log.Format, message: str) -> int:
    """The last line of a failed run: one JSON record in the json format, one plain line else."""
    print(log.error_line(fmt, PROG, message), file=sys.stderr)
    return 1
