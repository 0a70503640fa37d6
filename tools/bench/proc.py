"""RSS and CPU time of a process, from /proc (Linux)."""

from __future__ import annotations

import os
import pathlib

MIB = 1024 * 1024


def _status(pid: int, key: str) -> float:
    """A ``kB`` field of /proc/<pid>/status in MiB (0 when the process is gone)."""
    try:
        for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024 / MIB
    except OSError:
        pass
    return 0.0


def rss(pid: int) -> float:
    return _status(pid, "VmRSS")


def rss_peak(pid: int) -> float:
    return _status(pid, "VmHWM")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process used so far."""
    try:
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of stat(5)
    return (utime + stime) / os.sysconf("SC_CLK_TCK")
