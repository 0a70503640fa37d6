"""``python -m simcluster up``: start the simulated cluster and keep it until Ctrl-C;
``python -m simcluster run``: run the operator there (or against $KUBECONFIG), as `make run` does.

(PYTHONPATH=tools; the binaries come from ENVTEST_BIN or tools/envtest/build.sh.)
"""

from __future__ import annotations

import argparse
import os
import pathlib
import signal
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType

from simcluster.platform.launch import SERVICE_PASSWORD, SERVICE_USER, launch
from simcluster.run import run_against_kubeconfig, run_simulated, stop_keeping_logs

WORKDIR_HELP = (
    "directory for logs, kubeconfig and data (default: a new one in $TMPDIR); at exit everything in it "
    "but the logs is removed"
)


def _pools(values: Sequence[str]) -> dict[str, int]:
    out = {}
    for v in values:
        name, _, count = v.partition("=")
        if not name or not count.isdigit():
            raise argparse.ArgumentTypeError(f"--pool wants NAME=COUNT, got {v!r}")
        out[name] = int(count)
    return out


def cmd_up(args: argparse.Namespace) -> int:
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    # Ctrl-C and SIGTERM both end the wait below; the handle then stops every process.
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    t0 = time.monotonic()
    handle = launch(
        pathlib.Path(args.workdir) if args.workdir else None,
        nodes=args.nodes,
        pools=_pools(args.pool),
        standins=not args.no_standins,
        openstack=not args.no_openstack,
    )
    try:
        c = handle.cluster
        print(f"simulated cluster up in {time.monotonic() - t0:.1f} s (processes {c.startup_seconds:.1f} s)")
        print(f"  kubeconfig:  {c.kubeconfig}   (contexts: admin [current], operator)")
        print(f"  api server:  {c.server}")
        print(f"  logs:        {c.workdir}/*.log")
        for pool, names in handle.nodes.items():
            print(f"  nodes{' (pool ' + pool + ')' if pool else ''}: {', '.join(names) or '-'}")
        if handle.openstack is not None:
            o = handle.openstack
            print(f"  keystone:    {o.keystone_url}")
            print(f"               user {SERVICE_USER} / {SERVICE_PASSWORD}, project service, domain Default")
            print(f"  nova api:    {o.nova_url}/v2.1")
        print(f"try: KUBECONFIG={c.kubeconfig} kubectl get nodes    (Ctrl-C stops everything)")
        sys.stdout.flush()
        while not stop.wait(1.0):
            pass
    finally:
        stop_keeping_logs(handle)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    if os.environ.get("KUBECONFIG"):
        return run_against_kubeconfig(args.operator_args)
    if args.standins and args.operator_image:
        raise SystemExit("--operator-image is the chart's: not with --standins (the operator runs locally)")
    if args.local_operator and args.operator_image:
        raise SystemExit("--operator-image is the chart's: not with --local-operator")
    if bool(args.operator_image) != bool(args.operator_image_archive):
        raise SystemExit("--operator-image and --operator-image-archive go together")
    image = None
    if args.operator_image:
        image = (args.operator_image, pathlib.Path(args.operator_image_archive))
    return run_simulated(
        pathlib.Path(args.workdir) if args.workdir else None,
        args.operator_args,
        real=not args.standins,
        local_operator=args.local_operator,
        operator_image=image,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simcluster", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the simulated cluster and block until Ctrl-C")
    up.add_argument("--nodes", type=int, default=3, help="plain fake nodes (default 3)")
    up.add_argument("--pool", action="append", default=[], metavar="NAME=COUNT", help="fake nodes of a pool")
    up.add_argument("--workdir", help=WORKDIR_HELP)
    up.add_argument("--no-standins", action="store_true", help="no dependency CRDs and stand-in controllers")
    up.add_argument("--no-openstack", action="store_true", help="no fake Keystone/Nova API")
    up.set_defaults(func=cmd_up)
    run = sub.add_parser(
        "run",
        help="run the operator: against $KUBECONFIG, or on a local cluster of real nodes serving the real "
        "Nova, with the samples applied",
    )
    run.add_argument("--workdir", help=WORKDIR_HELP)
    mode = run.add_mutually_exclusive_group()
    mode.add_argument(
        "--standins",
        action="store_true",
        help="kwok nodes and the stand-ins instead of the real Nova (faster: nothing of Nova runs)",
    )
    mode.add_argument(
        "--local-operator",
        action="store_true",
        help="the operator as a local process (in the nodes' network, with the cluster's DNS), "
        "not installed by its Helm chart",
    )
    run.add_argument("--operator-image", help="the chart's image (REPOSITORY:TAG; default: built by opimage)")
    run.add_argument("--operator-image-archive", help="that image's OCI archive, imported into the nodes")
    run.add_argument("operator_args", nargs="*", help="flags for the operator, after --")
    run.set_defaults(func=cmd_run)
    args = parser.parse_args(argv)
    rc: int = args.func(args)
    return rc


if __name__ == "__main__":
    sys.exit(main())
