"""The real backing services' processes: ``platform.process``'s wrapper, failing with ``ServiceError``.

Every service runs as a plain host process (no systemd: Debian's package scripts start nothing here),
in a process group of its own, with the parent-death signal of the control plane's children, so a
killed launcher leaves no server behind. State and logs live in the service's work directory.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from simcluster.platform import process
from simcluster.platform.process import ManagedProcess, ProcessError, Processes


class ServiceError(ProcessError):
    """A backing service failed to start, exited early or refused a command."""


@dataclass
class ServerProcess:
    """A server run as one child (and its process group) in ``workdir``: ``alive`` and ``stop``."""

    workdir: pathlib.Path
    _spawner: Processes = field(init=False)
    _child: ManagedProcess | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._spawner = Processes(self.workdir, cwd=self.workdir)

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
    ready: Callable[[], bool], child: ManagedProcess, *, what: str, timeout: float, interval: float = 0.2
) -> None:
    """``process.wait_until`` failing with ``ServiceError``."""
    process.wait_until(ready, child, what=what, timeout=timeout, interval=interval, error=ServiceError)
