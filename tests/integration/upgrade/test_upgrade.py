"""Release upgrades end to end on the real API server (upgrade-and-cells.md): the phases in order,
the pre-flight exit codes, a failed phase Job and its recovery, abort, and a patch bump."""

from __future__ import annotations

from typing import Any

import pytest

from nova_operator.kube.resources import DEPLOYMENTS, NOVAS
from nova_operator.kube.types import Object

from .conftest import (  # type: ignore[import-not-found]
    IMAGE,
    NEW,
    OLD,
    PHASE_JOBS,
    ROLES,
    Cluster,
    check_line,
    cond,
    db_reason,
    is_ready,
)

ROLE_CONDITIONS = {
    "nova-conductor": ("ConductorReady", "WaitingForConductor"),
    "nova-scheduler": ("SchedulerReady", "WaitingForScheduler"),
    "nova-metadata": ("MetadataReady", "WaitingForMetadata"),
    "nova-novncproxy": ("ConsoleProxyReady", "WaitingForConsoleProxy"),
    "nova": ("DeploymentReady", "WaitingForDeployment"),
}


def phase(nova: Object) -> str:
    return str((nova.get("status") or {}).get("upgradePhase") or "")


def at(phase_name: str, reason: str) -> Any:
    return lambda n: phase(n) == phase_name and db_reason(n) == reason


def sample(operator: Any, name: str, labels: dict[str, str]) -> float:
    return float(operator.metrics.registry.get_sample_value(name, labels) or 0.0)


async def rolled_out(c: Cluster, name: str) -> bool:
    dep = await c.admin.get(DEPLOYMENTS, name, c.ns)
    status = dep.get("status") or {}
    return (
        status.get("observedGeneration") == dep["metadata"]["generation"]
        and status.get("updatedReplicas") == 1
    )


async def test_a_full_upgrade_walks_every_phase_in_order(cluster: Cluster, operator: Any) -> None:
    c, sim = cluster, cluster.sim
    await c.ready()
    assert set((await c.images()).values()) == {f"{IMAGE}:{OLD}"}
    sim.held_jobs |= set(PHASE_JOBS)
    sim.held_deployments |= set(ROLES)
    sim.messages["nova-db-expand"] = check_line(0)

    await c.edit(NEW)
    nova = await c.until(at("Expanding", "ExpandInProgress"))
    assert nova["status"]["targetRelease"] == NEW
    assert nova["status"]["installedRelease"] == OLD
    assert cond(nova, "DatabaseReady")["status"] == "False"
    assert not is_ready(nova)
    jobs = await c.wait_jobs({"nova-db-expand"})
    image = jobs["nova-db-expand"]["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == f"{IMAGE}:{NEW}"  # the target release's migrations
    assert set((await c.images()).values()) == {f"{IMAGE}:{OLD}"}  # the old image keeps serving

    sim.held_jobs.discard("nova-db-expand")
    nova = await c.until(at("Migrating", "MigrateInProgress"))
    await c.wait_jobs({"nova-db-expand", "nova-db-migrate"})
    assert set((await c.images()).values()) == {f"{IMAGE}:{OLD}"}
    assert await c.event("UpgradeCheckCompleted") == (
        "Normal",
        "UpgradeCheckCompleted",
        check_line(0).strip(),
    )

    sim.held_jobs.discard("nova-db-migrate")
    nova = await c.until(at("RollingUpdate", "UpgradeRollingUpdate"))
    # one role at a time in pipeline order: a role's image changes only once the one before it is out
    for i, role in enumerate(ROLES):
        images = await c.wait_image(role, f"{IMAGE}:{NEW}")
        for later in ROLES[i + 1 :]:
            assert images[later] == f"{IMAGE}:{OLD}", (role, later, images)
        condition, waiting = ROLE_CONDITIONS[role]
        await c.until(lambda n, t=condition, r=waiting: cond(n, t).get("reason") == r)
        nova = await c.nova()
        assert phase(nova) == "RollingUpdate"
        assert db_reason(nova) == "UpgradeRollingUpdate"
        assert "nova-db-contract" not in await c.job_names()
        sim.held_deployments.discard(role)

    nova = await c.until(at("Contracting", "ContractInProgress"))
    assert await c.event("DeploymentRolloutComplete")
    await c.wait_jobs({"nova-db-contract"})
    assert nova["status"]["installedRelease"] == OLD  # promoted only at the end

    sim.held_jobs.discard("nova-db-contract")
    nova = await c.until(lambda n: n["status"].get("installedRelease") == NEW and is_ready(n), 60)
    assert "upgradePhase" not in nova["status"]
    assert "targetRelease" not in nova["status"]
    assert cond(nova, "DatabaseReady")["reason"] == "DatabaseSynced"
    assert await c.event("UpgradeComplete") == (
        "Normal",
        "UpgradeComplete",
        f"Upgrade complete: {OLD} → {NEW}",
    )

    reasons = [r for _, r, _ in await c.events()]
    upgrade = [
        r
        for r in reasons
        if r
        in {
            "UpgradeInitiated",
            "UpgradeCheckCompleted",
            "ExpandComplete",
            "MigrateComplete",
            "DeploymentRolloutComplete",
            "UpgradeComplete",
        }
    ]
    assert upgrade == [
        "UpgradeInitiated",
        "UpgradeCheckCompleted",
        "ExpandComplete",
        "MigrateComplete",
        "DeploymentRolloutComplete",
        "UpgradeComplete",
    ]
    assert not [e for e in await c.events() if e[0] == "Warning"]
    labels = {"nova": "nova", "namespace": c.ns, "result": "succeeded"}
    # the first db-sync, the three phases, and db-sync once more: the first steady pass after the upgrade
    # finds the db-sync Job's template on the old image and re-runs it on the new one (nothing pending)
    assert sample(operator, "nova_operator_db_sync_total", labels) == 5
    assert (await c.jobs())["nova-db-sync"]["spec"]["template"]["spec"]["containers"][0][
        "image"
    ] == f"{IMAGE}:{NEW}"
    annotations = nova["metadata"]["annotations"]
    live = await c.jobs()
    for suffix in ("db-expand", "db-migrate", "db-contract", "db-expand-check"):
        job = live[f"nova-{suffix.removesuffix('-check')}"]
        assert annotations[f"cobaltcore.c5c3.io/last-{suffix}-job-uid"] == job["metadata"]["uid"]

    # the second roll: four roles carry the installed release and roll once more; the API does not
    for role in ROLES:
        dep = await c.admin.get(DEPLOYMENTS, role, c.ns)
        stamped = (
            dep["spec"]["template"]["metadata"].get("annotations", {}).get("nova.c5c3.io/installed-release")
        )
        assert stamped == (None if role == "nova" else NEW), role


@pytest.mark.parametrize(
    ("code", "event_type", "event_reason"),
    [
        (0, "Normal", "UpgradeCheckCompleted"),
        (1, "Warning", "UpgradeCheckWarnings"),
        (2, "Warning", "UpgradeCheckWarnings"),
        (255, "Warning", "UpgradeCheckWarnings"),
    ],
)
async def test_each_pre_flight_exit_code_leads_to_its_outcome(
    cluster: Cluster, operator: Any, code: int, event_type: str, event_reason: str
) -> None:
    c, sim = cluster, cluster.sim
    await c.ready()
    sim.messages["nova-db-expand"] = check_line(code)
    sim.held_jobs.add("nova-db-migrate")
    if code >= 2:  # the script exits before either schema is touched; five attempts later the Job is Failed
        sim.failing_jobs.add("nova-db-expand")
    await c.edit(NEW)
    event = await c.event(event_reason)
    assert event == (event_type, event_reason, check_line(code).strip())
    if code < 2:  # the upgrade proceeds
        await c.until(at("Migrating", "MigrateInProgress"))
        return
    nova = await c.until(at("Expanding", "ExpandFailed"))
    assert "nova-db-expand" in cond(nova, "DatabaseReady")["message"]
    assert nova["status"]["installedRelease"] == OLD
    assert (await c.event("ExpandFailed"))[0] == "Warning"
    assert set((await c.images()).values()) == {f"{IMAGE}:{OLD}"}
    assert "nova-db-migrate" not in await c.job_names()
    labels = {"nova": "nova", "namespace": c.ns, "result": "failed"}
    assert sample(operator, "nova_operator_db_sync_total", labels) == 1
    assert [r for _, r, _ in await c.events()].count(event_reason) == 1  # once per Job UID


async def test_a_failed_migrate_job_blocks_and_recovers_when_re_run(cluster: Cluster) -> None:
    c, sim = cluster, cluster.sim
    await c.ready()
    sim.messages["nova-db-expand"] = check_line(0)
    sim.failing_jobs.add("nova-db-migrate")
    await c.edit(NEW)
    nova = await c.until(at("Migrating", "MigrateFailed"))
    assert "nova-db-migrate failed" in cond(nova, "DatabaseReady")["message"]
    event = await c.event("MigrateFailed")
    assert event[0] == "Warning"
    assert "nova-db-migrate" in event[2]
    assert set((await c.images()).values()) == {f"{IMAGE}:{OLD}"}

    sim.failing_jobs.clear()
    await c.delete_job(
        "nova-db-migrate"
    )  # the documented fix: delete the failed Job, the next pass re-creates it
    nova = await c.until(lambda n: n["status"].get("installedRelease") == NEW and is_ready(n), 60)
    assert "upgradePhase" not in nova["status"]


@pytest.mark.parametrize("abort_in", ["Expanding", "Migrating"])
async def test_abort_restores_the_installed_release_and_leaves_no_phase_job(
    cluster: Cluster, abort_in: str
) -> None:
    c, sim = cluster, cluster.sim
    await c.ready()
    sync_uid = (await c.jobs())["nova-db-sync"]["metadata"]["uid"]
    sim.messages["nova-db-expand"] = check_line(0)
    sim.held_jobs |= {"nova-db-expand"} if abort_in == "Expanding" else {"nova-db-migrate"}
    await c.edit(NEW)
    reason = "ExpandInProgress" if abort_in == "Expanding" else "MigrateInProgress"
    await c.until(at(abort_in, reason))
    await c.wait_jobs({"nova-db-expand"} if abort_in == "Expanding" else {"nova-db-migrate"})

    await c.edit(OLD)  # release and image reverted in one edit (§8.2)
    nova = await c.until(lambda n: phase(n) == "" and is_ready(n), 60)
    assert nova["status"]["installedRelease"] == OLD
    assert "targetRelease" not in nova["status"]
    assert cond(nova, "DatabaseReady")["reason"] == "DatabaseSynced"
    names = await c.job_names()
    assert not names & set(PHASE_JOBS), names
    assert (await c.jobs())["nova-db-sync"]["metadata"]["uid"] == sync_uid  # still matches: done at once
    event = await c.event("UpgradeAborted")
    assert event == (
        "Normal",
        "UpgradeAborted",
        f"Upgrade {OLD} → {NEW} aborted: spec release reverted to installed release {OLD}",
    )
    assert set((await c.images()).values()) == {f"{IMAGE}:{OLD}"}


async def test_a_patch_bump_performs_no_phase(cluster: Cluster) -> None:
    c = cluster
    await c.ready()
    sync_uid = (await c.jobs())["nova-db-sync"]["metadata"]["uid"]
    phases: set[str] = set()

    def seen(n: Object) -> bool:
        phases.add(phase(n))
        return is_ready(n) and n["metadata"]["generation"] == n["status"].get("observedGeneration")

    await c.edit(OLD, f"{OLD}-p1")
    await c.until(lambda n: bool(phases.add(phase(n))) or n["status"]["observedGeneration"] == 2, 30)
    await c.wait_image("nova", f"{IMAGE}:{OLD}-p1")
    nova = await c.until(seen, 60)
    assert phases == {""}
    assert nova["status"]["installedRelease"] == OLD
    jobs = await c.jobs()
    assert not set(jobs) & set(PHASE_JOBS)
    assert jobs["nova-db-sync"]["metadata"]["uid"] != sync_uid  # re-run on the new image
    assert jobs["nova-db-sync"]["spec"]["template"]["spec"]["containers"][0]["image"] == f"{IMAGE}:{OLD}-p1"
    assert set((await c.images()).values()) == {f"{IMAGE}:{OLD}-p1"}
    assert not [e for e in await c.events() if e[1].startswith("Upgrade")]
    assert (await c.admin.get(NOVAS, "nova", c.ns))["status"].get("upgradePhase") is None


async def test_a_third_release_mid_upgrade_is_refused_until_set_back_to_the_target(cluster: Cluster) -> None:
    c, sim = cluster, cluster.sim
    await c.ready()
    sim.messages["nova-db-expand"] = check_line(0)
    sim.held_jobs.add("nova-db-migrate")
    await c.edit(NEW)
    await c.until(at("Migrating", "MigrateInProgress"))
    await c.edit("2027.1")
    nova = await c.until(at("Migrating", "UpgradeTargetChanged"))
    assert nova["status"]["targetRelease"] == NEW
    assert nova["status"]["installedRelease"] == OLD
    event = await c.event("UpgradeTargetChanged")
    assert event[0] == "Warning"
    assert "2027.1" in event[2]
    assert set((await c.images()).values()) == {f"{IMAGE}:{OLD}"}
    await c.edit(NEW)  # continue
    sim.held_jobs.clear()
    nova = await c.until(lambda n: n["status"].get("installedRelease") == NEW and is_ready(n), 60)
    assert "upgradePhase" not in nova["status"]


async def test_a_release_bump_without_the_image_parks_on_the_mismatch(cluster: Cluster) -> None:
    c = cluster
    await c.ready()
    await c.edit(NEW, OLD)  # only the release: the old nova-manage would no-op the phases
    nova = await c.until(lambda n: db_reason(n) == "ImageReleaseMismatch")
    assert phase(nova) == ""
    assert not await c.job_names() & set(PHASE_JOBS)
    await c.edit(NEW)  # the image follows: the upgrade starts
    await c.until(lambda n: n["status"].get("targetRelease") == NEW)
    assert (await c.event("UpgradeInitiated"))[2] == f"Upgrade initiated: {OLD} → {NEW}"
