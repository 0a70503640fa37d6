"""Run a plan's stages: the stages of a lane one after another, the lanes side by side.

Each stage is a command whose stdout and stderr go to its own log, ``<logs>/<key>.log``; what is
printed is one line per finished stage with its seconds, and for a failed one the log's path and
tail. A failure stops the other lanes' running stages and starts no new one. So does Ctrl-C (or
SIGTERM): every running stage's process group gets SIGTERM (SIGKILL after ``grace`` seconds).
Nothing here deletes anything: what a finished stage built (a cache) stays, and the build scripts
write theirs under a temporary name first, so a stopped one leaves no half-built cache in use.

Standard library only: it runs with the machine's ``python3`` before ``.venv`` exists.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

TAIL_LINES = 40


@dataclass(frozen=True)
class Stage:
    key: str  # short and unique in its plan: its log is <logs>/<key>.log
    title: str  # what its progress line says
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)  # added to the runner's environment
    needs: tuple[str, ...] = ()  # keys of stages (in other lanes) that must have succeeded first
    output: bool = False  # its stdout is its result (kept in <logs>/<key>.out, not in the log)


@dataclass
class Outcome:
    outputs: dict[str, str] = field(default_factory=dict)  # key -> stripped stdout, ``output`` stages
    seconds: dict[str, float] = field(default_factory=dict)  # key -> wall time, finished stages
    # key -> CPU time (user + system) of the stage and every process it waited for: the work, which
    # a busy machine does not inflate as it does the wall time
    cpu_seconds: dict[str, float] = field(default_factory=dict)
    failed: str | None = None  # the first stage that failed
    interrupted: bool = False

    @property
    def ok(self) -> bool:
        return self.failed is None and not self.interrupted


def _on_sigterm(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM stops the stages as Ctrl-C does


class Runner:
    def __init__(
        self,
        lanes: Sequence[Sequence[Stage]],
        logs: Path,
        *,
        cwd: Path | None = None,
        out: TextIO = sys.stdout,
        grace: float = 20.0,
    ) -> None:
        keys = [s.key for lane in lanes for s in lane]
        if len(set(keys)) != len(keys):
            raise ValueError(f"stage keys repeat: {keys}")
        self.lanes = [list(lane) for lane in lanes]
        self.logs = logs
        self.cwd = cwd
        self.out = out
        self.grace = grace
        self.total = len(keys)
        self.outcome = Outcome()
        self._lock = threading.Condition()
        self._stop = False
        self._running: dict[str, subprocess.Popen[bytes]] = {}
        self._succeeded: set[str] = set()
        self._ended: set[str] = set()
        self._finished = 0

    # -- the plan --------------------------------------------------------------------------

    def run(self) -> Outcome:
        self.logs.mkdir(parents=True, exist_ok=True)
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
        threads = [
            threading.Thread(target=self._lane, args=(lane,), name=f"lane-{i}", daemon=True)
            for i, lane in enumerate(self.lanes)
        ]
        try:
            for t in threads:
                t.start()
            for t in threads:
                while t.is_alive():
                    t.join(0.2)
        except KeyboardInterrupt:
            self.outcome.interrupted = True
            stopped = self._stop_all()
            self._join(threads)
            names = ", ".join(stopped) or "none"
            self._say(
                f"interrupted: stopped the running stages ({names}); what finished stays cached; "
                f"logs in {self.logs}"
            )
        finally:
            signal.signal(signal.SIGTERM, previous)
        return self.outcome

    def _lane(self, lane: Sequence[Stage]) -> None:
        for stage in lane:
            if not self._wait_for(stage):
                return
            if not self._run(stage):
                return

    def _wait_for(self, stage: Stage) -> bool:
        """Until every stage ``stage`` needs succeeded; False when one did not, or on a stop."""
        with self._lock:
            while True:
                if self._stop:
                    return False
                if all(n in self._succeeded for n in stage.needs):
                    return True
                if any(n in self._ended and n not in self._succeeded for n in stage.needs):
                    return False
                self._lock.wait()

    # -- one stage -------------------------------------------------------------------------

    def _run(self, stage: Stage) -> bool:
        log = self.logs / f"{stage.key}.log"
        result = self.logs / f"{stage.key}.out"
        env = {**os.environ, **stage.env}
        t0 = time.monotonic()
        with log.open("wb") as err, result.open("wb") if stage.output else err as out:
            with self._lock:
                if self._stop:
                    return False
                try:
                    proc = subprocess.Popen(
                        stage.argv,
                        stdout=out,
                        stderr=err,
                        stdin=subprocess.DEVNULL,
                        cwd=self.cwd,
                        env=env,
                        start_new_session=True,  # its own process group: stopped as a whole
                    )
                except OSError as exc:
                    err.write(f"{stage.argv[0]}: {exc}\n".encode())
                    proc = None
                if proc is not None:
                    self._running[stage.key] = proc
            rc, cpu = _wait(proc) if proc is not None else (127, 0.0)
        seconds = time.monotonic() - t0
        with self._lock:
            self._running.pop(stage.key, None)
            self._ended.add(stage.key)
            stopped = self._stop
            if rc == 0:
                self._succeeded.add(stage.key)
                self.outcome.seconds[stage.key] = seconds
                self.outcome.cpu_seconds[stage.key] = cpu
                if stage.output:
                    self.outcome.outputs[stage.key] = result.read_text().strip()
            elif not stopped:
                self._stop = True
                self.outcome.failed = stage.key
            self._lock.notify_all()
        if rc == 0:
            self._progress(f"{stage.title} ... {seconds:.0f} s (CPU {cpu:.0f} s)")
            return True
        if stopped:  # stopped by the runner: no failure of its own
            return False
        self._progress(f"{stage.title} ... FAILED after {seconds:.0f} s (exit {rc}); log: {log}")
        self._say(f"--- the last {TAIL_LINES} lines of {log} ---\n{_tail(log, TAIL_LINES)}")
        self._stop_all()
        return False

    # -- stopping --------------------------------------------------------------------------

    def _stop_all(self) -> list[str]:
        """SIGTERM to every running stage's process group; no stage starts after this."""
        with self._lock:
            self._stop = True
            self._lock.notify_all()
            running = dict(self._running)
        titles = {s.key: s.title for lane in self.lanes for s in lane}
        for proc in running.values():
            _signal_group(proc, signal.SIGTERM)
        return [titles[k] for k in running]

    def _join(self, threads: Sequence[threading.Thread]) -> None:
        deadline = time.monotonic() + self.grace
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            left = list(self._running.values())
        for proc in left:
            _signal_group(proc, signal.SIGKILL)
        for t in threads:
            t.join(5.0)

    # -- printing --------------------------------------------------------------------------

    def _progress(self, text: str) -> None:
        with self._lock:
            self._finished += 1
            width = max(2, len(str(self.total)))
            self._say(f"[{self._finished:>{width}}/{self.total}] {text}")

    def _say(self, text: str) -> None:
        print(text, file=self.out, flush=True)


def _wait(proc: subprocess.Popen[bytes]) -> tuple[int, float]:
    """The exit status (as ``Popen.returncode``) and the CPU seconds of ``proc`` and its waited-for
    descendants."""
    while True:
        try:
            _, status, usage = os.wait4(proc.pid, 0)
            break
        except InterruptedError:
            continue
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_utime + usage.ru_stime


def _signal_group(proc: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signum)


def _tail(path: Path, lines: int) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"(cannot read it: {exc})"
    return "\n".join(text.splitlines()[-lines:])
