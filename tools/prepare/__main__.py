"""Build (or find cached) what a command needs, one line per stage, then run it.

    python3 -m prepare run [--standins | --local-operator] [--workdir DIR] [--python PY]
                           [-- OPERATOR_FLAGS]                                        # make run
    python3 -m prepare ci                                                             # .ci/run
    python3 -m prepare ci-later                                   # .ci/run, beside make test

``run`` prepares (see ``prepare.plans``) and then replaces itself with ``PY -m simcluster run``
(``PY``: ``.venv/bin/python``, which the plan makes; ``--python`` names another interpreter and
leaves ``.venv`` alone), with ``ENVTEST_BIN`` set to the binaries it found; with the operator by
its chart (the real Nova's default), ``DEPLOYTOOLS_BIN`` set to helm's directory and the operator
image it built handed on (``--operator-image``, ``--operator-image-archive``). ``ci`` prepares
what ``make test``'s first tiers use, ``ci-later`` the rest (``.ci/run`` runs it beside the tests).
Each stage's full output is in ``--logs`` (``.logs/make-run``, ``.ci/logs``); a failed stage's
log is printed with its path. Exit status: 1 when a stage failed, 130 when interrupted (Ctrl-C,
SIGTERM).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from prepare.plans import REPO, Lanes, ci_later_plan, ci_plan, run_plan
from prepare.runner import Outcome, Runner

GO_HOME = Path("/usr/local/go/bin")  # where this machine kind ships Go (.ci/run's note)


def prepare(name: str, lanes: Lanes, logs: Path) -> Outcome:
    count = sum(len(lane) for lane in lanes)
    busy = sum(1 for lane in lanes if lane)
    print(
        f"{name}: {count} stages, {busy} at a time; each stage's output goes to {logs}/<stage>.log",
        flush=True,
    )
    t0 = time.monotonic()
    outcome = Runner([lane for lane in lanes if lane], logs, cwd=REPO).run()
    if outcome.ok:
        cpu = sum(outcome.cpu_seconds.values())
        print(f"{name}: prepared in {time.monotonic() - t0:.0f} s (CPU {cpu:.0f} s)", flush=True)
    return outcome


def last_json(text: str) -> dict[str, str]:
    """The last JSON object of a stage's output that starts a line (``python -m opimage`` prints one;
    a tool it ran may have printed before it)."""
    starts = [m.start() for m in re.finditer(r"^\{", text, re.MULTILINE)]
    for start in reversed(starts):
        try:
            found = json.loads(text[start:])
        except ValueError:
            continue
        if isinstance(found, dict):
            return {str(k): str(v) for k, v in found.items()}
    raise ValueError(f"no JSON object in {text[-500:]!r}")


def _status(outcome: Outcome) -> int:
    return 130 if outcome.interrupted else 1


def cmd_run(args: argparse.Namespace) -> int:
    kubeconfig = bool(os.environ.get("KUBECONFIG"))
    lanes = run_plan(
        standins=args.standins,
        kubeconfig=kubeconfig,
        make_venv=args.python is None,
        chart=not args.local_operator,
    )
    outcome = prepare("make run", lanes, Path(args.logs))
    if not outcome.ok:
        return _status(outcome)
    python = args.python or str(REPO / ".venv" / "bin" / "python")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "tools"), env.get("PYTHONPATH")) if p)
    if "control-plane" in outcome.outputs:
        env["ENVTEST_BIN"] = outcome.outputs["control-plane"]
    if "deploytools" in outcome.outputs:
        env["DEPLOYTOOLS_BIN"] = outcome.outputs["deploytools"].splitlines()[-1]
    argv = [python, "-m", "simcluster", "run"]
    if args.standins:
        argv.append("--standins")
    if args.local_operator:
        argv.append("--local-operator")
    if "operator-image" in outcome.outputs:
        image = last_json(outcome.outputs["operator-image"])
        argv += ["--operator-image", image["ref"], "--operator-image-archive", image["archive"]]
    if args.workdir:
        argv += ["--workdir", args.workdir]
    argv += ["--", *args.operator_args]
    os.chdir(REPO)
    os.execve(python, argv, env)
    return 1  # not reached


CI_PLANS = {
    "ci": ("CI", ci_plan, "what make test's first tiers use (everything but kwok and prometheus)"),
    "ci-later": (
        "CI, beside the tests",
        ci_later_plan,
        "what only make test's last tiers use (kwok, prometheus)",
    ),
}
"""``.ci/run``'s two plans: command -> (name in the lines, plan, help)."""


def cmd_ci(args: argparse.Namespace) -> int:
    name, plan, _ = CI_PLANS[args.command]
    outcome = prepare(name, plan(), Path(args.logs))
    return 0 if outcome.ok else _status(outcome)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m prepare", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="what make run needs, then python -m simcluster run")
    mode = run.add_mutually_exclusive_group()
    mode.add_argument("--standins", action="store_true", help="kwok and the stand-ins, no Nova")
    mode.add_argument(
        "--local-operator",
        action="store_true",
        help="the operator as a local process (in the nodes' network) instead of by its Helm chart",
    )
    run.add_argument("--workdir", help="simcluster run's directory for logs, kubeconfig and data")
    run.add_argument("--python", help="run with this interpreter instead of making .venv")
    run.add_argument("--logs", default=str(REPO / ".logs" / "make-run"), help="the stages' logs")
    run.add_argument("operator_args", nargs="*", help="flags for the operator, after --")
    run.set_defaults(func=cmd_run)
    for command, (_, _, text) in CI_PLANS.items():
        ci = sub.add_parser(command, help=text)
        ci.add_argument("--logs", default=str(REPO / ".ci" / "logs"), help="the stages' logs")
        ci.set_defaults(func=cmd_ci)
    args = parser.parse_args(argv)
    if GO_HOME.is_dir() and str(GO_HOME) not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = f"{GO_HOME}{os.pathsep}{os.environ.get('PATH', '')}"
    rc: int = args.func(args)
    return rc


if __name__ == "__main__":
    sys.exit(main())
