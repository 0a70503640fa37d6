"""When a pass waiting on the discover-hosts Job comes back (issue 41), on the real API server.

The Job's state machine is the spec's (§15): a finished Job is left alone for 30 s after its terminal
condition, then deleted, and the next pass creates a new one. What changed is only when that next
pass comes: at the grace's end when it is sooner than the 10 s poll, 1 s after the delete. The Job
and its conditions are stored by kube-apiserver; the pass's clock is the stage's ``NOW``. A running
Job whose pod cannot start is named in the step's note (issue 37 item 5).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

import pytest

from nova_operator import naming
from nova_operator.kube.resources import JOBS, PODS, ResourceRef
from nova_operator.kube.types import Object
from nova_operator.reconcilers.compute import host_discovery
from nova_operator.reconcilers.compute.context import ComputePass, ComputeSettings, Listing
from nova_operator.renderers import compute_pool
from nova_operator.runtime.cache import Cache
from nova_operator.secret_refs import SecretRefPolicy
from tests.integration.novacompute.passes import NOW, Stage
from tests.integration.stuck_pod import SECRET, owner_of, stuck_pod

JOB = "nova-discover-hosts"


async def waiting_on(stage: Stage, ended: float | None, condition: str = "Complete") -> ComputePass:
    """A pass over a pool with one Pending node, beside the Nova's discovery Job that ended ``ended``
    seconds before ``NOW`` with ``condition`` (None: still running)."""
    nova = await stage.nova()
    await stage.api_deployment()
    await stage.job(JOB, owner=nova)
    if ended is not None:
        at = (NOW - timedelta(seconds=ended)).strftime("%Y-%m-%dT%H:%M:%SZ")
        await stage.job_ended(JOB, condition, at)
    p, _ = await stage.ledger_pass([{"name": "n1", "phase": "Pending"}], nova=nova)
    return p


async def job_names(stage: Stage) -> list[str]:
    return [j["metadata"]["name"] for j in (await stage.admin.list(JOBS, stage.ns))["items"]]


@pytest.mark.parametrize("ago", [25.0, 29.0])
async def test_within_the_grace_the_pass_comes_back_when_it_ends(stage: Stage, ago: float) -> None:
    p = await waiting_on(stage, ago)
    note = await host_discovery.discover(p, ["n1"])
    assert note == f"discovery Job {JOB} finished and will be replaced"
    assert stage.kube.deleted() == []
    assert await job_names(stage) == [JOB]
    assert p.discovery_due == pytest.approx(30.0 - ago)


async def test_early_in_the_grace_the_due_time_is_past_the_10s_poll_which_still_applies(stage: Stage) -> None:
    p = await waiting_on(stage, 5.0)
    await host_discovery.discover(p, ["n1"])
    assert p.discovery_due == pytest.approx(25.0)  # the Services step takes min(10 s poll, this)


@pytest.mark.parametrize("condition", ["Complete", "Failed"])
async def test_after_the_grace_the_job_is_deleted_and_the_next_pass_comes_in_1s(
    stage: Stage, condition: str
) -> None:
    p = await waiting_on(stage, 31.0, condition)
    note = await host_discovery.discover(p, ["n1"])
    assert stage.kube.deleted() == [("jobs", JOB)]
    assert note.endswith("a new one starts on the next pass")
    assert p.discovery_due == p.settings.intervals.next_pass == 1.0


async def test_a_running_job_sets_no_due_time(stage: Stage) -> None:
    p = await waiting_on(stage, None)
    assert await host_discovery.discover(p, ["n1"]) == f"discovery Job {JOB} is running"
    assert p.discovery_due is None
    assert await job_names(stage) == [JOB]


# -- --secret-ref-label: the Job mounts the Nova's label-checked copies (issue 36 §5) ----------------

SAMPLE_CELL_DB = {
    "clusterRef": {"name": "mariadb"},
    "database": "nova",
    "secretRef": {"name": "nova-cell-db-credentials"},
}
CELL_TLS = {
    "mode": "verify-full",
    "caBundleSecretRef": {"name": "db-ca"},
    "clientCertSecretRef": {"name": "db-cert"},
}


@pytest.mark.parametrize(
    ("policy", "mounted"),
    [(None, {"db-ca", "db-cert"}), (SecretRefPolicy("example.org/usable"), {"nova-checked-cell-db-tls"})],
    ids=["without-the-flag", "with-the-flag"],
)
async def test_the_discovery_job_mounts_the_novas_checked_copy_with_the_flag_and_the_named_secrets_without(
    stage: Stage, policy: SecretRefPolicy | None, mounted: set[str]
) -> None:
    nova = await stage.nova(spec={"database": {**SAMPLE_CELL_DB, "tls": CELL_TLS}})
    await stage.api_deployment()
    p, _ = await stage.ledger_pass(
        [{"name": "n1", "phase": "Pending"}], nova=nova, settings=ComputeSettings(secret_refs=policy)
    )
    assert await host_discovery.discover(p, ["n1"]) == f"discovery Job {JOB} started"
    job = await stage.admin.get(JOBS, JOB, stage.ns)
    (volume,) = [v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] == "cell-db-tls"]
    assert {s["secret"]["name"] for s in volume["projected"]["sources"]} == mounted
    files = [i["path"] for s in volume["projected"]["sources"] for i in s["secret"]["items"]]
    assert files == ["ca.crt", "tls.crt", "tls.key"]


def listing(cache: Cache) -> Listing:
    """The pass's cached listing, over ``cache`` for pods (the controller's ``listed``)."""

    def listed(ref: ResourceRef, namespace: str, labels: Mapping[str, str]) -> list[Object] | None:
        return cache.list(namespace, labels) if ref == PODS else None

    return listed


async def test_a_running_job_whose_pod_cannot_start_names_it(stage: Stage) -> None:
    """Issue 37 item 5: the ServicesReady note names the discovery pod the kubelet gave up on."""
    p = await waiting_on(stage, None)
    job = await stage.admin.get(JOBS, JOB, stage.ns)
    labels = naming.labels("nova", compute_pool.DISCOVER_HOSTS)
    await stuck_pod(
        stage.admin,
        stage.ns,
        "nova-discover-hosts-m2x7d",
        labels=labels,
        owner=owner_of(job),
        reason="InvalidImageName",
        image="ghcr.io/C5C3/nova:2026.1",
    )
    # a pod of the same labels another Job (a replaced one) owns is not this Job's
    gone = {"apiVersion": "batch/v1", "kind": "Job", "name": JOB, "uid": "replaced-job-uid"}
    await stuck_pod(
        stage.admin, stage.ns, "nova-discover-hosts-0aaaa", labels=labels, owner=gone, reason="ErrImagePull"
    )
    pods = Cache(str(PODS))
    for obj in (await stage.admin.list(PODS, stage.ns))["items"]:
        pods.upsert(obj)
    p.listed = listing(pods)
    note = await host_discovery.discover(p, ["n1"])
    assert note == (
        f"discovery Job {JOB} is running: pod nova-discover-hosts-m2x7d cannot start: InvalidImageName "
        "(image ghcr.io/C5C3/nova:2026.1)"
    )
    assert SECRET not in note
