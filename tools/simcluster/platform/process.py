"""The one wrapper of the processes the tools start: spawned, logged, waited for, stopped.

``spawn`` runs a program in a session (process group) of its own under the parent-death signal
(``DEATH_SIGNAL``: a killed launcher leaves nothing behind), stdin closed, stdout and stderr
appended to ``<log_dir>/<name>.log``. ``ManagedProcess`` is its handle: ``alive``, ``output`` (the
log's tail), ``stop`` (SIGTERM to the group, SIGKILL after a grace period, then to whatever is left
of the group), ``kill``. ``wait_until`` polls a readiness check and fails at once, with the log's
tail, when the process exits. ``Processes`` remembers what it spawned and stops it newest first.
Used by the control plane, ``SimHandle.spawn`` (the operator and its replicas), Prometheus, the
real tier's servers and ``tools/realnode`` (containerd, kubelets, kube-proxy, its helpers).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

# Children get SIGKILL when the process that started them dies, however it dies (util-linux).
DEATH_SIGNAL: list[str] = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []


class ProcessError(RuntimeError):
    """A process exited before it was ready, or did not become ready in time."""


@dataclass
class ManagedProcess:
    """A process started by ``spawn``, its output in ``log``."""

    name: str
    popen: subprocess.Popen[bytes]
    log: pathlib.Path
    killed: bool = False  # ``stop`` had to SIGKILL it

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL, as a crash or an evicted pod would end it."""
        if self.alive:
            _signal_group(self.popen.pid, signal.SIGKILL)
            self.popen.wait()

    def stop(self, grace: float = 10.0) -> int | None:
        """SIGTERM to the process group, SIGKILL after ``grace`` seconds; returns the exit code."""
        if self.popen.poll() is not None:
            return self.popen.returncode
        _signal_group(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(grace)
        except subprocess.TimeoutExpired:
            _signal_group(self.popen.pid, signal.SIGKILL)
            self.popen.wait()
            self.killed = True
        # children that outlived their leader (a forked helper) go with the group
        _signal_group(self.popen.pid, signal.SIGKILL)
        return self.popen.returncode

    def output(self, tail_bytes: int = 20_000) -> str:
        """The tail of the process's log ("" before it wrote one)."""
        try:
            return self.log.read_bytes()[-tail_bytes:].decode(errors="replace")
        except FileNotFoundError:
            return ""


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def spawn(
    name: str,
    argv: Sequence[str],
    log_dir: pathlib.Path,
    *,
    env: Mapping[str, str] | None = None,
    inherit_env: bool = True,
    cwd: pathlib.Path | None = None,
) -> ManagedProcess:
    """Start ``argv`` (see the module docstring) with this process's environment and ``env`` on top
    (``inherit_env=False``: exactly ``env``, as a pod's process gets it)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{name}.log"
    full_env = {**os.environ, **(env or {})} if inherit_env else dict(env or {})
    with log.open("ab") as fh:
        popen = subprocess.Popen(
            [*DEATH_SIGNAL, *argv],
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=full_env,
            cwd=cwd,
            start_new_session=True,
        )
    return ManagedProcess(name, popen, log)


def wait_until(
    ready: Callable[[], bool],
    proc: ManagedProcess,
    *,
    what: str,
    timeout: float,
    interval: float = 0.2,
    error: type[Exception] = ProcessError,
) -> None:
    """Poll ``ready`` until it holds; ``error`` at once when ``proc`` exits, with its log's tail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proc.alive:
            raise error(f"{what} exited with {proc.popen.returncode}:\n{proc.output(4000)}")
        if ready():
            return
        time.sleep(interval)
    raise error(f"{what} not ready after {timeout:.0f} s:\n{proc.output(4000)}")


@dataclass
class Processes:
    """The processes spawned into one log directory, stopped newest first by ``stop_all``."""

    log_dir: pathlib.Path
    cwd: pathlib.Path | None = None  # where each process runs unless its spawn says otherwise
    running: list[ManagedProcess] = field(default_factory=list)

    def spawn(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        inherit_env: bool = True,
        cwd: pathlib.Path | None = None,
    ) -> ManagedProcess:
        proc = spawn(name, argv, self.log_dir, env=env, inherit_env=inherit_env, cwd=cwd or self.cwd)
        self.running.append(proc)
        return proc

    def stop_all(self, grace: float = 10.0) -> dict[str, float]:
        """Stop every process, newest first; seconds each took ("<name> (SIGKILL)" when killed)."""
        took: dict[str, float] = {}
        for proc in reversed(self.running):
            t0 = time.monotonic()
            proc.stop(grace)
            took[f"{proc.name} (SIGKILL)" if proc.killed else proc.name] = time.monotonic() - t0
        self.running.clear()
        return took
