"""The upgrade glue on an in-memory API: Jobs run through the Database step's mechanics, exactly-once
metrics and pre-flight report, the abort's deletions, the flip of the API step."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from nova_operator.kube.errors import Forbidden
from nova_operator.kube.resources import DEPLOYMENTS, JOBS, NOVAS, PODS, ResourceRef
from nova_operator.kube.types import Object
from nova_operator.models.nova import Nova
from nova_operator.reconcilers.claims import job_uid_annotation
from nova_operator.reconcilers.metrics import NovaMetrics
from nova_operator.reconcilers.nova import upgrade as glue
from nova_operator.reconcilers.nova.context import PassContext
from nova_operator.renderers import jobs
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.echoes import OwnWrites
from nova_operator.runtime.request import Request, Result
from tests.unit.reconcilers.fakes import FakeEvents, FakeKube

SAMPLE = Path(__file__).resolve().parents[2] / "renderers" / "fixtures" / "minimal.yaml"
NS = "openstack"
UID = "6f1c2a8e-0000-4000-8000-000000000001"
T0 = "2026-01-01T00:00:00Z"
T1 = "2026-01-01T00:01:00Z"


class Kube(FakeKube):
    def __init__(self) -> None:
        super().__init__()
        self.fail_delete: type[Exception] | None = None
        self._uids = 0

    def put(self, ref: ResourceRef, obj: Object) -> Object:
        meta = obj.setdefault("metadata", {})
        if "uid" not in meta:
            self._uids += 1
            meta["uid"] = f"uid-{self._uids}"
            meta.setdefault("creationTimestamp", T0)
        return super().put(ref, obj)

    async def apply(
        self, ref: ResourceRef, body: Mapping[str, Any], *, namespace: str | None = None, **_: Any
    ) -> Object:
        self.calls.append(("apply", str(ref), body["metadata"]["name"]))
        return self.put(ref, copy.deepcopy(dict(body)))

    async def list(
        self, ref: ResourceRef, namespace: str | None = None, *, label_selector: str | None = None, **_: Any
    ) -> Object:
        self.calls.append(("list", str(ref), label_selector or ""))
        want = dict(s.split("=", 1) for s in (label_selector or "").split(",") if s)
        items = [
            copy.deepcopy(o)
            for (r, ns, _n), o in self.store.items()
            if r == str(ref)
            and ns == (namespace or "")
            and all((o["metadata"].get("labels") or {}).get(k) == v for k, v in want.items())
        ]
        return {"items": items}

    async def delete(self, ref: ResourceRef, name: str, namespace: str | None = None, **kw: Any) -> None:
        if self.fail_delete is not None:
            self.calls.append(("delete", str(ref), name))
            raise self.fail_delete("injected")
        await super().delete(ref, name, namespace, **kw)

    def job(self, suffix: str) -> Object | None:
        return self.store.get((str(JOBS), NS, f"nova-{suffix}"))


class Env:
    """One Nova in the fake API; ``run`` builds a fresh pass over it like the controller does."""

    def __init__(self, kube: Kube, events: FakeEvents) -> None:
        self.kube, self.events = kube, events
        body = yaml.safe_load(SAMPLE.read_text())
        body["spec"]["openStackRelease"] = "2026.1"
        body["spec"]["image"]["tag"] = "2026.1"
        body["status"] = {"installedRelease": "2026.1"}
        kube.put(NOVAS, body)

    @property
    def obj(self) -> Object:
        return self.kube.store[(str(NOVAS), NS, "nova")]

    def bump(self, release: str, tag: str | None = None) -> None:
        self.obj["spec"]["openStackRelease"] = release
        self.obj["spec"]["image"]["tag"] = tag or release

    def context(self) -> PassContext:
        obj = copy.deepcopy(self.obj)
        caches = {}
        for ref in (JOBS, DEPLOYMENTS):
            cache = Cache(str(ref))
            for (r, _ns, _n), o in self.kube.store.items():
                if r == str(ref):
                    cache.upsert(copy.deepcopy(o))
            caches[ref] = cache
        ctx = PassContext(
            kube=self.kube,  # type: ignore[arg-type]
            obj=obj,
            nova=Nova.model_validate(obj),
            status=copy.deepcopy(obj.get("status") or {}),
            now=lambda: datetime(2026, 1, 1, tzinfo=UTC),
            events=self.events,
            caches=caches,
            metrics=NovaMetrics.of(self.kube.metrics),
        )
        ctx.state.config_map = "nova-config-0123"
        return ctx

    def save(self, ctx: PassContext) -> None:
        """What the status write at the end of the pass persists (annotations came with their patch)."""
        self.obj["status"] = copy.deepcopy(ctx.status)
        self.obj["metadata"] = copy.deepcopy(self.kube.store[(str(NOVAS), NS, "nova")]["metadata"])

    async def run(self) -> Result:
        ctx = self.context()
        try:
            return await glue.dispatch(ctx, steady)
        finally:
            self.save(ctx)

    @property
    def status(self) -> Object:
        return dict(self.obj.get("status") or {})

    def database_ready(self) -> tuple[str, str]:
        c = next(c for c in self.status["conditions"] if c["type"] == "DatabaseReady")
        return c["status"], c["reason"]

    def finish(self, suffix: str, *, failed: bool = False, message: str | None = None) -> None:
        job = self.kube.job(suffix)
        assert job is not None, suffix
        kind = "Failed" if failed else "Complete"
        job["status"] = {"conditions": [{"type": kind, "status": "True", "lastTransitionTime": T1}]}
        if failed:
            job["status"]["conditions"][0]["message"] = "Job has reached the specified backoff limit"
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{job['metadata']['name']}-{job['metadata']['uid']}",
                "namespace": NS,
                "labels": {"batch.kubernetes.io/job-name": job["metadata"]["name"]},
                "creationTimestamp": T0,
            },
            "status": {
                "phase": "Failed" if failed else "Succeeded",
                "containerStatuses": (
                    [{"state": {"terminated": {"message": message}}}] if message is not None else []
                ),
            },
        }
        self.kube.put(PODS, pod)

    def emitted(self) -> list[tuple[str, str]]:
        return [(t, r) for t, r, _ in self.events.emitted]


STEADY_CALLS: list[str] = []


async def steady(ctx: PassContext) -> Result:
    STEADY_CALLS.append(ctx.name)
    return Result()


@pytest.fixture
def env(events: FakeEvents) -> Env:
    return Env(Kube(), events)


def metric(env: Env, result: str) -> float:
    value = env.kube.metrics.registry.get_sample_value(
        "nova_operator_db_sync_total", {"nova": "nova", "namespace": NS, "result": result}
    )
    return float(value or 0.0)


async def test_a_full_upgrade_through_the_glue(env: Env) -> None:
    env.bump("2026.2")
    assert await env.run() == Result(requeue_after=0.0)  # initiation: no Job yet
    assert env.kube.job("db-expand") is None
    assert env.status["upgradePhase"] == "Expanding"
    assert env.status["targetRelease"] == "2026.2"
    assert env.emitted() == [("Normal", "UpgradeInitiated")]

    assert await env.run() == Result(requeue_after=30.0)  # creates the expand Job
    expand = env.kube.job("db-expand")
    assert expand is not None
    assert expand["spec"]["template"]["spec"]["containers"][0]["image"] == "ghcr.io/c5c3/nova:2026.2"
    assert env.database_ready() == ("False", "ExpandInProgress")
    assert await env.run() == Result(requeue_after=30.0)  # running: no event
    assert len(env.events.emitted) == 1

    env.finish("db-expand", message="nova-status upgrade check exit 1\n")
    assert await env.run() == Result(requeue_after=0.0)
    assert env.emitted()[1:] == [("Warning", "UpgradeCheckWarnings"), ("Normal", "ExpandComplete")]
    assert env.events.emitted[1][2] == "nova-status upgrade check exit 1"
    assert env.status["upgradePhase"] == "Migrating"
    assert env.database_ready() == ("False", "MigrateInProgress")
    assert metric(env, "succeeded") == 1
    annotations = env.obj["metadata"]["annotations"]
    assert annotations[job_uid_annotation("db-expand")] == expand["metadata"]["uid"]
    assert annotations[job_uid_annotation("db-expand-check")] == expand["metadata"]["uid"]

    assert await env.run() == Result(requeue_after=30.0)  # creates the migrate Job
    migrate = env.kube.job("db-migrate")
    assert migrate is not None
    assert migrate["spec"]["template"]["spec"]["containers"][0]["command"][-2:] == ["cell_v2", "list_cells"]
    env.finish("db-migrate")
    assert await env.run() == Result(requeue_after=0.0)
    assert env.status["upgradePhase"] == "RollingUpdate"
    assert env.emitted()[-1] == ("Normal", "MigrateComplete")

    assert await env.run() == Result()  # zero: the workload steps roll on this pass
    assert env.database_ready() == ("False", "UpgradeRollingUpdate")

    # the API step flips once every role is out on the new image
    for role in ("nova-conductor", "nova-scheduler", "nova-metadata", "nova-novncproxy", "nova"):
        env.kube.put(DEPLOYMENTS, deployment(role, "ghcr.io/c5c3/nova:2026.2"))
    ctx = env.context()
    api = env.kube.store[(str(DEPLOYMENTS), NS, "nova")]
    assert await glue.rollout_flip(ctx, api) == Result(requeue_after=1.0)
    env.save(ctx)
    assert env.status["upgradePhase"] == "Contracting"
    assert env.emitted()[-1] == ("Normal", "DeploymentRolloutComplete")

    assert await env.run() == Result(requeue_after=30.0)
    assert env.database_ready() == ("False", "ContractInProgress")
    env.finish("db-contract")
    ctx = env.context()
    assert await glue.dispatch(ctx, steady) == Result()
    env.save(ctx)
    # the workload steps of this same pass render the promoted release (the second roll, §6.2)
    assert ctx.nova.status is not None
    assert (ctx.nova.status.installed_release, ctx.nova.status.upgrade_phase) == ("2026.2", None)
    assert env.status["installedRelease"] == "2026.2"
    assert "targetRelease" not in env.status
    assert "upgradePhase" not in env.status
    assert env.database_ready() == ("True", "DatabaseSynced")
    assert env.emitted()[-1] == ("Normal", "UpgradeComplete")
    assert metric(env, "succeeded") == 3  # expand, migrate, contract: one sample per Job UID

    STEADY_CALLS.clear()
    assert await env.run() == Result()  # the next pass is the steady db-sync path
    assert STEADY_CALLS == ["nova"]


def deployment(name: str, image: str, *, rolled_out: bool = True) -> Object:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS, "generation": 2},
        "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": image}]}}},
        "status": {
            "observedGeneration": 2,
            "replicas": 1,
            "readyReplicas": 1,
            "updatedReplicas": 1 if rolled_out else 0,
        },
    }


async def in_phase(env: Env, phase: str) -> None:
    env.bump("2026.2")
    env.obj["status"].update(targetRelease="2026.2", upgradePhase=phase)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("nova-status upgrade check exit 0\n", ("Normal", "UpgradeCheckCompleted")),
        ("nova-status upgrade check exit 2\n", ("Warning", "UpgradeCheckWarnings")),
        (None, ("Normal", "UpgradeCheckCompleted")),
    ],
)
async def test_the_check_report_is_emitted_once_per_expand_job_uid(
    env: Env, message: str | None, expected: tuple[str, str]
) -> None:
    await in_phase(env, "Expanding")
    await env.run()
    env.finish("db-expand", failed=message is not None and "exit 2" in message, message=message)
    with pytest.raises(glue.UpgradeBlocked) if "exit 2" in (message or "") else contextlib.nullcontext():
        await env.run()
    assert env.emitted()[0] == expected
    before = list(env.events.emitted)
    if "exit 2" in (message or ""):  # the failed Job stays; later passes fail again, no second report
        with pytest.raises(glue.UpgradeBlocked):
            await env.run()
        assert [r for _, r in env.emitted()].count(expected[1]) == 1
        assert env.database_ready() == ("False", "ExpandFailed")
        assert metric(env, "failed") == 1
    else:
        assert env.events.emitted == before


async def test_the_expand_claim_patch_is_the_passs_own_write(env: Env) -> None:
    # The check report's claim patch comes back through the Nova's watch: like every write of the
    # pass (``common.record_claims``), its echo must not wake this Nova again; others it may.
    await in_phase(env, "Expanding")
    await env.run()
    env.finish("db-expand", message="nova-status upgrade check exit 0")
    before = copy.deepcopy(env.obj)
    ctx = env.context()
    ctx.writes = OwnWrites()
    await glue.dispatch(ctx, steady)
    claimed = env.kube.store[(str(NOVAS), NS, "nova")]
    assert claimed["metadata"]["annotations"][job_uid_annotation("db-expand-check")]
    assert not ctx.writes.admit(Request(NS, "nova"), before, claimed)
    assert ctx.writes.admit(Request(NS, "another"), before, claimed)


async def test_unavailable_message_says_so(env: Env) -> None:
    await in_phase(env, "Expanding")
    await env.run()
    env.finish("db-expand", message=None)
    await env.run()
    assert env.events.emitted[0] == ("Normal", "UpgradeCheckCompleted", "exit code unavailable")


async def test_a_failed_dedupe_patch_defers_the_metric_and_the_report(env: Env) -> None:
    await in_phase(env, "Expanding")
    await env.run()
    env.finish("db-expand", message="nova-status upgrade check exit 0")
    env.kube.fail_patch = Forbidden
    await env.run()
    assert ("Warning", "DBSyncMetricEmissionDeferred") in env.emitted()
    assert ("Warning", "UpgradeCheckEventEmissionDeferred") in env.emitted()
    assert ("Normal", "UpgradeCheckCompleted") not in env.emitted()
    assert metric(env, "succeeded") == 0


async def test_a_failed_migrate_job_blocks_and_recovers_when_re_run(env: Env) -> None:
    await in_phase(env, "Migrating")
    await env.run()
    env.finish("db-migrate", failed=True)
    with pytest.raises(glue.UpgradeBlocked) as raised:
        await env.run()
    assert raised.value.reason == "MigrateFailed"
    assert env.database_ready() == ("False", "MigrateFailed")
    assert env.events.emitted[-1] == (
        "Warning",
        "MigrateFailed",
        "Migrate job nova-db-migrate failed: Job has reached the specified backoff limit",
    )
    assert env.status["upgradePhase"] == "Migrating"
    await env.kube.delete(JOBS, "nova-db-migrate", NS)  # the operator's documented fix
    assert await env.run() == Result(requeue_after=30.0)
    assert env.kube.job("db-migrate") is not None
    assert env.database_ready() == ("False", "MigrateInProgress")


async def test_a_changed_template_re_creates_a_failed_phase_job(env: Env) -> None:
    await in_phase(env, "Migrating")
    await env.run()
    env.finish("db-migrate", failed=True)
    old = env.kube.job("db-migrate")
    assert old is not None
    env.obj["spec"]["image"]["tag"] = "2026.2-p1"  # a fixed image: the pod-spec hash changes
    assert await env.run() == Result(requeue_after=30.0)
    new = env.kube.job("db-migrate")
    assert new is not None
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    assert metric(env, "failed") == 1  # the replaced Job is still counted


@pytest.mark.parametrize("phase", ["Expanding", "Migrating", "RollingUpdate", "Contracting"])
async def test_abort_deletes_the_phase_jobs_and_clears_the_upgrade(env: Env, phase: str) -> None:
    await in_phase(env, phase)
    for suffix in ("db-sync", "db-expand", "db-migrate"):
        env.kube.put(
            JOBS,
            jobs.phase_job(Nova.model_validate(env.obj), "db-expand", "cm")
            | {
                "metadata": {
                    "name": f"nova-{suffix}",
                    "namespace": NS,
                    "ownerReferences": [
                        {
                            "controller": True,
                            "uid": UID,
                            "kind": "Nova",
                            "name": "nova",
                            "apiVersion": NOVAS.api_version,
                        }
                    ],
                }
            },
        )
    env.bump("2026.1")
    assert await env.run() == Result(requeue_after=0.0)
    assert env.kube.job("db-expand") is None
    assert env.kube.job("db-migrate") is None
    assert env.kube.job("db-sync") is not None  # not a phase Job
    assert env.status["installedRelease"] == "2026.1"
    assert "targetRelease" not in env.status
    assert "upgradePhase" not in env.status
    assert env.events.emitted == [
        (
            "Normal",
            "UpgradeAborted",
            "Upgrade 2026.1 → 2026.2 aborted: spec release reverted to installed release 2026.1",
        )
    ]


async def test_a_failing_delete_aborts_nothing(env: Env) -> None:
    await in_phase(env, "Migrating")
    env.bump("2026.1")
    env.kube.fail_delete = Forbidden
    with pytest.raises(Forbidden):
        await env.run()
    assert env.status["upgradePhase"] == "Migrating"  # the next pass retries the abort
    assert env.events.emitted == []


async def test_a_foreign_job_of_that_name_is_not_deleted(env: Env) -> None:
    await in_phase(env, "Expanding")
    foreign = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "nova-db-expand",
            "namespace": NS,
            "ownerReferences": [{"controller": True, "uid": "someone-else"}],
        },
    }
    env.kube.put(JOBS, foreign)
    env.bump("2026.1")
    await env.run()
    assert env.kube.job("db-expand") is not None


async def test_run_upgrade_is_the_database_steps_seam(env: Env) -> None:
    env.bump("2026.2")
    ctx = env.context()
    assert await glue.run_upgrade(ctx, "2026.1", "2026.2") == Result(requeue_after=0.0)
    assert ctx.status["upgradePhase"] == "Expanding"


async def test_validation_failures_raise_with_their_reason(env: Env) -> None:
    env.bump("2027.1")
    with pytest.raises(glue.UpgradeBlocked) as raised:
        await env.run()
    assert raised.value.reason == "UpgradePathInvalid"
    assert env.emitted() == [("Warning", "UpgradePathInvalid")]
    assert "upgradePhase" not in env.status


@pytest.mark.parametrize(
    ("deployments", "flips"),
    [
        ({}, False),  # no role Deployment at all
        ({"nova-conductor": "ghcr.io/c5c3/nova:2026.1"}, False),  # still the old image
        ({"nova-metadata": None}, False),  # missing
        ({"nova-novncproxy": "not-rolled-out"}, False),
        ({"nova": "not-rolled-out"}, False),
        ({"nova-novncproxy": None, "__console_disabled__": "x"}, True),
    ],
)
async def test_the_flip_gate(env: Env, deployments: dict[str, str | None], flips: bool) -> None:
    await in_phase(env, "RollingUpdate")
    if "__console_disabled__" in deployments:
        env.obj["spec"]["consoleProxy"] = {"enabled": False}
    new = "ghcr.io/c5c3/nova:2026.2"
    for role in ("nova-conductor", "nova-scheduler", "nova-metadata", "nova-novncproxy", "nova"):
        wanted = deployments.get(role, new) if deployments else (new if role == "nova" else None)
        if role in deployments and deployments[role] is None:
            continue
        if wanted is None:
            continue
        rolled = wanted != "not-rolled-out"
        env.kube.put(DEPLOYMENTS, deployment(role, new if not rolled else wanted, rolled_out=rolled))
    ctx = env.context()
    api = env.kube.store[(str(DEPLOYMENTS), NS, "nova")]
    result = await glue.rollout_flip(ctx, api)
    if flips:
        assert result == Result(requeue_after=1.0)
        assert ctx.status["upgradePhase"] == "Contracting"
    else:
        assert result == Result(requeue_after=10.0)
        assert ctx.status["upgradePhase"] == "RollingUpdate"
        reasons = {c["type"]: c["reason"] for c in ctx.status["conditions"]}
        assert reasons["DeploymentReady"] == "WaitingForDeployment"


async def test_no_flip_outside_rolling_update(env: Env) -> None:
    env.kube.put(DEPLOYMENTS, deployment("nova", "ghcr.io/c5c3/nova:2026.1"))
    ctx = env.context()
    assert await glue.rollout_flip(ctx, env.kube.store[(str(DEPLOYMENTS), NS, "nova")]) is None


async def test_the_report_ignores_a_pod_of_a_replaced_expand_job(env: Env) -> None:
    await in_phase(env, "Expanding")
    await env.run()
    stale = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "nova-db-expand-old",
            "namespace": NS,
            "labels": {
                "batch.kubernetes.io/job-name": "nova-db-expand",
                "batch.kubernetes.io/controller-uid": "gone",
            },
            "creationTimestamp": T1,
        },
        "status": {
            "phase": "Succeeded",
            "containerStatuses": [{"state": {"terminated": {"message": "stale exit 0"}}}],
        },
    }
    env.kube.put(PODS, stale)
    env.finish("db-expand", message="nova-status upgrade check exit 1")
    await env.run()
    assert env.events.emitted[0] == ("Warning", "UpgradeCheckWarnings", "nova-status upgrade check exit 1")
