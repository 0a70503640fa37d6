"""tools/prepare: the stages ``make run`` and CI build first, lanes side by side, one line per stage,
each stage's output in its own log; a failure or Ctrl-C stops the running stages, keeps what finished."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prepare.plans import ci_plan
from prepare.runner import Runner, Stage

REPO = Path(__file__).resolve().parents[3]


def sh(key: str, script: str, **kw: object) -> Stage:
    return Stage(key, f"stage {key}", ("sh", "-c", script), **kw)  # type: ignore[arg-type]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_lanes_run_side_by_side_with_one_line_per_stage_and_the_output_in_logs(tmp_path: Path) -> None:
    flag = tmp_path / "b-started"
    # a waits for b, which is in the other lane: done one lane after the other, a would time out
    a = sh(
        "a",
        f"echo noisy a; i=0; while [ ! -f {flag} ]; do i=$((i+1)); [ $i -gt 400 ] && exit 9; sleep 0.05; "
        "done",
    )
    spin = "import time; t = time.process_time()\nwhile time.process_time() - t < 0.3: pass"
    b = sh("b", f"touch {flag}; echo noisy b >&2; {sys.executable} -c '{spin}'")
    c = sh("c", "echo /the/result; echo to the log >&2", output=True)
    out = io.StringIO()
    outcome = Runner([[a, c], [b]], tmp_path / "logs", out=out).run()
    assert outcome.ok, out.getvalue()
    lines = out.getvalue().splitlines()
    assert len(lines) == 3, lines
    assert {re.sub(r"^\[ ?\d/3\] (stage \w) \.\.\. \d+ s \(CPU \d+ s\)$", r"\1", line) for line in lines} == {
        "stage a",
        "stage b",
        "stage c",
    }
    assert [line[:6] for line in lines] == ["[ 1/3]", "[ 2/3]", "[ 3/3]"]
    assert "noisy" not in out.getvalue()
    assert (tmp_path / "logs" / "a.log").read_text() == "noisy a\n"
    assert (tmp_path / "logs" / "b.log").read_text() == "noisy b\n"
    assert (tmp_path / "logs" / "c.log").read_text() == "to the log\n"
    assert outcome.outputs == {"c": "/the/result"}
    assert set(outcome.seconds) == set(outcome.cpu_seconds) == {"a", "b", "c"}
    assert outcome.cpu_seconds["b"] >= 0.3  # its grandchild's CPU counts


def test_a_failed_stage_prints_its_log_and_stops_the_other_lane(tmp_path: Path) -> None:
    pidfile = tmp_path / "slow.pid"
    slow = sh("slow", f"echo $$ > {pidfile}; exec sleep 120")
    after = sh("after", f"touch {tmp_path / 'after-ran'}")
    bad = sh("bad", f"while [ ! -s {pidfile} ]; do sleep 0.05; done; seq 1 100; echo the cause >&2; exit 3")
    out = io.StringIO()
    t0 = time.monotonic()
    outcome = Runner([[slow, after], [bad]], tmp_path / "logs", out=out, grace=5).run()
    assert time.monotonic() - t0 < 60  # the sleep was stopped, not waited for
    assert outcome.failed == "bad"
    assert not outcome.interrupted
    text = out.getvalue()
    log = tmp_path / "logs" / "bad.log"
    assert "stage bad ... FAILED after" in text
    assert f"(exit 3); log: {log}" in text
    assert text.rstrip().endswith("100\nthe cause"), text  # the tail, its last line last
    assert "\n60\n" not in text  # only the tail
    assert "stage slow" not in text  # stopped by the runner: no line of its own
    assert not _alive(int(pidfile.read_text()))
    assert not (tmp_path / "after-ran").exists()


def test_a_stage_waits_for_what_it_needs_and_does_not_run_when_that_failed(tmp_path: Path) -> None:
    mark = tmp_path / "first-done"
    first = sh("first", f"sleep 0.3; touch {mark}")
    second = sh("second", f"test -f {mark}", needs=("first",))
    assert Runner([[first], [second]], tmp_path / "ok", out=io.StringIO()).run().ok

    broken = sh("first", "exit 1")
    ran = tmp_path / "ran"
    waiting = sh("second", f"touch {ran}", needs=("first",))
    outcome = Runner([[broken], [waiting]], tmp_path / "failed", out=io.StringIO()).run()
    assert outcome.failed == "first"
    assert not ran.exists()


DRIVER = """
import sys
from pathlib import Path
from prepare.runner import Runner, Stage
tmp = Path(sys.argv[1])
lanes = [
    [Stage("done", "done", ("sh", "-c", f"echo built > {tmp}/cache"))],
    [Stage("long", "long", ("sh", "-c", f"sleep 0.5; echo $$ > {tmp}/long.pid; exec sleep 120"))],
]
outcome = Runner(lanes, tmp / "logs", grace=5).run()
sys.exit(130 if outcome.interrupted else 0)
"""


def test_ctrl_c_stops_the_running_stages_and_keeps_what_finished(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "tools")}
    proc = subprocess.Popen(
        # SIGINT as a terminal delivers it, even where this session inherited it ignored (nohup, a
        # background job): an ignored SIGINT is inherited across exec and Python keeps it ignored
        ["env", "--default-signal=INT", sys.executable, "-c", DRIVER, str(tmp_path)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (tmp_path / "long.pid").is_file() or not (tmp_path / "long.pid").read_text().strip():
        assert time.monotonic() < deadline
        assert proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    assert "interrupted: stopped the running stages (long)" in out
    assert not _alive(int((tmp_path / "long.pid").read_text()))
    assert (tmp_path / "cache").read_text() == "built\n"


def _keys(lanes: list[list[Stage]]) -> list[list[str]]:
    return [[s.key for s in lane] for lane in lanes]


def test_ci_builds_every_release_and_the_real_nodes_after_the_debian_packages() -> None:
    stages = {s.key: s for lane in ci_plan() for s in lane}
    assert stages["nova-venvs"].argv == ("bash", "tools/catalogs/ensure_venvs.sh")  # no release: all
    assert stages["realnode"].needs == ("apt",)
    # the control plane without kwok: kwok (and prometheus) build beside the tests (ci_later_plan)
    assert stages["control-plane"].env == {"ENVTEST_NO_KWOK": "1"}
    assert "prometheus" not in stages
    assert [s.key for s in ci_plan()[1]] == ["control-plane", "realnode", "deploytools"]
    # the real nodes' nova image of every release, after their trees (the stage before it)
    python_lane = [s.key for s in ci_plan()[0]]
    assert python_lane.index("nova-oci-image") == python_lane.index("images") + 1
    assert stages["nova-oci-image"].argv == (".venv/bin/python", "-m", "realnode.nova_image")
    # the operator's image for the chart, in a lane of its own after the Debian packages
    assert _keys(ci_plan())[2] == ["operator-image"]
    assert stages["operator-image"].needs == ("apt",)


def test_repeated_stage_keys_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="repeat"):
        Runner([[sh("a", "true")], [sh("a", "true")]], tmp_path)
