# ruff: noqa: E501  (the list_cells tables are nova's real line width)
"""The db-sync, expand, contract and archive scripts, run by /bin/sh against a stub nova-manage.

The stub logs every call and answers ``cell_v2 list_cells`` with a prepared table (the
shape nova prints: a rule, the header, a rule, the rows, a rule), so the awk guard decides
exactly as it would in the pod.
"""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from nova_operator.models.nova import Nova
from nova_operator.renderers import jobs

RULE = "+-------+--------------------------------------+----------------------------+---------------------------------------------------+----------+"
HEADER = "|  Name |                 UUID                 |       Transport URL        |                Database Connection                | Disabled |"
CELL0 = "| cell0 | 00000000-0000-0000-0000-000000000000 |           none:/           | mysql+pymysql://nova:****@db:3306/nova_cell0      |  False   |"
CELL1 = "| cell1 | 6a0b6d3e-1c2f-4b1e-9a55-3f1e2d4c5b6a | rabbit://u:****@mq:5672/   | mysql+pymysql://nova:****@db:3306/nova?charset=utf8 |  False   |"
LEGACY = "| old   | 7b1c7e4f-2d30-4c2f-8b66-402f3e5d6c7b | rabbit://u:****@mq:5672/   | mysql+pymysql://nova:****@db:3306/nova?ssl_ca=/x  |  False   |"
DECOY = "| other | 8c2d8f50-3e41-4d30-9c77-51304f6e7d8c | rabbit://cell1:****@cell1/ | mysql+pymysql://cell1:****@cell1:3306/cell1_nova  |  False   |"

STUB = """#!/bin/sh
printf '%s\\n' "$*" >> "$STUB_LOG"
case "$*" in
  *"cell_v2 list_cells"*)
    [ -n "${LIST_FAIL:-}" ] && { echo "DB unreachable" >&2; exit 1; }
    if [ -f "$LISTING.after" ] && grep -q create_cell "$STUB_LOG"; then cp "$LISTING.after" "$LISTING"; fi
    cat "$LISTING"
    exit 0 ;;
esac
exit 0
"""


def _table(*rows: str) -> str:
    return "\n".join([RULE, HEADER, RULE, *rows, RULE]) + "\n"


class Run:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        for tool in ("nova-manage", "nova-status"):
            (bin_dir / tool).write_text(STUB)
            (bin_dir / tool).chmod(0o755)
        self.log = tmp / "calls.log"
        self.listing = tmp / "listing.txt"
        self.termination = tmp / "termination-log"
        self.env = {
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "STUB_LOG": str(self.log),
            "LISTING": str(self.listing),
        }

    def __call__(self, script: str, **env: str) -> subprocess.CompletedProcess[str]:
        self.log.touch()
        return subprocess.run(
            ["/bin/sh", "-eu", "-c", script],
            env={**self.env, **env},
            capture_output=True,
            text=True,
            check=False,
        )

    @property
    def calls(self) -> list[str]:
        return self.log.read_text().splitlines()


@pytest.fixture
def run(tmp_path: Path) -> Run:
    if shutil.which("awk") is None:
        pytest.fail("the db-sync guard needs awk")
    return Run(tmp_path)


@pytest.fixture
def script(load_sample: Callable[[str], Nova], run: Run) -> str:
    return jobs.db_sync_script(load_sample("minimal"), termination_log=str(run.termination))


CD = "--config-dir /etc/nova/nova.conf.d"
CREATE = (
    f"{CD} cell_v2 create_cell --name cell1 "
    "--transport-url {scheme}://{username}:{password}@{hostname}:{port}/{path}?{query} "
    "--database_connection {scheme}://{username}:{password}@{hostname}:{port}/nova?{query}"
)


def test_an_empty_listing_creates_cell1_once_with_template_urls(run: Run, script: str) -> None:
    run.listing.write_text(_table())
    Path(f"{run.listing}.after").write_text(_table(CELL0, CELL1))
    result = run(script)
    assert result.returncode == 0, result.stderr
    assert run.calls == [
        f"{CD} api_db sync",
        f"{CD} cell_v2 map_cell0 --database_connection "
        "{scheme}://{username}:{password}@{hostname}:{port}/nova_cell0?{query}",
        f"{CD} cell_v2 list_cells",
        CREATE,
        f"{CD} db sync",
        f"{CD} cell_v2 list_cells",
    ]
    assert run.termination.read_text() == (
        "cell0=00000000-0000-0000-0000-000000000000\ncell1=6a0b6d3e-1c2f-4b1e-9a55-3f1e2d4c5b6a\n"
    )


def test_cell1_present_creates_nothing(run: Run, script: str) -> None:
    run.listing.write_text(_table(CELL0, CELL1))
    result = run(script)
    assert result.returncode == 0, result.stderr
    assert not any("create_cell" in call for call in run.calls)
    assert f"{CD} db sync" in run.calls


def test_another_cell_on_the_cell_schema_creates_nothing(run: Run, script: str) -> None:
    run.listing.write_text(_table(CELL0, LEGACY))
    result = run(script)
    assert result.returncode == 0, result.stderr
    assert not any("create_cell" in call for call in run.calls)
    assert "old=7b1c7e4f-2d30-4c2f-8b66-402f3e5d6c7b" in run.termination.read_text()


def test_cell0_alone_and_a_cell1_lookalike_do_not_count(run: Run, script: str) -> None:
    # cell0's schema ends in nova_cell0, not /nova; the decoy carries "cell1" in its user and host only
    run.listing.write_text(_table(CELL0, DECOY))
    result = run(script)
    assert result.returncode == 0, result.stderr
    assert sum(call == CREATE for call in run.calls) == 1


def test_a_failing_listing_fails_the_script_before_create_cell(run: Run, script: str) -> None:
    run.listing.write_text(_table())
    result = run(script, LIST_FAIL="1")
    assert result.returncode != 0
    assert not any("create_cell" in call for call in run.calls)
    assert not any(call.endswith(" db sync") for call in run.calls)


@pytest.mark.parametrize(("status", "expect_rc", "syncs"), [(0, 0, 2), (1, 0, 2), (2, 2, 0), (255, 255, 0)])
def test_expand_runs_the_preflight_and_stops_above_warnings(
    run: Run, status: int, expect_rc: int, syncs: int
) -> None:
    stub = run.tmp / "bin" / "nova-status"
    stub.write_text(f'#!/bin/sh\nprintf \'%s\\n\' "$*" >> "$STUB_LOG"\nexit {status}\n')
    result = run(jobs.expand_script(termination_log=str(run.termination)))
    assert result.returncode == expect_rc
    assert run.termination.read_text() == f"nova-status upgrade check exit {status}\n"
    assert sum(call.endswith("sync") for call in run.calls) == syncs


def test_contract_loops_each_schema_until_done_and_rewrites_cell0(run: Run) -> None:
    stub = run.tmp / "bin" / "nova-manage"
    # answer 1 (more) twice, then 0, per schema; log the connection each call ran with
    stub.write_text(
        "#!/bin/sh\n"
        'n=$(grep -c "$OS_DATABASE__CONNECTION" "$STUB_LOG" 2>/dev/null || true)\n'
        'printf \'%s %s\\n\' "$OS_DATABASE__CONNECTION" "$*" >> "$STUB_LOG"\n'
        '[ "$n" -lt 2 ] && exit 1\nexit 0\n'
    )
    conn = "mysql+pymysql://nova:pw@db:3306/nova?ssl_ca=/etc/nova-db-tls/cell/ca.crt"
    result = run(jobs.contract_script(), OS_DATABASE__CONNECTION=conn)
    assert result.returncode == 0, result.stderr
    dsns = [call.split(" ", 1)[0] for call in run.calls]
    cell0 = "mysql+pymysql://nova:pw@db:3306/nova_cell0?ssl_ca=/etc/nova-db-tls/cell/ca.crt"
    assert dsns == [conn] * 3 + [cell0] * 3
    assert all("online_data_migrations --max-count 1000" in call for call in run.calls)


def test_contract_stops_on_a_failed_migration(run: Run) -> None:
    (run.tmp / "bin" / "nova-manage").write_text('#!/bin/sh\nprintf \'%s\\n\' "$*" >> "$STUB_LOG"\nexit 3\n')
    result = run(jobs.contract_script(), OS_DATABASE__CONNECTION="mysql+pymysql://n:p@h:1/nova")
    assert result.returncode == 3
    assert len(run.calls) == 1


@pytest.mark.parametrize(("codes", "rc", "calls"), [("1 1 0", 0, 3), ("1 4", 1, 2), ("0", 0, 1)])
def test_archive_batches_until_nothing_is_left(run: Run, codes: str, rc: int, calls: int) -> None:
    (run.tmp / "codes").write_text(codes.replace(" ", "\n") + "\n")
    (run.tmp / "bin" / "nova-manage").write_text(
        "#!/bin/sh\n"
        'printf \'%s\\n\' "$*" >> "$STUB_LOG"\n'
        f'code=$(head -n1 {run.tmp}/codes); sed -i 1d {run.tmp}/codes; exit "$code"\n'
    )
    result = run(jobs.archive_script(), MAX_ROWS="500", SLEEP="0", RETENTION_DAYS="30")
    assert (result.returncode == 0) == (rc == 0), result.stderr
    assert len(run.calls) == calls
    first = run.calls[0]
    assert "db archive_deleted_rows --all-cells --max_rows 500 --before " in first
    assert first.endswith(" --task-log")
    assert "--purge" not in first
    assert "--until-complete" not in first


def test_archive_without_retention_passes_no_date_filter(run: Run) -> None:
    result = run(jobs.archive_script(), MAX_ROWS="1000", SLEEP="0")
    assert result.returncode == 0, result.stderr
    assert run.calls == [f"{CD} db archive_deleted_rows --all-cells --max_rows 1000"]


def _coded_nova_manage(run: Run, codes: str) -> None:
    (run.tmp / "codes").write_text(codes.replace(" ", "\n") + "\n")
    (run.tmp / "bin" / "nova-manage").write_text(
        "#!/bin/sh\n"
        'printf \'%s\\n\' "$*" >> "$STUB_LOG"\n'
        f'code=$(head -n1 {run.tmp}/codes); sed -i 1d {run.tmp}/codes; exit "$code"\n'
    )


@pytest.mark.parametrize(("purge_code", "ok"), [("0", True), ("3", True), ("1", False), ("4", False)])
def test_a_purge_follows_the_archive_and_none_to_purge_is_success(
    run: Run, purge_code: str, ok: bool
) -> None:
    _coded_nova_manage(run, f"1 0 {purge_code}")
    result = run(jobs.archive_script(), MAX_ROWS="1000", SLEEP="0", PURGE_AFTER_DAYS="30")
    assert (result.returncode == 0) is ok, result.stderr
    archive, again, purge = run.calls
    assert archive == again == f"{CD} db archive_deleted_rows --all-cells --max_rows 1000"
    assert purge.startswith(f"{CD} db purge --all-cells --before ")
    when = datetime.datetime.strptime(purge.split("--before ", 1)[1], "%Y-%m-%d %H:%M:%S")
    ago = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) - when
    assert abs(ago - datetime.timedelta(days=30)) < datetime.timedelta(minutes=5)


def test_no_purge_after_a_failed_archive_and_none_without_the_setting(run: Run) -> None:
    _coded_nova_manage(run, "4")
    result = run(jobs.archive_script(), MAX_ROWS="1000", SLEEP="0", PURGE_AFTER_DAYS="0")
    assert result.returncode == 4
    assert [c.split(" db ")[1].split()[0] for c in run.calls] == ["archive_deleted_rows"]
    run.log.write_text("")
    _coded_nova_manage(run, "0")
    assert run(jobs.archive_script(), MAX_ROWS="1000", SLEEP="0").returncode == 0
    assert [c.split(" db ")[1].split()[0] for c in run.calls] == ["archive_deleted_rows"]


def test_expand_checks_first_then_migrates_nova_api_then_the_cell(run: Run) -> None:
    stub = run.tmp / "bin" / "nova-status"
    stub.write_text('#!/bin/sh\nprintf \'nova-status %s\\n\' "$*" >> "$STUB_LOG"\nexit 0\n')
    result = run(jobs.expand_script(termination_log=str(run.termination)))
    assert result.returncode == 0, result.stderr
    assert run.calls == [f"nova-status {CD} upgrade check", f"{CD} api_db sync", f"{CD} db sync"]
    assert run.termination.read_text() == "nova-status upgrade check exit 0\n"


def test_expand_reports_the_code_even_when_the_sync_fails_afterwards(run: Run) -> None:
    # the line is written before acting on the code, so a later failure still leaves the report
    (run.tmp / "bin" / "nova-manage").write_text("#!/bin/sh\nexit 255\n")
    result = run(jobs.expand_script(termination_log=str(run.termination)))
    assert result.returncode == 255
    assert run.termination.read_text() == "nova-status upgrade check exit 0\n"


@pytest.mark.parametrize(
    ("conn", "cell0"),
    [
        (
            "mysql+pymysql://nova:pw@nova-db:3306/nova?ssl_ca=/etc/nova-db-tls/cell/ca.crt",
            "mysql+pymysql://nova:pw@nova-db:3306/nova_cell0?ssl_ca=/etc/nova-db-tls/cell/ca.crt",
        ),
        ("mysql+pymysql://nova:pw@nova-db:3306/nova", "mysql+pymysql://nova:pw@nova-db:3306/nova_cell0"),
        (
            "mysql+pymysql://nova:pw@db:3306/nova?charset=utf8&ssl_ca=/a?b",  # only the first ? splits
            "mysql+pymysql://nova:pw@db:3306/nova_cell0?charset=utf8&ssl_ca=/a?b",
        ),
    ],
)
def test_contract_rewrites_the_connection_for_the_cell0_pass(run: Run, conn: str, cell0: str) -> None:
    (run.tmp / "bin" / "nova-manage").write_text(
        '#!/bin/sh\nprintf \'%s\\n\' "$OS_DATABASE__CONNECTION" >> "$STUB_LOG"\nexit 0\n'
    )
    result = run(jobs.contract_script(), OS_DATABASE__CONNECTION=conn)
    assert result.returncode == 0, result.stderr
    assert run.calls == [conn, cell0]


def test_a_failure_in_the_cell0_pass_fails_the_contract_with_its_code(run: Run) -> None:
    (run.tmp / "bin" / "nova-manage").write_text(
        "#!/bin/sh\n"
        'printf \'%s\\n\' "$OS_DATABASE__CONNECTION" >> "$STUB_LOG"\n'
        'case "$OS_DATABASE__CONNECTION" in *_cell0*) exit 2 ;; esac\nexit 0\n'
    )
    result = run(jobs.contract_script(), OS_DATABASE__CONNECTION="mysql+pymysql://n:p@h:1/nova")
    assert result.returncode == 2
    assert run.calls == ["mysql+pymysql://n:p@h:1/nova", "mysql+pymysql://n:p@h:1/nova_cell0"]


@pytest.mark.parametrize("phase", ["db-expand", "db-migrate", "db-contract"])
def test_the_phase_jobs_share_the_migration_job_shape(load_sample: Callable[[str], Nova], phase: str) -> None:
    nova = load_sample("minimal")
    job = jobs.phase_job(nova, phase, "nova-config-abc")  # type: ignore[arg-type]
    assert job["metadata"]["name"] == f"nova-{phase}"
    assert job["spec"]["backoffLimit"] == 4  # five attempts
    assert "ttlSecondsAfterFinished" not in job["spec"]  # the finished Job is the state record
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    assert container["name"] == phase
    assert container["image"] == "ghcr.io/c5c3/nova:2025.2"  # spec.image: the target release
    assert {"name": "config", "mountPath": "/etc/nova/nova.conf.d", "readOnly": True} in container[
        "volumeMounts"
    ]
    assert {"name": "config", "configMap": {"name": "nova-config-abc"}} in pod["volumes"]
    env = {e["name"] for e in container["env"]}
    assert {"OS_DATABASE__CONNECTION", "OS_API_DATABASE__CONNECTION", "OS_DEFAULT__TRANSPORT_URL"} <= env
    if phase == "db-migrate":
        assert container["command"][0] == "nova-manage"  # argv form, no shell
    else:
        script = jobs.expand_script() if phase == "db-expand" else jobs.contract_script()
        assert container["command"] == ["/bin/sh", "-eu", "-c", script]
