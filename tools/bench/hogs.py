"""CPU hogs beside a measurement: busy processes, one per core by default (``--hogs``)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

DEFAULT = os.cpu_count() or 2


@contextlib.contextmanager
def running(count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` busy Python processes for the duration of the block, killed and reaped after it."""
    hogs: list[subprocess.Popen[bytes]] = []
    try:
        hogs.extend(subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count))
        yield hogs
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def load_average() -> float:
    """The one-minute load average of the machine."""
    return os.getloadavg()[0]
