"""Ends what real nodes leave when the process that started them dies without stopping them.

``python -m realnode.janitor TRACES_FILE`` reads its stdin, a pipe whose write end only the nodes'
owner holds, until end of file: the owner closed it (``RealNodes.stop()``, after its own cleanup) or
died, even by SIGKILL. It then kills every process the traces file names by namespace or cgroup and
removes the cgroups (``realnode.cleanup.sweep``). Needed because the parent-death signal reaches the
processes the owner started, but not containerd's shims or the containers, which would keep the
network namespace and the cgroups.
"""

from __future__ import annotations

import pathlib
import sys

from realnode.cleanup import Traces, sweep


def main(argv: list[str]) -> int:
    traces_file = pathlib.Path(argv[0])
    while sys.stdin.buffer.read(65536):
        pass
    if traces_file.exists():
        sweep(Traces.load(traces_file))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
