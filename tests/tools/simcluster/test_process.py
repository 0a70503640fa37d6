"""The one process wrapper (``simcluster.platform.process``): logs, group-wide stop, readiness waits."""

from __future__ import annotations

import os
import pathlib
import sys
import time

import pytest
from simcluster.platform.process import ProcessError, Processes, spawn, wait_until


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie of an exited child still answers kill(0): read its state
    stat = pathlib.Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().rpartition(")")[2].split()[0] == "Z"


def test_output_goes_to_the_log_named_for_the_process(tmp_path: pathlib.Path) -> None:
    proc = spawn("echo", [sys.executable, "-c", "print('hello'); import sys; sys.exit(3)"], tmp_path)
    assert proc.popen.wait(30) == 3
    assert proc.log == tmp_path / "echo.log"
    assert proc.output() == "hello\n"
    assert not proc.alive


def test_the_environment_is_inherited_with_the_callers_on_top_unless_asked_not_to(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TT_INHERITED", "yes")
    code = "import os; print(os.environ.get('TT_INHERITED'), os.environ.get('TT_GIVEN'))"
    inherited = spawn("a", [sys.executable, "-c", code], tmp_path, env={"TT_GIVEN": "1"})
    alone = spawn("b", [sys.executable, "-c", code], tmp_path, env={"TT_GIVEN": "2"}, inherit_env=False)
    inherited.popen.wait(30)
    alone.popen.wait(30)
    assert inherited.output() == "yes 1\n"
    assert alone.output() == "None 2\n"


def test_stop_ends_the_whole_group_and_kills_what_ignores_sigterm(tmp_path: pathlib.Path) -> None:
    # a leader that ignores SIGTERM and a child of its own that does too
    code = (
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "child = subprocess.Popen([sys.executable, '-c', "
        "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = spawn("stubborn", [sys.executable, "-c", code], tmp_path)
    wait_until(lambda: proc.output().strip().isdigit(), proc, what="stubborn", timeout=30)
    child = int(proc.output())
    assert proc.stop(grace=0.5) is not None
    assert proc.killed
    deadline = time.monotonic() + 10
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(child)


def test_a_process_that_exits_on_sigterm_is_not_marked_killed(tmp_path: pathlib.Path) -> None:
    proc = spawn("polite", [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path)
    assert proc.stop(grace=10) == -15
    assert not proc.killed


def test_wait_until_fails_at_once_with_the_log_tail_when_the_process_exits(tmp_path: pathlib.Path) -> None:
    proc = spawn("crash", [sys.executable, "-c", "print('bad config'); raise SystemExit(2)"], tmp_path)
    started = time.monotonic()
    with pytest.raises(ProcessError, match=r"crash exited with 2:\nbad config"):
        wait_until(lambda: False, proc, what="crash", timeout=120)
    assert time.monotonic() - started < 60  # not the timeout


def test_wait_until_raises_the_callers_error_after_the_timeout(tmp_path: pathlib.Path) -> None:
    class Mine(RuntimeError):
        pass

    proc = spawn("slow", [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path)
    try:
        with pytest.raises(Mine, match="slow not ready after 0 s"):
            wait_until(lambda: False, proc, what="slow", timeout=0.3, interval=0.05, error=Mine)
    finally:
        proc.stop()


def test_processes_stop_newest_first_and_report_each(tmp_path: pathlib.Path) -> None:
    procs = Processes(tmp_path)
    first = procs.spawn("first", [sys.executable, "-c", "import time; time.sleep(60)"])
    second = procs.spawn("second", [sys.executable, "-c", "import time; time.sleep(60)"])
    took = procs.stop_all()
    assert list(took) == ["second", "first"]
    assert not first.alive
    assert not second.alive
    assert procs.running == []
