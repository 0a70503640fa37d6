"""Command line: flags (and ``NOVA_OPERATOR_*`` variables) -> ``Settings`` -> ``manager.run``.

Every flag has an environment variable: ``--metrics-bind-address`` is
``NOVA_OPERATOR_METRICS_BIND_ADDRESS``; ``--namespace`` takes a comma-separated list
there. A flag wins over its variable. Errors end the process with one line on stderr:
exit 2 for bad flags, 1 for an unusable kubeconfig, an unreachable API server or a
failure while running.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from nova_operator import log
from nova_operator.health import parse_address
from nova_operator.kube.client import ConfigError, pod_namespace
from nova_operator.kube.errors import KubeError
from nova_operator.leaderelection import LeaderElectionLost
from nova_operator.manager import CacheSyncTimeout, ControllerFactory, ControllerStopped
from nova_operator.settings import (
    DEFAULT_NOVA_API_URL,
    KubeSettings,
    LeaderElectionSettings,
    LogSettings,
    OpenStackSettings,
    QueueSettings,
    ServerSettings,
    Settings,
    WatchSettings,
)

PROG = "nova-operator"
ENV_PREFIX = "NOVA_OPERATOR_"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _env(name: str) -> str | None:
    value = os.environ.get(ENV_PREFIX + name)
    return value if value not in (None, "") else None


def _env_bool(name: str, default: bool) -> bool:
    value = _env(name)
    if value is None:
        return default
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{ENV_PREFIX}{name}={value!r} is not a boolean")


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


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Kubernetes operator for the OpenStack Nova control plane.")
    p.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, else in-cluster)"
    )
    p.add_argument("--context", help="kubeconfig context (default: its current context)")
    p.add_argument(
        "--namespace",
        action="append",
        dest="namespaces",
        metavar="NAMESPACE",
        help="namespace to watch; repeat for several (default: all namespaces)",
    )
    p.add_argument(
        "--workers",
        "--max-concurrent-reconciles",
        dest="workers",
        type=_workers,
        help="concurrent reconciles per controller; 0 or less means the default (2)",
    )
    p.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="elect a leader through a Lease before reconciling (default: on)",
    )
    p.add_argument(
        "--leader-election-namespace",
        help="namespace of the Lease (default: the operator's own, from $POD_NAMESPACE or the "
        "ServiceAccount mount, else nova-system)",
    )
    p.add_argument(
        "--metrics-bind-address", type=_address, help="host:port for /metrics, 0 to disable (:8080)"
    )
    p.add_argument(
        "--health-probe-bind-address",
        type=_address,
        help="host:port for /healthz and /readyz, 0 to disable (:8081)",
    )
    p.add_argument(
        "--drain-timeout",
        type=_seconds,
        metavar="SECONDS",
        help="on SIGTERM, how long in-flight reconciles may finish before they are cancelled and the "
        "Lease is released; keep it below the pod's terminationGracePeriodSeconds (default: 10)",
    )
    p.add_argument(
        "--watch-inactivity-timeout",
        type=_positive_seconds,
        metavar="SECONDS",
        help="a watch that delivers no event and no bookmark for this long is dead and re-opened; "
        "opening one may take at most this long (and 30 s); /healthz reports a reflector quiet for "
        "3 times this long (default: 70)",
    )
    p.add_argument("--log-format", choices=["json", "console"], help="default: console on a TTY, else json")
    p.add_argument("--log-level", choices=sorted(log.LEVELS), help="default: info")
    p.add_argument(
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
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        leader_elect = args.leader_elect if args.leader_elect is not None else _env_bool("LEADER_ELECT", True)
        env_ns = _env("NAMESPACE")
        namespaces = args.namespaces or (
            [n.strip() for n in env_ns.split(",") if n.strip()] if env_ns else []
        )
        workers = args.workers or _workers(_env("WORKERS") or "2")
        metrics_addr = args.metrics_bind_address or _address(_env("METRICS_BIND_ADDRESS") or ":8080")
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
        queue=QueueSettings(workers=workers),
        leader_election=LeaderElectionSettings(
            enabled=leader_elect,
            namespace=args.leader_election_namespace or _env("LEADER_ELECTION_NAMESPACE") or own_namespace,
        ),
        servers=ServerSettings(metrics_bind_address=metrics_addr, health_probe_bind_address=health_addr),
        log=LogSettings(format="console" if fmt == "console" else "json", level=level),
        openstack=OpenStackSettings(nova_api_url=nova_api_url),
        shutdown_timeout=drain_timeout,
    )


def _from_env_or(flag: float | None, name: str, parse: Callable[[str], float], default: float) -> float:
    if flag is not None:
        return flag
    value = _env(name)
    if value is None:
        return default
    try:
        return parse(value)
    except argparse.ArgumentTypeError as exc:
        raise ValueError(f"{ENV_PREFIX}{name}: {exc}") from None


def main(argv: Sequence[str] | None = None, controllers: Sequence[ControllerFactory] | None = None) -> int:
    """Entry point of ``nova-operator`` and ``python -m nova_operator``; returns the exit code."""
    from nova_operator import controllers as registry
    from nova_operator.manager import run

    try:
        settings = parse_settings(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    log.configure(fmt=settings.log.format, level=settings.log.level)
    factories = list(controllers) if controllers is not None else registry.factories(settings)
    try:
        asyncio.run(run(settings, factories))
    except KeyboardInterrupt:
        return 130
    except ConfigError as exc:
        return _fail(f"no usable Kubernetes configuration: {exc}")
    except KubeError as exc:
        return _fail(f"cannot reach the Kubernetes API server: {exc}")
    except LeaderElectionLost as exc:
        return _fail(f"lost the leader election lease {exc}; exiting")
    except (CacheSyncTimeout, ControllerStopped) as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot serve: {exc}")
    return 0


def _fail(message: str) -> int:
    print(f"{PROG}: error: {' '.join(message.split())}", file=sys.stderr)
    return 1
