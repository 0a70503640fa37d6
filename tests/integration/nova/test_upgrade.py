"""The upgrade glue on the real API server: Jobs run through the Database step's mechanics,
exactly-once metrics and pre-flight report, the abort's deletions, the flip of the API step.

One Nova stored by kube-apiserver; ``Env.run`` builds a fresh pass over it as the controller does
(the caches hold what the server holds) and writes the pass's status with the real status write.
The test plays the Job controller (a pod carrying the termination message, the Job's terminal
conditions with the 1.33+ success and failure criteria) and the Deployment controller, through the
status subresources. The stand-in this replaces kept a third ``apply`` of its own and faked uids,
creation times and label selection.
"""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path

import pytest
import yaml

from nova_operator.kube import Kube
from nova_operator.kube.errors import Forbidden, NotFound
from nova_operator.kube.resources import DEPLOYMENTS, JOBS, NOVAS, PODS
from nova_operator.kube.types import Object
from nova_operator.models.nova import Nova
from nova_operator.reconcilers.claims import job_uid_annotation
from nova_operator.reconcilers.nova import config
from nova_operator.reconcilers.nova import upgrade as glue
from nova_operator.reconcilers.nova.context import PassContext
from nova_operator.reconcilers.status import snapshot_status, write_status
from nova_operator.renderers import jobs
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.echoes import OwnWrites
from nova_operator.runtime.request import Request, Result
from tests.integration.nova.passes import Emitted, make_ctx
from tests.integration.nova.requests import Recorder
from tests.integration.stuck_pod import SECRET, owner_of, stuck_pod
from tests.policy_drops import drop_rule

SAMPLE = Path(__file__).resolve().parents[2] / "unit" / "renderers" / "fixtures" / "minimal.yaml"
NEW = "ghcr.io/c5c3/nova:2026.2"
ROLES = ("nova-conductor", "nova-scheduler", "nova-metadata", "nova-novncproxy", "nova")


class Env:
    """One Nova on the API server; ``run`` builds a fresh pass over it like the controller does."""

    def __init__(self, admin: Kube, kube: Recorder, ns: str) -> None:
        self.admin, self.kube, self.ns = admin, kube, ns
        self.events = Emitted()
        self.obj: Object = {}

    async def setup(self) -> Env:
        body = yaml.safe_load(SAMPLE.read_text())
        body["metadata"] = {"name": "nova"}
        body["spec"]["openStackRelease"] = "2026.1"
        body["spec"]["image"]["tag"] = "2026.1"
        await self.admin.create(NOVAS, body, self.ns)
        await self.admin.patch_status(NOVAS, "nova", {"status": {"installedRelease": "2026.1"}}, self.ns)
        await self.refresh()
        return self

    async def refresh(self) -> None:
        self.obj = await self.admin.get(NOVAS, "nova", self.ns)

    @property
    def uid(self) -> str:
        return str(self.obj["metadata"]["uid"])

    async def edit(self, spec: Object) -> None:
        """The user edits the spec."""
        await self.admin.patch(NOVAS, "nova", {"spec": spec}, self.ns)
        await self.refresh()

    async def bump(self, release: str, tag: str | None = None) -> None:
        await self.edit({"openStackRelease": release, "image": {"tag": tag or release}})

    async def context(self) -> PassContext:
        obj = await self.admin.get(NOVAS, "nova", self.ns)
        caches = {}
        for ref in (JOBS, DEPLOYMENTS, PODS):
            cache = Cache(str(ref))
            for o in (await self.admin.list(ref, self.ns))["items"]:
                cache.upsert(o)
            caches[ref] = cache
        ctx = make_ctx(self.kube, obj, events=self.events, caches=caches)
        ctx.status = copy.deepcopy(obj.get("status") or {})
        ctx.initial = snapshot_status(obj)
        ctx.state.config_map = "nova-config-0123"
        return ctx

    async def save(self, ctx: PassContext) -> None:
        """The status write at the end of the pass (annotations came with their own patch)."""
        await write_status(self.kube, NOVAS, ctx.obj, ctx.status, ctx.initial)
        await self.refresh()

    async def run(self) -> Result:
        ctx = await self.context()
        try:
            return await glue.dispatch(ctx, steady)
        finally:
            await self.save(ctx)

    @property
    def status(self) -> Object:
        return dict(self.obj.get("status") or {})

    def database_ready(self) -> tuple[str, str]:
        c = next(c for c in self.status["conditions"] if c["type"] == "DatabaseReady")
        return c["status"], c["reason"]

    async def job(self, suffix: str) -> Object | None:
        try:
            return await self.admin.get(JOBS, f"nova-{suffix}", self.ns)
        except NotFound:
            return None

    async def finish(self, suffix: str, *, failed: bool = False, message: str | None = None) -> None:
        """The Job controller: a pod with the termination message, then the Job's terminal status."""
        job = await self.job(suffix)
        assert job is not None, suffix
        name, uid, t = job["metadata"]["name"], job["metadata"]["uid"], job["metadata"]["creationTimestamp"]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{name}-{uid[:5]}", "labels": {"batch.kubernetes.io/job-name": name}},
            "spec": {"containers": [{"name": "c", "image": "x"}], "restartPolicy": "Never"},
        }
        await self.admin.create(PODS, pod, self.ns)
        await self.pod_status(pod["metadata"]["name"], failed=failed, message=message)
        if failed:
            criteria = ("FailureTarget", "Failed", "BackoffLimitExceeded")
            counts: Object = {"failed": 1}
        else:
            criteria = ("SuccessCriteriaMet", "Complete", "CompletionsReached")
            counts = {"succeeded": 1, "completionTime": t}
        said = "Job has reached the specified backoff limit" if failed else "ok"
        conds = [
            {"type": kind, "status": "True", "reason": criteria[2], "message": said, "lastTransitionTime": t}
            for kind in criteria[:2]
        ]
        status = {"startTime": t, **counts, "conditions": conds}
        await self.admin.patch_status(JOBS, name, {"status": status}, self.ns)

    async def pod_status(self, name: str, *, failed: bool = False, message: str | None = None) -> None:
        statuses = []
        if message is not None:
            terminated = {"exitCode": 1 if failed else 0, "reason": "Completed", "message": message}
            statuses = [
                {
                    "name": "c",
                    "image": "x",
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"terminated": terminated},
                }
            ]
        phase = "Failed" if failed else "Succeeded"
        await self.admin.patch_status(
            PODS, name, {"status": {"phase": phase, "containerStatuses": statuses}}, self.ns
        )

    async def deployment(self, name: str, image: str, *, rolled_out: bool = True) -> Object:
        """A role Deployment as its controller leaves it (rolled out, or not yet)."""
        body = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "c", "image": image}]},
                },
            },
        }
        made = await self.admin.create(DEPLOYMENTS, body, self.ns)
        status = {
            "observedGeneration": made["metadata"]["generation"],
            "replicas": 1,
            "readyReplicas": 1,
            "updatedReplicas": 1 if rolled_out else 0,
        }
        return await self.admin.patch_status(DEPLOYMENTS, name, {"status": status}, self.ns)

    def emitted(self) -> list[tuple[str, str]]:
        return [(t, r) for t, r, _ in self.events.emitted]


STEADY_CALLS: list[str] = []


async def steady(ctx: PassContext) -> Result:
    STEADY_CALLS.append(ctx.name)
    return Result()


@pytest.fixture
async def env(admin: Kube, namespace: str) -> Env:
    return await Env(admin, Recorder.of(admin), namespace).setup()


def metric(env: Env, result: str) -> float:
    value = env.kube.metrics.registry.get_sample_value(
        "nova_operator_db_sync_total", {"nova": "nova", "namespace": env.ns, "result": result}
    )
    return float(value or 0.0)


async def in_phase(env: Env, phase: str) -> None:
    await env.bump("2026.2")
    await env.admin.patch_status(
        NOVAS, "nova", {"status": {"targetRelease": "2026.2", "upgradePhase": phase}}, env.ns
    )
    await env.refresh()


async def test_a_full_upgrade_through_the_glue(env: Env) -> None:
    await env.bump("2026.2")
    assert await env.run() == Result(requeue_after=0.0)  # initiation: no Job yet
    assert await env.job("db-expand") is None
    assert env.status["upgradePhase"] == "Expanding"
    assert env.status["targetRelease"] == "2026.2"
    assert env.emitted() == [("Normal", "UpgradeInitiated")]

    assert await env.run() == Result(requeue_after=30.0)  # creates the expand Job
    expand = await env.job("db-expand")
    assert expand is not None
    assert expand["spec"]["template"]["spec"]["containers"][0]["image"] == NEW
    assert env.database_ready() == ("False", "ExpandInProgress")
    assert await env.run() == Result(requeue_after=30.0)  # running: no event
    assert len(env.events.emitted) == 1

    await env.finish("db-expand", message="nova-status upgrade check exit 1\n")
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
    migrate = await env.job("db-migrate")
    assert migrate is not None
    assert migrate["spec"]["template"]["spec"]["containers"][0]["command"][-2:] == ["cell_v2", "list_cells"]
    await env.finish("db-migrate")
    assert await env.run() == Result(requeue_after=0.0)
    assert env.status["upgradePhase"] == "RollingUpdate"
    assert env.emitted()[-1] == ("Normal", "MigrateComplete")

    assert await env.run() == Result()  # zero: the workload steps roll on this pass
    assert env.database_ready() == ("False", "UpgradeRollingUpdate")

    # the API step flips once every role is out on the new image
    for role in ROLES:
        await env.deployment(role, NEW)
    ctx = await env.context()
    api = await env.admin.get(DEPLOYMENTS, "nova", env.ns)
    assert await glue.rollout_flip(ctx, api) == Result(requeue_after=1.0)
    await env.save(ctx)
    assert env.status["upgradePhase"] == "Contracting"
    assert env.emitted()[-1] == ("Normal", "DeploymentRolloutComplete")

    assert await env.run() == Result(requeue_after=30.0)
    assert env.database_ready() == ("False", "ContractInProgress")
    await env.finish("db-contract")
    ctx = await env.context()
    assert await glue.dispatch(ctx, steady) == Result()
    await env.save(ctx)
    # the workload steps of this same pass render the promoted release (the second roll, §6.2)
    assert ctx.nova.status is not None
    assert (ctx.nova.status.installed_release, ctx.nova.status.upgrade_phase) == ("2026.2", None)
    assert env.status["installedRelease"] == "2026.2"
    assert "targetRelease" not in env.status  # removed from the stored status, not merged over
    assert "upgradePhase" not in env.status
    assert env.database_ready() == ("True", "DatabaseSynced")
    assert env.emitted()[-1] == ("Normal", "UpgradeComplete")
    assert metric(env, "succeeded") == 3  # expand, migrate, contract: one sample per Job UID

    STEADY_CALLS.clear()
    assert await env.run() == Result()  # the next pass is the steady db-sync path
    assert STEADY_CALLS == ["nova"]


async def test_an_expand_pod_that_cannot_pull_its_image_is_named_in_the_phase_condition(env: Env) -> None:
    """Issue 37 item 5: "Expand phase running" for minutes said nothing of an ErrImagePull."""
    await in_phase(env, "Expanding")
    await env.run()  # creates the expand Job
    expand = await env.job("db-expand")
    assert expand is not None
    labels = expand["spec"]["template"]["metadata"]["labels"]
    await stuck_pod(
        env.admin,
        env.ns,
        "nova-db-expand-x7k2p",
        labels=labels,
        owner=owner_of(expand),
        reason="ErrImagePull",
        image=NEW,
    )
    assert await env.run() == Result(requeue_after=30.0)
    c = next(c for c in env.status["conditions"] if c["type"] == "DatabaseReady")
    assert (c["status"], c["reason"]) == ("False", "ExpandInProgress")
    assert c["message"].startswith("Expand phase running (nova-db-expand): ")
    assert c["message"].endswith(f": pod nova-db-expand-x7k2p cannot start: ErrImagePull (image {NEW})")
    assert SECRET not in str(env.obj)
    # the same state on the next pass: the same message, so no status write
    rv = env.obj["metadata"]["resourceVersion"]
    assert await env.run() == Result(requeue_after=30.0)
    assert env.obj["metadata"]["resourceVersion"] == rv


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
    await env.finish("db-expand", failed=message is not None and "exit 2" in message, message=message)
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
    await env.finish("db-expand", message="nova-status upgrade check exit 0")
    before = copy.deepcopy(env.obj)
    ctx = await env.context()
    ctx.writes = OwnWrites()
    await glue.dispatch(ctx, steady)
    claimed = await env.admin.get(NOVAS, "nova", env.ns)
    assert claimed["metadata"]["annotations"][job_uid_annotation("db-expand-check")]
    assert not ctx.writes.admit(Request(env.ns, "nova"), before, claimed)
    assert ctx.writes.admit(Request(env.ns, "another"), before, claimed)


async def test_unavailable_message_says_so(env: Env) -> None:
    await in_phase(env, "Expanding")
    await env.run()
    await env.finish("db-expand", message=None)
    await env.run()
    assert env.events.emitted[0] == ("Normal", "UpgradeCheckCompleted", "exit code unavailable")


async def test_a_refused_dedupe_patch_defers_the_metric_and_the_report(env: Env) -> None:
    """The claim patch carries the pass's resourceVersion; someone else wrote the Nova meanwhile, so
    the server refuses it (409), and neither the metric nor the report goes out on this pass."""
    await in_phase(env, "Expanding")
    await env.run()
    await env.finish("db-expand", message="nova-status upgrade check exit 0")
    ctx = await env.context()
    await env.admin.patch(NOVAS, "nova", {"metadata": {"labels": {"edited": "yes"}}}, env.ns)
    await glue.dispatch(ctx, steady)
    assert ("Warning", "DBSyncMetricEmissionDeferred") in env.emitted()
    assert ("Warning", "UpgradeCheckEventEmissionDeferred") in env.emitted()
    assert ("Normal", "UpgradeCheckCompleted") not in env.emitted()
    assert metric(env, "succeeded") == 0
    annotations = (await env.admin.get(NOVAS, "nova", env.ns))["metadata"].get("annotations") or {}
    assert job_uid_annotation("db-expand") not in annotations


async def test_a_forbidden_dedupe_patch_defers_the_metric_and_the_report(env: Env) -> None:
    await in_phase(env, "Expanding")
    await env.run()
    await env.finish("db-expand", message="nova-status upgrade check exit 0")
    env.kube.refuse["patch"] = Forbidden("injected")
    ctx = await env.context()
    await glue.dispatch(ctx, steady)
    assert ("Warning", "DBSyncMetricEmissionDeferred") in env.emitted()
    assert ("Warning", "UpgradeCheckEventEmissionDeferred") in env.emitted()
    assert ("Normal", "UpgradeCheckCompleted") not in env.emitted()
    assert metric(env, "succeeded") == 0


async def test_a_failed_migrate_job_blocks_and_recovers_when_re_run(env: Env) -> None:
    await in_phase(env, "Migrating")
    await env.run()
    await env.finish("db-migrate", failed=True)
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
    await env.admin.delete(JOBS, "nova-db-migrate", env.ns)  # the operator's documented fix
    assert await env.run() == Result(requeue_after=30.0)
    assert await env.job("db-migrate") is not None
    assert env.database_ready() == ("False", "MigrateInProgress")


async def test_a_changed_template_re_creates_a_failed_phase_job(env: Env) -> None:
    await in_phase(env, "Migrating")
    await env.run()
    await env.finish("db-migrate", failed=True)
    old = await env.job("db-migrate")
    assert old is not None
    await env.edit({"image": {"tag": "2026.2-p1"}})  # a fixed image: the pod-spec hash changes
    assert await env.run() == Result(requeue_after=30.0)
    new = await env.job("db-migrate")
    assert new is not None
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    assert new["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":2026.2-p1")
    assert metric(env, "failed") == 1  # the replaced Job is still counted


def phase_job(env: Env, name: str, owner_uid: str) -> Object:
    body = jobs.phase_job(Nova.model_validate(env.obj), "db-expand", "cm")
    owner = {"apiVersion": NOVAS.api_version, "kind": "Nova", "name": "nova", "uid": owner_uid}
    return body | {"metadata": {"name": name, "ownerReferences": [{**owner, "controller": True}]}}


@pytest.mark.parametrize("phase", ["Expanding", "Migrating", "RollingUpdate", "Contracting"])
async def test_abort_deletes_the_phase_jobs_and_clears_the_upgrade(env: Env, phase: str) -> None:
    await in_phase(env, phase)
    for suffix in ("db-sync", "db-expand", "db-migrate"):
        await env.admin.create(JOBS, phase_job(env, f"nova-{suffix}", env.uid), env.ns)
    await env.bump("2026.1")
    assert await env.run() == Result(requeue_after=0.0)
    assert await env.job("db-expand") is None
    assert await env.job("db-migrate") is None
    assert await env.job("db-sync") is not None  # not a phase Job
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
    await env.admin.create(JOBS, phase_job(env, "nova-db-migrate", env.uid), env.ns)
    await env.bump("2026.1")
    env.kube.refuse["delete"] = Forbidden("injected")
    with pytest.raises(Forbidden):
        await env.run()
    assert env.status["upgradePhase"] == "Migrating"  # the next pass retries the abort
    assert env.events.emitted == []
    assert await env.job("db-migrate") is not None


async def test_a_foreign_job_of_that_name_is_not_deleted(env: Env) -> None:
    await in_phase(env, "Expanding")
    other = await env.admin.create(
        NOVAS,
        {
            "apiVersion": NOVAS.api_version,
            "kind": "Nova",
            "metadata": {"name": "other"},
            "spec": env.obj["spec"],
        },
        env.ns,
    )
    await env.admin.create(JOBS, phase_job(env, "nova-db-expand", other["metadata"]["uid"]), env.ns)
    await env.bump("2026.1")
    await env.run()
    assert await env.job("db-expand") is not None


async def test_run_upgrade_is_the_database_steps_seam(env: Env) -> None:
    await env.bump("2026.2")
    ctx = await env.context()
    assert await glue.run_upgrade(ctx, "2026.1", "2026.2") == Result(requeue_after=0.0)
    assert ctx.status["upgradePhase"] == "Expanding"


async def test_validation_failures_raise_with_their_reason(env: Env) -> None:
    await env.bump("2027.1")
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
        await env.edit({"consoleProxy": {"enabled": False, "gateway": None}})
    for role in ROLES:
        wanted = deployments.get(role, NEW) if deployments else (NEW if role == "nova" else None)
        if role in deployments and deployments[role] is None:
            continue
        if wanted is None:
            continue
        rolled = wanted != "not-rolled-out"
        await env.deployment(role, NEW if not rolled else wanted, rolled_out=rolled)
    ctx = await env.context()
    api = await env.admin.get(DEPLOYMENTS, "nova", env.ns)
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
    api = await env.deployment("nova", "ghcr.io/c5c3/nova:2026.1")
    assert await glue.rollout_flip(await env.context(), api) is None


async def test_the_report_ignores_a_pod_of_a_replaced_expand_job(env: Env) -> None:
    await in_phase(env, "Expanding")
    await env.run()
    stale = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "nova-db-expand-old",
            "labels": {
                "batch.kubernetes.io/job-name": "nova-db-expand",
                "batch.kubernetes.io/controller-uid": "gone",
            },
        },
        "spec": {"containers": [{"name": "c", "image": "x"}], "restartPolicy": "Never"},
    }
    await env.admin.create(PODS, stale, env.ns)
    await env.pod_status("nova-db-expand-old", message="stale exit 0")
    await env.finish("db-expand", message="nova-status upgrade check exit 1")
    await env.run()
    assert env.events.emitted[0] == ("Warning", "UpgradeCheckWarnings", "nova-status upgrade check exit 1")


async def test_a_policy_rule_the_target_release_drops_holds_the_upgrade_before_it_starts(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38 item 3: the Config step names the rule, and the Database step starts nothing."""
    rule = "os_compute_api:os-hypervisors:list"
    drop_rule(monkeypatch, "2026.2", rule)
    await env.edit({"policy": {"rules": {rule: "role:admin"}}})
    await env.bump("2026.2")

    async def one_pass() -> Result:
        ctx = await env.context()
        try:
            await config.reconcile_config(ctx)
            return await glue.dispatch(ctx, steady)
        finally:
            await env.save(ctx)

    result = await one_pass()
    secrets_ready = next(c for c in env.status["conditions"] if c["type"] == "SecretsReady")
    assert (secrets_ready["status"], secrets_ready["reason"]) == ("False", "ConfigError")
    dropped = f"spec.policy.rules[{rule}]: nova 2026.2 drops this policy rule (nova 2026.1 registers it)"
    assert secrets_ready["message"] == dropped
    assert env.database_ready() == ("False", "UpgradeHeldByPolicy")
    database_ready = next(c for c in env.status["conditions"] if c["type"] == "DatabaseReady")
    assert database_ready["message"] == f"upgrade 2026.1 → 2026.2 not started: {dropped}"
    assert result.requeue_after == 30.0
    assert "upgradePhase" not in env.status
    assert "targetRelease" not in env.status
    assert await env.job("db-expand") is None
    assert [r for _, r, _ in env.events.emitted] == ["ConfigError"]

    await env.edit({"policy": None})  # the rule removed: the upgrade starts on the next pass
    await one_pass()
    assert (env.status["upgradePhase"], env.status["targetRelease"]) == ("Expanding", "2026.2")
