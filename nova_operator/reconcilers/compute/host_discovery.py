"""The Nova's shared host-discovery Job, run while a Pending node's host is registered but unmapped (§15).

The scheduler's periodic discovery (every 300 s) maps new computes anyway; the Job only
shortens the wait. State machine, applied on every pass that has unmapped hosts:

    no Job        -> create it from the Nova API Deployment's image and config (none mounted: wait)
    Job running   -> leave it alone
    Job finished  -> leave it for ``discovery_grace`` (30 s) after its terminal condition, then
                     delete it (a Failed one with a Warning first) so the next pass starts afresh

When the state machine can next move on is handed to the Services step (``ComputePass.
discovery_due``, issue 41 item 4): the end of the grace, when that comes before the 10 s poll,
and the next pass at once (1 s) after a delete, so a join does not wait out a poll the Job no
longer needs. The Job's own changes wake the pools too (the controller's Job watch).

Returns a short note for the ServicesReady message; a Kubernetes error is raised as
``HostDiscoveryError``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from nova_operator import apply, naming, ownership
from nova_operator.decisions import pod_start, readiness
from nova_operator.kube import errors
from nova_operator.kube.owners import with_owner
from nova_operator.kube.resources import DEPLOYMENTS, JOBS, PODS
from nova_operator.models.nova import Nova
from nova_operator.reconcilers import stuck_pods
from nova_operator.reconcilers.compute.context import ComputePass
from nova_operator.renderers import compute_pool
from nova_operator.timestamps import parse_rfc3339


class HostDiscoveryError(Exception):
    pass


def _mounted_config(deployment: dict[str, Any]) -> str:
    volumes = (((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}).get("volumes") or []
    return next(
        (str(v["configMap"]["name"]) for v in volumes if v.get("name") == "config" and "configMap" in v), ""
    )


def _finished_at(job: dict[str, Any], state: readiness.JobState) -> datetime | None:
    wanted = "Failed" if state is readiness.JobState.FAILED else "Complete"
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == wanted and cond.get("lastTransitionTime"):
            return parse_rfc3339(cond["lastTransitionTime"])
    return None


def _failure_message(job: dict[str, Any]) -> str:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Failed":
            return str(cond.get("message") or cond.get("reason") or "failed")
    return "failed"


def _pods(p: ComputePass, nova_name: str, job: dict[str, Any]) -> list[dict[str, Any]]:
    """The cached pods of the discovery Job (its template's labels, then its UID as their owner)."""
    listed = p.listed(PODS, p.namespace, naming.labels(nova_name, compute_pool.DISCOVER_HOSTS)) or []
    return stuck_pods.owned_by(listed, (job.get("metadata") or {}).get("uid"))


async def discover(p: ComputePass, hosts: list[str]) -> str:
    if p.nova is None:
        raise HostDiscoveryError("the NovaRef step did not resolve the Nova")
    nova = Nova.model_validate(p.nova)
    ns, nova_name = p.namespace, p.nova_name
    name = compute_pool.discover_hosts_job_name(nova_name)
    try:
        try:
            job = await p.kube.get(JOBS, name, ns)
        except errors.NotFound:
            job = None
        if job is None:
            return await _start(p, nova, name, hosts)
        nova_uid = str(((p.nova or {}).get("metadata") or {}).get("uid") or "")
        if (who := ownership.holder(job, nova_uid, naming.common_labels(nova_name))) is not None:
            return f"a Job {name} that is not the Nova's is in the way ({who}); it is left alone"
        state = readiness.job_state(job)
        if state is readiness.JobState.RUNNING:
            return pod_start.annotate(f"discovery Job {name} is running", _pods(p, nova_name, job))
        word = "failed" if state is readiness.JobState.FAILED else "finished"
        ended = _finished_at(job, state)
        left = p.settings.intervals.discovery_grace - (p.now - ended).total_seconds() if ended else 0.0
        if left > 0:
            p.discovery_due = left
            return f"discovery Job {name} {word} and will be replaced"
        if state is readiness.JobState.FAILED:
            await p.emit(
                "Warning", "HostDiscoveryFailed", f"discovery Job {name} failed: {_failure_message(job)}"
            )
        await apply.delete_if_present(p.kube, JOBS, name, ns)
        p.discovery_due = p.settings.intervals.next_pass
        return f"discovery Job {name} {word}; a new one starts on the next pass"
    except errors.KubeError as exc:
        raise HostDiscoveryError(f"discovery Job {ns}/{name}: {exc}") from exc


async def _start(p: ComputePass, nova: Nova, name: str, hosts: list[str]) -> str:
    ns = p.namespace
    try:
        api = await p.kube.get(DEPLOYMENTS, p.nova_name, ns)
    except errors.NotFound:
        api = {}
    config_map = _mounted_config(api)
    if not config_map:
        return "no discovery Job can run yet: the Nova API Deployment mounts no config"
    job = compute_pool.discover_hosts_job(
        nova,
        image=readiness.first_container_image(api),
        config_map=config_map,
        pull_policy=compute_pool.pull_policy(
            nova.spec.image.reference,
            policy=nova.spec.image.pull_policy,
            operator_default=p.settings.default_pull_policy,
        ),
        checked=p.settings.secret_refs is not None,  # the Nova's label-checked copies (--secret-ref-label)
    )
    try:
        await p.kube.create(JOBS, with_owner(job, p.nova or {}), ns)
    except errors.Conflict:
        return f"discovery Job {name} is running"
    await p.emit(
        "Normal", "HostDiscoveryStarted", f"started discovery Job {name} for hosts {', '.join(hosts)}"
    )
    return f"discovery Job {name} started"
