"""The one launcher of the operator as its own process, for ``make run``, the tests and the benchmarks.

``operator_argv`` is its command line against a cluster the tools started: ``python -m
nova_operator`` with the handle's kubeconfig and its ``operator`` context (the operator's
ServiceAccount), metrics and probes on loopback ports, JSON logs, then the caller's flags (a later
flag wins). ``start_operator`` spawns that next to the cluster (``SimHandle.spawn``: its log in the
work directory, stopped with the cluster) and returns an ``Operator``, the process and its ports;
``wait_leading`` waits until it holds the Lease (its leader gauge reads 1).
"""

from __future__ import annotations

import pathlib
import sys
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from simcluster.platform.controlplane import free_port
from simcluster.platform.process import ManagedProcess

PROGRAM = ("-m", "nova_operator")
LEADER_GAUGE = "nova_operator_leader_election_master_status"


class Cluster(Protocol):
    """What the launcher needs of a ``SimHandle``."""

    @property
    def kubeconfig(self) -> pathlib.Path: ...

    def spawn(
        self,
        name: str,
        argv: list[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: pathlib.Path | None = None,
    ) -> ManagedProcess: ...


def operator_argv(
    handle: Cluster,
    metrics_port: int,
    *args: str,
    health_port: int | None = None,
    kubeconfig: pathlib.Path | None = None,
    program: tuple[str, ...] = PROGRAM,
) -> list[str]:
    """The operator's command line against this cluster, as its ServiceAccount (``args`` appended)."""
    return [
        sys.executable, *program,
        "--kubeconfig", str(kubeconfig or handle.kubeconfig), "--context", "operator",
        "--metrics-bind-address", f"127.0.0.1:{metrics_port}",
        "--health-probe-bind-address", f"127.0.0.1:{health_port or free_port()}",
        "--log-format", "json",
        *args,
    ]  # fmt: skip


@dataclass
class Operator:
    """An operator process ``start_operator`` started, and where it serves."""

    process: ManagedProcess
    metrics_port: int
    health_port: int
    started: float = field(default_factory=time.monotonic)
    led_after: float = 0.0  # seconds from the start until it held the Lease (set by ``wait_leading``)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.health_port}"

    def metrics(self, timeout: float = 5.0) -> str:
        """The text of its /metrics (``OSError`` while it does not answer)."""
        with urllib.request.urlopen(self.metrics_url, timeout=timeout) as resp:
            return str(resp.read().decode())


def start_operator(
    handle: Cluster,
    name: str,
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: pathlib.Path | None = None,
    kubeconfig: pathlib.Path | None = None,
    program: tuple[str, ...] = PROGRAM,
) -> Operator:
    """``operator_argv`` (``args`` appended) run next to the cluster under ``name``."""
    metrics, health = free_port(), free_port()
    argv = operator_argv(handle, metrics, *args, health_port=health, kubeconfig=kubeconfig, program=program)
    return Operator(handle.spawn(name, argv, env=env, cwd=cwd), metrics, health)


def leading(metrics_text: str) -> bool:
    """Whether /metrics says this replica holds the Lease."""
    return any(
        line.startswith(LEADER_GAUGE) and float(line.rpartition(" ")[2]) >= 1
        for line in metrics_text.splitlines()
    )


def wait_leading(op: Operator, within: float) -> float:
    """Until ``op`` holds the Lease; the seconds since its start. ``RuntimeError`` with its log's
    tail when it exits or does not lead within ``within`` seconds."""
    deadline = op.started + within
    while True:
        if not op.process.alive:
            raise RuntimeError(f"the operator exited:\n{op.process.output(4000)}")
        try:
            if leading(op.metrics()):
                op.led_after = time.monotonic() - op.started
                return op.led_after
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the operator did not become leader in {within:.0f} s:\n{op.process.output(4000)}"
            )
        time.sleep(0.5)
