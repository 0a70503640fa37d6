"""``python -m bench run|floor|writes|compare|show|real|pools|lease-load`` (PYTHONPATH=tools; the
binaries from ENVTEST_BIN).

``run`` measures the operator against the floor (``floor``: the same children created by a plain
client) taken on the same machine just before it, unless ``--floor FILE`` names a floor run to use
(or ``--no-floor``); its headline is the ratio of the two. ``pools`` measures one Nova with P pools
of N nodes (``bench.pools``).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from collections.abc import Sequence
from typing import Any

from bench import hogs, lease_load, report, writes
from bench.floor import FloorOptions, floor
from bench.run import Options, run


def _floor(opts: FloorOptions, out: pathlib.Path) -> dict[str, Any]:
    """Run the floor, write its JSON to ``out`` and print its table."""
    found = floor(opts)
    out.write_text(json.dumps(found, indent=2, sort_keys=True) + "\n")
    print(report.floor_table(found))
    print(f"written: {out}", flush=True)
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="measure N Novas on a fresh simulated cluster")
    r.add_argument("--novas", "-n", type=int, default=10, help="how many Novas (default 10)")
    r.add_argument("--out", type=pathlib.Path, help="JSON file (default: bench-<N>.json)")
    r.add_argument("--workdir", type=pathlib.Path, help="cluster directory (default: a temp dir)")
    r.add_argument("--timeout", type=float, default=600.0, help="give up waiting for Ready after (s)")
    r.add_argument("--idle", type=float, default=60.0, help="idle stretch measured (s, default 60)")
    r.add_argument(
        "--floor",
        type=pathlib.Path,
        metavar="FILE",
        help="a `bench floor` JSON to compare with (default: run it first)",
    )
    r.add_argument("--no-floor", action="store_true", help="neither run nor read a floor (no ratio)")
    r.add_argument("operator_args", nargs="*", help="flags for the operator, after --")
    f = sub.add_parser(
        "floor", help="the same children created by a plain client: what the cluster alone needs"
    )
    f.add_argument("--novas", "-n", type=int, default=10, help="how many namespaces (default 10)")
    f.add_argument("--out", type=pathlib.Path, help="JSON file (default: bench-floor-<N>.json)")
    f.add_argument("--workdir", type=pathlib.Path, help="cluster directory (default: a temp dir)")
    f.add_argument("--timeout", type=float, default=600.0, help="give up waiting after (s)")
    f.add_argument("--apply", action="store_true", help="server-side apply, as the operator sends them")
    w = sub.add_parser(
        "writes", help="API-server CPU per write: a Nova's (with and without CEL), a ConfigMap's"
    )
    w.add_argument("--count", type=int, default=300, help="writes of each sort (default 300)")
    w.add_argument("--novas", "-n", type=int, default=100, help="Novas the budget line is for (default 100)")
    w.add_argument("--out", type=pathlib.Path, default=pathlib.Path("bench-writes.json"))
    c = sub.add_parser("compare", help="two runs' JSON side by side")
    c.add_argument("a", type=pathlib.Path)
    c.add_argument("b", type=pathlib.Path)
    s = sub.add_parser("show", help="print a run's table again")
    s.add_argument("file", type=pathlib.Path)
    real = sub.add_parser("real", help="the minimal sample's bring-up on the real-Nova tier")
    real.add_argument("--out", type=pathlib.Path, default=pathlib.Path("bench-real.json"))
    real.add_argument("--timeout", type=float, default=600.0, help="give up waiting for Ready after (s)")
    real.add_argument(
        "--hogs",
        type=int,
        nargs="?",
        const=hogs.DEFAULT,
        default=0,
        help=f"CPU hogs beside the bring-up (--hogs alone: one per core, {hogs.DEFAULT})",
    )
    pools = sub.add_parser("pools", help="one Nova, P NovaCompute pools of N kwok nodes each")
    pools.add_argument("--pools", "-p", type=int, default=20, help="how many pools (default 20)")
    pools.add_argument("--nodes", "-n", type=int, default=50, help="nodes per pool (default 50)")
    pools.add_argument("--out", type=pathlib.Path, default=pathlib.Path("bench-pools.json"))
    pools.add_argument("--workdir", type=pathlib.Path, help="cluster directory (default: a temp dir)")
    pools.add_argument("--timeout", type=float, default=900.0, help="give up waiting for Ready after (s)")
    pools.add_argument("--idle", type=float, default=60.0, help="each idle stretch measured (s, default 60)")
    pools.add_argument("--joins", type=int, default=20, help="nodes joined one after another (default 20)")
    pools.add_argument("--join-timeout", type=float, default=180.0, help="wait per join (s, default 180)")
    pools.add_argument(
        "--join-gap",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait after each join before the next (default 0: back to back; 30 or more: each join on "
        "its own, clear of the previous discover-hosts Job's 30 s)",
    )
    pools.add_argument("--drain", type=int, default=50, help="nodes unlabelled at once (default 50)")
    pools.add_argument("operator_args", nargs="*", help="flags for the operator, after --")
    s2 = sub.add_parser("show-pools", help="print a `bench pools` run's table again")
    s2.add_argument("file", type=pathlib.Path)
    lease_load.add_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "lease-load":
        return int(args.func(args))
    if args.command == "pools":
        if args.pools < 1 or args.nodes < 1:
            parser.error("--pools and --nodes must be at least 1")
        from bench.pools import PoolsOptions
        from bench.pools import run as run_pools

        result = run_pools(
            PoolsOptions(
                pools=args.pools,
                nodes=args.nodes,
                out=args.out,
                workdir=args.workdir,
                timeout=args.timeout,
                idle=args.idle,
                joins=args.joins,
                join_timeout=args.join_timeout,
                join_gap=args.join_gap,
                drain=args.drain,
                operator_args=list(args.operator_args),
            )
        )
        print(report.pools_table(result))
        print(report.pools_details(result))
        print(json.dumps(result, sort_keys=True))
        print(f"written: {args.out}; logs and the audit log: {result['run']['workdir']}")
        return 0 if result["converged"] else 1
    if args.command == "show-pools":
        result = json.loads(args.file.read_text())
        print(report.pools_table(result))
        print(report.pools_details(result))
        return 0
    if args.command == "real":
        from bench import real as real_bench  # the real tier's imports only when asked for

        print(real_bench.report(real_bench.run(args.out, args.timeout, args.hogs)))
        print(f"written: {args.out}")
        return 0
    if args.command == "run":
        if args.novas < 1:
            parser.error("--novas must be at least 1")
        out = args.out or pathlib.Path(f"bench-{args.novas}.json")
        found: dict[str, Any] | None = None
        source = ""
        if args.floor is not None:
            found, source = json.loads(args.floor.read_text()), str(args.floor)
        elif not args.no_floor:
            floor_out = out.with_name(f"bench-floor-{args.novas}.json")
            found, source = (
                _floor(FloorOptions(novas=args.novas, timeout=args.timeout), floor_out),
                str(floor_out),
            )
        result = run(
            Options(
                novas=args.novas,
                out=out,
                workdir=args.workdir,
                timeout=args.timeout,
                idle=args.idle,
                operator_args=list(args.operator_args),
                floor=found,
                floor_source=source,
            )
        )
        print(f"headline: {report.headline(result)}")
        print(report.table(result))
        print(report.details(result))
        print(f"written: {out}; logs and the audit log: {result['run']['workdir']}")
        print(f"headline: {report.headline(result)}")
        return 0 if result["converged"] else 1
    if args.command == "floor":
        if args.novas < 1:
            parser.error("--novas must be at least 1")
        out = args.out or pathlib.Path(f"bench-floor-{args.novas}.json")
        found = _floor(
            FloorOptions(novas=args.novas, workdir=args.workdir, timeout=args.timeout, apply=args.apply), out
        )
        return 0 if found["finished"] else 1
    if args.command == "writes":
        if args.count < 1:
            parser.error("--count must be at least 1")
        measured = writes.writes(writes.WritesOptions(count=args.count, novas=args.novas))
        args.out.write_text(json.dumps(measured, indent=2, sort_keys=True) + "\n")
        print(writes.table(measured))
        print(f"written: {args.out}")
        return 0
    if args.command == "compare":
        a, b = json.loads(args.a.read_text()), json.loads(args.b.read_text())
        print(report.compare(a, b, (args.a.stem, args.b.stem)))
        return 0
    result = json.loads(args.file.read_text())
    print(f"headline: {report.headline(result)}")
    print(report.table(result))
    print(report.details(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
