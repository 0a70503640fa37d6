"""``ctr tasks ps``'s table read into the host PIDs of a container's processes."""

from __future__ import annotations

import signal
import subprocess

from simcluster.realtier.container_pids import parse_tasks_ps, send


def test_every_pid_of_the_table_and_nothing_of_its_header() -> None:
    table = "PID      INFO\n4242     -\n4250     -\n\n"
    assert parse_tasks_ps(table) == [4242, 4250]
    assert parse_tasks_ps("PID    INFO\n") == []


def test_send_signals_each_process_and_skips_one_that_ended() -> None:
    ended = subprocess.Popen(["true"])
    ended.wait()
    running = subprocess.Popen(["sleep", "60"])
    send([ended.pid, running.pid], signal.SIGKILL)
    assert running.wait(timeout=10) == -signal.SIGKILL
