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


def machine_ticks() -> tuple[int, int]:
    """(busy, total) CPU ticks of the whole machine so far, from /proc/stat (idle and iowait are idle)."""
    fields = [int(f) for f in pathlib.Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


class CpuWindow:
    """CPU seconds each named process used, and how busy the machine was, between ``start`` and ``stop``."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self._cpu0: dict[str, float] = {}
        self._ticks0 = (0, 0)
        self.seconds: dict[str, float] = {}
        self.machine_busy = 0.0

    def start(self) -> None:
        self._cpu0 = {name: cpu_seconds(pid) for name, pid in self.pids.items()}
        self._ticks0 = machine_ticks()

    def stop(self) -> dict[str, float]:
        self.seconds = {
            name: round(cpu_seconds(pid) - self._cpu0[name], 2) for name, pid in self.pids.items()
        }
        busy, total = machine_ticks()
        spent = total - self._ticks0[1]
        self.machine_busy = round((busy - self._ticks0[0]) / spent, 3) if spent else 0.0
        return self.seconds
