"""``ctr tasks ps``'s table read into the host PIDs of a container's processes."""

from __future__ import annotations

from simcluster.realtier.container_pids import parse_tasks_ps


def test_every_pid_of_the_table_and_nothing_of_its_header() -> None:
    table = "PID      INFO\n4242     -\n4250     -\n\n"
    assert parse_tasks_ps(table) == [4242, 4250]
    assert parse_tasks_ps("PID    INFO\n") == []
