"""Child processes of the real backing services: spawned, logged, waited for, stopped.

Every service runs as a plain host process (no systemd: Debian's package scripts start nothing here),
in a process group of its own, with the parent-death signal of the control plane's children, so a
killed launcher leaves no server behind. State and logs live in the service's work directory.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from simcluster.controlplane import DEATH_SIGNAL


class ServiceError(RuntimeError):
    """A backing service failed to start, exited early or refused a command."""


@dataclass
class Child:
    """One long-running process of a service, its log in ``log``."""

    name: str
    popen: subprocess.Popen[bytes]
    log: pathlib.Path

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, nbytes: int = 4000) -> str:
        try:
            data = self.log.read_bytes()[-nbytes:]
        except FileNotFoundError:
            return ""
        return data.decode(errors="replace")

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM to the whole process group, SIGKILL after ``grace`` seconds."""
        if self.popen.poll() is not None:
            return
        _signal_group(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(grace)
        except subprocess.TimeoutExpired:
            _signal_group(self.popen.pid, signal.SIGKILL)
            self.popen.wait()
        # children that outlived their leader (a forked helper) go with the group
        _signal_group(self.popen.pid, signal.SIGKILL)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


@dataclass
class Spawner:
    """Starts children in ``workdir`` and remembers them for ``stop_all``."""

    workdir: pathlib.Path
    children: list[Child] = field(default_factory=list)

    def spawn(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: pathlib.Path | None = None,
    ) -> Child:
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = self.workdir / f"{name}.log"
        full_env = {**os.environ, **(env or {})}
        with log.open("ab") as fh:
            popen = subprocess.Popen(
                [*DEATH_SIGNAL, *argv],
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=full_env,
                cwd=cwd or self.workdir,
            )
        child = Child(name, popen, log)
        self.children.append(child)
        return child

    def stop_all(self) -> None:
        for child in reversed(self.children):
            child.stop()
        self.children.clear()


@dataclass
class ServerProcess:
    """A server run as one child (and its process group) in ``workdir``: ``alive`` and ``stop``."""

    workdir: pathlib.Path
    _spawner: Spawner = field(init=False)
    _child: Child | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._spawner = Spawner(self.workdir)

    @property
    def alive(self) -> bool:
        return self._child is not None and self._child.alive

    def stop(self) -> None:
        self._spawner.stop_all()
        self._child = None


def run(argv: Sequence[str], *, env: Mapping[str, str] | None = None, timeout: float = 120.0) -> str:
    """Run a short command; its standard output, or ``ServiceError`` with its output on failure.

    In a session of its own: the Ctrl-C that stops ``make run`` reaches the terminal's whole process
    group, and a command in flight (a stand-in's ``rabbitmqctl``) would die of it with a traceback,
    instead of finishing before the stand-ins stop and the servers with them."""
    proc = subprocess.run(
        list(argv),
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=timeout,
        check=False,
        start_new_session=True,
    )
    out = proc.stdout.decode(errors="replace")
    if proc.returncode != 0:
        raise ServiceError(f"{argv[0]} exited {proc.returncode}: {out[-2000:]}")
    return out


def wait_until(
    ready: Callable[[], bool], child: Child, *, what: str, timeout: float, interval: float = 0.2
) -> None:
    """Poll ``ready`` until it holds; fail at once when ``child`` exits, with its log's tail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not child.alive:
            raise ServiceError(f"{what} exited with {child.popen.returncode}:\n{child.tail()}")
        if ready():
            return
        time.sleep(interval)
    raise ServiceError(f"{what} not ready after {timeout:.0f} s:\n{child.tail()}")
