"""``python -m realnode up [--nodes N] [--workdir DIR]``: the project's control plane with N real nodes,
until Ctrl-C (or SIGTERM), which stops everything and leaves nothing behind.

The printed kubeconfig works from the host (the API server listens on its loopback), logs and exec
included; pods use ``realnode.local/busybox:1`` with ``imagePullPolicy: Never`` and reach Services by
name (``realnode.dns``). Prints ``stopped`` last.
"""

from __future__ import annotations

import argparse
import pathlib
import signal
import sys
import tempfile
from types import FrameType

from simcluster import SimCluster, find_binaries

from realnode import BUSYBOX_IMAGE, RealNodes, busybox_image
from realnode.access import KubeletAccess
from realnode.dns import DNS_IP


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def up(nodes: int, workdir: pathlib.Path) -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    access = KubeletAccess(workdir / "access")  # kubectl logs, exec and port-forward
    cluster = SimCluster(
        workdir / "control-plane", find_binaries(), extra_apiserver_args=access.prepare(), kwok=False
    )
    real: RealNodes | None = None
    try:
        cluster.start()
        real = RealNodes(
            cluster, workdir / "nodes", count=nodes, image_specs=[busybox_image()], access=access
        ).start()
        assert real.netns_holder is not None
        print(
            f"{nodes} real node(s) Ready in {real.startup_seconds:.1f} s: "
            f"{', '.join(n.name for n in real.nodes)}\n"
            f"  export KUBECONFIG={cluster.kubeconfig}\n"
            f"  image: {BUSYBOX_IMAGE} (imagePullPolicy: Never)\n"
            f"  cluster DNS: {DNS_IP} (CoreDNS answered {real.dns_seconds:.1f} s after the nodes' Ready)\n"
            f"  the nodes' network namespace: nsenter --net=/proc/{real.netns_holder.pid}/ns/net\n"
            f"  logs: {workdir}\n"
            "Ctrl-C stops everything",
            flush=True,
        )
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        # a second Ctrl-C (a terminal sends it to the whole group) must not cut the cleanup short
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if real is not None:
            real.stop()
        cluster.stop()
        print("stopped", flush=True)
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m realnode")
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("up", help="a control plane with real nodes until Ctrl-C")
    start.add_argument("--nodes", type=int, default=1)
    start.add_argument("--workdir", type=pathlib.Path, default=None)
    args = parser.parse_args(argv)
    workdir = args.workdir or pathlib.Path(tempfile.mkdtemp(prefix="realnode-"))
    return up(args.nodes, workdir)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
