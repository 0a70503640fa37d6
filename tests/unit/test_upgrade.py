"""The pure upgrade state machine: every row of every table of upgrade-and-cells.md (§1-§10)."""

from __future__ import annotations

import pytest

from nova_operator.decisions import upgrade as u
from nova_operator.decisions.upgrade import Action, Decision, Event, JobOutcome, Next, View

IMAGE = "ghcr.io/c5c3/nova"


def view(
    spec: str, installed: str = "", *, tag: str | None = None, target: str = "", phase: str = ""
) -> View:
    return View(
        spec_release=spec, image=f"{IMAGE}:{tag or spec}", installed=installed, target=target, phase=phase
    )


def active(phase: str, *, spec: str = "2026.2", tag: str | None = None) -> View:
    return view(spec, "2026.1", tag=tag, target="2026.2", phase=phase)


def reasons(d: Decision) -> list[tuple[str, str]]:
    return [(e.type, e.reason) for e in d.events]


def db(d: Decision) -> tuple[bool, str]:
    assert d.condition is not None
    assert d.condition.type == "DatabaseReady"
    return d.condition.status, d.condition.reason


# -- §1.2 transitions ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("installed", "spec"),
    [
        ("", "2026.1"),  # fresh install
        ("2026.1", "2026.1"),  # same release
        ("2026.1-p1", "2026.1"),  # patch only (suffix differs)
        ("2026.1-p1", "2026.1-p2"),
    ],
)
def test_steady_cases_run_db_sync_and_enter_no_phase(installed: str, spec: str) -> None:
    d = u.decide(View(spec_release=spec, image=f"{IMAGE}:2026.1", installed=installed))
    assert d.action is Action.STEADY
    assert (d.phase, d.target, d.installed) == ("", "", installed)
    assert d.condition is None
    assert d.events == ()


@pytest.mark.parametrize(
    ("installed", "spec"), [("2025.1", "2025.2"), ("2025.2", "2026.1"), ("2026.1", "2026.2")]
)
def test_one_step_forward_initiates(installed: str, spec: str) -> None:
    d = u.decide(view(spec, installed))
    assert (d.installed, d.target, d.phase) == (installed, spec, "Expanding")
    assert db(d) == (False, "ExpandInProgress")
    assert d.condition is not None
    assert installed in d.condition.message
    assert spec in d.condition.message
    assert "Expanding" in d.condition.message
    assert d.events == (Event("Normal", "UpgradeInitiated", f"Upgrade initiated: {installed} → {spec}"),)
    assert d.next is Next.NOW
    assert d.result == 0.0
    assert d.action is Action.NONE
    assert d.job is None


def test_a_policy_rule_the_target_drops_holds_the_upgrade_before_it_starts() -> None:
    held = ("spec.policy.rules[x]: nova 2026.2 drops this policy rule (nova 2026.1 registers it)",)
    base = view("2026.2", "2026.1")
    d = u.decide(View(base.spec_release, base.image, base.installed, held=held))
    assert db(d) == (False, "UpgradeHeldByPolicy")
    assert d.condition is not None
    assert d.condition.message == f"upgrade 2026.1 → 2026.2 not started: {held[0]}"
    assert (d.installed, d.target, d.phase) == ("2026.1", "", "")  # nothing initiated
    assert d.events == ()  # the Config step's ConfigError event names the rules once
    assert d.next is Next.AFTER
    assert d.result == 30.0
    # held or not, a steady pass (no upgrade asked) runs db-sync, and an invalid path is refused first
    steady = view("2026.1", "2026.1")
    assert (
        u.decide(View(steady.spec_release, steady.image, steady.installed, held=held)).action is Action.STEADY
    )
    skip = view("2026.2", "2025.2")
    assert db(u.decide(View(skip.spec_release, skip.image, skip.installed, held=held))) == (
        False,
        "UpgradePathInvalid",
    )


@pytest.mark.parametrize(
    ("installed", "spec"), [("2024.2", "2026.1"), ("2025.2", "2026.2"), ("2025.1", "2026.1")]
)
def test_skip_level_is_refused(installed: str, spec: str) -> None:
    d = u.decide(view(spec, installed))
    assert db(d) == (False, "UpgradePathInvalid")
    assert reasons(d) == [("Warning", "UpgradePathInvalid")]
    assert d.next is Next.ERROR
    assert d.error == "UpgradePathInvalid"
    assert d.result == "error"
    assert (d.phase, d.target) == ("", "")


@pytest.mark.parametrize(
    ("installed", "spec"), [("2026.1", "2025.2"), ("2026.2", "2026.1"), ("2027.1", "2025.1")]
)
def test_downgrade_is_refused(installed: str, spec: str) -> None:
    d = u.decide(view(spec, installed))
    assert db(d) == (False, "DowngradeNotSupported")
    assert reasons(d) == [("Warning", "DowngradeNotSupported")]
    assert d.condition is not None
    assert f"from {installed} to {spec}" in d.condition.message
    assert d.next is Next.ERROR
    assert (d.phase, d.target) == ("", "")


@pytest.mark.parametrize(
    ("installed", "spec", "names"),
    [
        ("garbage", "2026.1", "installed release 'garbage'"),
        ("2026.1", "2026.9", "target release '2026.9'"),
        ("2009.1", "2026.1", "installed release '2009.1'"),
        ("junk", "also-junk", "installed release 'junk'"),  # installed is validated first (§3.1)
    ],
)
def test_unparseable_pairs_report_which_side(installed: str, spec: str, names: str) -> None:
    d = u.decide(View(spec_release=spec, image=f"{IMAGE}@sha256:{'a' * 64}", installed=installed))
    assert db(d) == (False, "VersionParseError")
    assert d.condition is not None
    assert names in d.condition.message
    assert reasons(d) == [("Warning", "VersionParseError")]
    assert d.next is Next.ERROR


# -- §1.3 lockstep ------------------------------------------------------------------------------


@pytest.mark.parametrize("installed", ["", "2026.1", "2025.2"])
def test_a_tag_naming_another_release_blocks_before_any_release_decision(installed: str) -> None:
    d = u.decide(view("2026.1", installed, tag="2025.2"))
    assert db(d) == (False, "ImageReleaseMismatch")
    assert d.next is Next.AFTER
    assert d.requeue_after == 30.0
    assert d.events == ()
    assert d.action is Action.NONE
    assert (d.phase, d.target, d.installed) == ("", "", installed)


def test_only_the_release_bumped_does_not_initiate() -> None:
    d = u.decide(view("2026.2", "2026.1", tag="2026.1"))
    assert db(d) == (False, "ImageReleaseMismatch")
    assert d.phase == ""


@pytest.mark.parametrize(
    "image",
    [f"{IMAGE}:2026.2-p1", f"{IMAGE}@sha256:{'b' * 64}", f"{IMAGE}:latest", "registry:5000/nova:2026.2"],
)
def test_patch_suffix_digest_and_non_release_tags_pass_the_check(image: str) -> None:
    d = u.decide(View(spec_release="2026.2", image=image, installed="2026.1"))
    assert d.phase == "Expanding"


@pytest.mark.parametrize("phase", u.PHASES)
def test_the_check_runs_during_an_upgrade(phase: str) -> None:
    d = u.decide(active(phase, tag="2026.1"))
    assert db(d) == (False, "ImageReleaseMismatch")
    assert d.phase == phase
    assert d.target == "2026.2"


@pytest.mark.parametrize("phase", u.PHASES)
def test_the_check_is_skipped_on_the_abort_path(phase: str) -> None:
    d = u.decide(active(phase, spec="2026.1", tag="2026.2"))  # release reverted, image not (yet)
    assert d.action is Action.DELETE_PHASE_JOBS


def test_after_an_abort_with_the_image_left_on_the_target_the_next_pass_parks_on_the_mismatch() -> None:
    d = u.decide(view("2026.1", "2026.1", tag="2026.2"))
    assert db(d) == (False, "ImageReleaseMismatch")


# -- §2 order -----------------------------------------------------------------------------------


@pytest.mark.parametrize("phase", u.PHASES)
def test_abort_wins_over_target_changed(phase: str) -> None:
    d = u.decide(active(phase, spec="2026.1"))
    assert reasons(d) == [("Normal", "UpgradeAborted")]


@pytest.mark.parametrize("phase", u.PHASES)
def test_a_third_release_mid_upgrade_is_refused_without_advancing(phase: str) -> None:
    d = u.decide(active(phase, spec="2027.1"))
    assert db(d) == (False, "UpgradeTargetChanged")
    assert reasons(d) == [("Warning", "UpgradeTargetChanged")]
    assert d.next is Next.ERROR
    assert d.action is Action.NONE
    assert (d.installed, d.target, d.phase) == ("2026.1", "2026.2", phase)
    assert d.condition is not None
    for release in ("2027.1", "2026.1", "2026.2"):
        assert release in d.condition.message


def test_a_phase_set_means_no_new_initiation() -> None:
    d = u.decide(active("Migrating"))
    assert d.action is Action.RUN_JOB
    assert d.job == "db-migrate"
    assert d.events == ()


# -- §3.2 the phase handler ---------------------------------------------------------------------

JOB_PHASES = [
    ("Expanding", "db-expand", "ExpandInProgress", "ExpandFailed", "Expand"),
    ("Migrating", "db-migrate", "MigrateInProgress", "MigrateFailed", "Migrate"),
    ("Contracting", "db-contract", "ContractInProgress", "ContractFailed", "Contract"),
]


@pytest.mark.parametrize(("phase", "suffix", "_r", "_f", "_v"), JOB_PHASES)
def test_each_job_phase_names_its_job(phase: str, suffix: str, _r: str, _f: str, _v: str) -> None:
    d = u.decide(active(phase))
    assert (d.action, d.job) == (Action.RUN_JOB, suffix)
    assert u.job_suffix(phase) == suffix


@pytest.mark.parametrize(("phase", "suffix", "running", "_f", "_v"), JOB_PHASES)
def test_a_running_job_polls_at_30s_without_an_event(
    phase: str, suffix: str, running: str, _f: str, _v: str
) -> None:
    d = u.after_job(active(phase), JobOutcome.NOT_DONE, job_name=f"nova-{suffix}")
    assert db(d) == (False, running)
    assert d.condition is not None
    assert "2026.1 → 2026.2" in d.condition.message
    assert d.next is Next.AFTER
    assert d.requeue_after == 30.0
    assert d.events == ()
    assert d.phase == phase


@pytest.mark.parametrize(("phase", "suffix", "_r", "failed", "verb"), JOB_PHASES)
def test_a_permanently_failed_job_blocks_with_its_reason(
    phase: str, suffix: str, _r: str, failed: str, verb: str
) -> None:
    d = u.after_job(active(phase), JobOutcome.FAILED, job_name=f"nova-{suffix}", error="BackoffLimitExceeded")
    message = f"{verb} job nova-{suffix} failed: BackoffLimitExceeded"
    assert db(d) == (False, failed)
    assert d.condition is not None
    assert d.condition.message == message
    assert d.events == (Event("Warning", failed, message),)
    assert d.next is Next.ERROR
    assert d.error == failed
    assert (d.installed, d.target, d.phase) == ("2026.1", "2026.2", phase)


def test_expand_done_moves_to_migrating() -> None:
    d = u.after_job(active("Expanding"), JobOutcome.DONE, job_name="nova-db-expand")
    assert (d.installed, d.target, d.phase) == ("2026.1", "2026.2", "Migrating")
    assert db(d) == (False, "MigrateInProgress")
    assert d.events == (Event("Normal", "ExpandComplete", "Expand phase complete: 2026.1 → 2026.2"),)
    assert d.next is Next.NOW


def test_migrate_done_moves_to_rolling_update() -> None:
    d = u.after_job(active("Migrating"), JobOutcome.DONE, job_name="nova-db-migrate")
    assert (d.installed, d.target, d.phase) == ("2026.1", "2026.2", "RollingUpdate")
    assert db(d) == (False, "UpgradeRollingUpdate")
    assert d.events == (Event("Normal", "MigrateComplete", "Migrate phase complete: 2026.1 → 2026.2"),)
    assert d.next is Next.NOW


def test_contract_done_completes_the_upgrade_and_the_pipeline_continues() -> None:
    d = u.after_job(active("Contracting"), JobOutcome.DONE, job_name="nova-db-contract")
    assert (d.installed, d.target, d.phase) == ("2026.2", "", "")
    assert db(d) == (True, "DatabaseSynced")
    assert d.condition is not None
    assert "upgraded 2026.1 → 2026.2" in d.condition.message
    assert d.events == (Event("Normal", "UpgradeComplete", "Upgrade complete: 2026.1 → 2026.2"),)
    assert d.next is Next.ZERO
    assert d.result is None


# -- §3.4 RollingUpdate -------------------------------------------------------------------------


def test_rolling_update_lets_the_workloads_roll_on_the_same_pass() -> None:
    d = u.decide(active("RollingUpdate"))
    assert db(d) == (False, "UpgradeRollingUpdate")
    assert d.condition is not None
    assert "2026.1 → 2026.2" in d.condition.message
    assert d.next is Next.ZERO
    assert d.action is Action.NONE
    assert d.job is None
    assert d.events == ()
    assert d.phase == "RollingUpdate"


def test_rolling_update_stays_put_however_long_the_roll_takes() -> None:
    # a role that never finishes: DatabaseReady stays UpgradeRollingUpdate (the workload steps poll at 10 s)
    for _ in range(3):
        assert db(u.decide(active("RollingUpdate"))) == (False, "UpgradeRollingUpdate")


def test_an_unknown_phase_is_an_error_not_a_guess() -> None:
    d = u.decide(active("Sideways"))
    assert d.next is Next.ERROR
    assert d.action is Action.NONE


# -- §4 the pre-flight report -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "nova-status upgrade check exit 0\n",
            Event("Normal", "UpgradeCheckCompleted", "nova-status upgrade check exit 0"),
        ),
        (
            "nova-status upgrade check exit 0",
            Event("Normal", "UpgradeCheckCompleted", "nova-status upgrade check exit 0"),
        ),
        (
            "nova-status upgrade check exit 1\n",
            Event("Warning", "UpgradeCheckWarnings", "nova-status upgrade check exit 1"),
        ),
        (
            "nova-status upgrade check exit 2\n",
            Event("Warning", "UpgradeCheckWarnings", "nova-status upgrade check exit 2"),
        ),
        (
            "nova-status upgrade check exit 255\n",
            Event("Warning", "UpgradeCheckWarnings", "nova-status upgrade check exit 255"),
        ),
        (
            "nova-status upgrade check exit 10\n",
            Event("Warning", "UpgradeCheckWarnings", "nova-status upgrade check exit 10"),
        ),
        (None, Event("Normal", "UpgradeCheckCompleted", "exit code unavailable")),
        ("", Event("Normal", "UpgradeCheckCompleted", "exit code unavailable")),
        ("  \n", Event("Normal", "UpgradeCheckCompleted", "exit code unavailable")),
    ],
)
def test_the_check_report_classifies_the_termination_message(message: str | None, expected: Event) -> None:
    assert u.check_report(message) == expected


def test_a_failed_check_ends_as_expand_failed() -> None:
    # exit >= 2: the report is a Warning, and after five attempts the Job is Failed -> ExpandFailed
    assert u.check_report("nova-status upgrade check exit 2").type == "Warning"
    d = u.after_job(active("Expanding"), JobOutcome.FAILED, job_name="nova-db-expand", error="x")
    assert db(d) == (False, "ExpandFailed")


# -- §6.1 the flip gate -------------------------------------------------------------------------

NEW = f"{IMAGE}:2026.2"
OLD = f"{IMAGE}:2026.1"


def roles(*overrides: u.Rollout | None) -> list[u.Rollout | None]:
    base: list[u.Rollout | None] = [u.Rollout(n, True, NEW) for n in ("conductor", "scheduler", "metadata")]
    return [*base, *overrides]


@pytest.mark.parametrize(
    ("api", "members", "ok"),
    [
        (True, roles(), True),  # console proxy disabled: not a member
        (True, roles(u.Rollout("novncproxy", True, NEW)), True),
        (False, roles(), False),  # the API itself is not fully rolled out
        (True, roles(None), False),  # a missing role counts as not rolled out
        (True, roles(u.Rollout("novncproxy", False, NEW)), False),
        (True, roles(u.Rollout("novncproxy", True, OLD)), False),  # rolled out onto the old template
    ],
)
def test_the_gate_needs_every_role_rolled_out_on_the_new_image(
    api: bool, members: list[u.Rollout | None], ok: bool
) -> None:
    assert u.rollout_gate(api_rolled_out=api, roles=members, image=NEW) is ok


def test_the_flip_to_contracting() -> None:
    d = u.flip(active("RollingUpdate"), ready=True, api_name="nova")
    assert d is not None
    assert (d.installed, d.target, d.phase) == ("2026.1", "2026.2", "Contracting")
    assert d.condition == u.Condition(
        "DeploymentReady", True, "DeploymentReady", "Deployment nova is available"
    )
    assert d.events == (
        Event(
            "Normal",
            "DeploymentRolloutComplete",
            "Deployment rollout complete during upgrade 2026.1 → 2026.2",
        ),
    )
    assert d.next is Next.AFTER
    assert d.requeue_after == 1.0


def test_the_gate_closed_waits_10s() -> None:
    d = u.flip(active("RollingUpdate"), ready=False, api_name="nova")
    assert d is not None
    assert d.condition is not None
    assert (d.condition.type, d.condition.status, d.condition.reason) == (
        "DeploymentReady",
        False,
        "WaitingForDeployment",
    )
    assert d.requeue_after == 10.0
    assert d.phase == "RollingUpdate"
    assert d.events == ()


@pytest.mark.parametrize("phase", ["", "Expanding", "Migrating", "Contracting"])
def test_no_flip_outside_rolling_update(phase: str) -> None:
    assert u.flip(active(phase) if phase else view("2026.1", "2026.1"), ready=True, api_name="nova") is None


# -- §8 abort -----------------------------------------------------------------------------------


@pytest.mark.parametrize("phase", u.PHASES)  # Contracting is not safe, but the operator does not gate it
def test_abort_in_any_phase(phase: str) -> None:
    d = u.decide(active(phase, spec="2026.1", tag="2026.1"))
    assert d.action is Action.DELETE_PHASE_JOBS
    assert (d.installed, d.target, d.phase) == ("2026.1", "", "")
    assert d.events == (
        Event(
            "Normal",
            "UpgradeAborted",
            "Upgrade 2026.1 → 2026.2 aborted: spec release reverted to installed release 2026.1",
        ),
    )
    assert d.next is Next.NOW
    assert d.condition is None


def test_the_phase_jobs_an_abort_deletes() -> None:
    assert u.PHASE_JOB_SUFFIXES == ("db-expand", "db-migrate", "db-contract")  # not db-sync


def test_the_pass_after_an_abort_is_an_ordinary_one() -> None:
    d = u.decide(view("2026.1", "2026.1"))
    assert d.action is Action.STEADY


def test_after_completion_a_revert_is_a_downgrade() -> None:
    d = u.decide(view("2026.1", "2026.2"))
    assert db(d) == (False, "DowngradeNotSupported")


# -- §10 timing ---------------------------------------------------------------------------------


def test_timing_summary() -> None:
    assert u.after_job(active("Expanding"), JobOutcome.NOT_DONE, job_name="j").requeue_after == 30.0
    for d in (
        u.decide(view("2026.2", "2026.1")),
        u.after_job(active("Expanding"), JobOutcome.DONE, job_name="j"),
        u.after_job(active("Migrating"), JobOutcome.DONE, job_name="j"),
        u.decide(active("Migrating", spec="2026.1", tag="2026.1")),
    ):
        assert d.result == 0.0
    flipped = u.flip(active("RollingUpdate"), ready=True, api_name="nova")
    assert flipped is not None
    assert flipped.result == 1.0
