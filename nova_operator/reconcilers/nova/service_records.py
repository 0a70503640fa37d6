"""Group member ``ServiceRecords`` (``ServiceRecordsHealthy``; beyond the spec): delete the service
records of control-plane pods that are gone.

Each scheduler and conductor pod registers its service under its own hostname, so every rollout and
scale-down leaves ``down`` records behind (``openstack compute service list`` grows with each one, and
monitoring that alerts on down services sees them). This step deletes a record exactly when
``service_records.judge`` calls it stale: one of this Nova's role binaries (never ``nova-compute``:
the pools own those), a host shaped like a pod of that role's Deployment, no live pod of that name,
and Nova reports it down. One Normal event ``StaleServiceDeleted`` (the recorder's spam filter and
aggregation bound what reaches the API server) and one count of
``nova_operator_stale_services_deleted_total`` per record deleted; at most ``DELETES_PER_PASS``
per pass, the rest after ``MORE_AFTER`` (condition False ``DeletingStaleServiceRecords`` meanwhile).

A look: one Keystone token and one ``GET /os-services`` (2.69), whose records (less those the look
deletes) are also Nova's own view of its services in ``status.services`` (``service_records.summary``);
when it lists a record of this Nova's roles, one LIST of the Nova's pods (label-selected; pods are
not cached: looks are rare, after a rollout or a scale-down, so a pod informer's watch of every pod
change would cost more than the one LIST per look); then ``DELETE /os-services/{uuid}`` (2.53)
per stale record.

It is **quiet in steady state**: the last look is remembered per Nova (``NovaOptions.sweeps``) with
the resourceVersions of the four role Deployments; while those are unchanged and the last look left
nothing, a pass sends nothing (a pod that goes away changes its Deployment's status, hence its
resourceVersion).

It **never blocks**: the condition is informational, not part of ``Ready`` (a Nova whose API serves
must not lose ``Ready`` over leftover records), a look is bounded (``DEADLINE``), and a failed look
(Keystone or Nova unreachable, refused, a pod list refused) is reported as False ``ComputeAPIError``
or ``PodListError`` and tried again after 30 s, doubling to 10 min, with no call in between but one
when a role Deployment changes at least 30 s after the failed look (``reuse``). Records
still reported up are looked at again every 30 s (``WaitingForServicesDown``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Final

from nova_operator import conditions, intervals, naming
from nova_operator.decisions.service_records import candidates, judge, live_hosts, summary
from nova_operator.kube.errors import KubeError
from nova_operator.kube.resources import DEPLOYMENTS, PODS
from nova_operator.openstack import ComputeAPIError, ComputeClient, ComputeService, Credentials, DeleteOutcome
from nova_operator.reconcilers.nova.context import PassContext, Sweep
from nova_operator.runtime.request import Result

CONDITION: Final = conditions.SERVICE_RECORDS_HEALTHY
CLEAN: Final = "NoStaleServiceRecords"
WAITING: Final = "WaitingForServicesDown"
COMPUTE_API_ERROR: Final = "ComputeAPIError"
POD_LIST_ERROR: Final = "PodListError"
DELETED: Final = "StaleServiceDeleted"
DELETING: Final = "DeletingStaleServiceRecords"
DELETES_PER_PASS: Final = 20
"""The most records one look deletes (and so the most ``StaleServiceDeleted`` events it records): a
tenant's nova-api decides how many it lists, the pass must not (issue 36: 3,000 DELETEs and Events
per look). The rest are deleted by the next passes, ``MORE_AFTER`` apart."""
MORE_AFTER: Final = 1.0
"""Seconds until the next look when stale records were left for it (the pass's status is written between)."""
DEADLINE: Final = 20.0
"""The longest one look may take (each call has its own 10 s deadline too): the concurrent group, and
so the status write of the pass, never waits longer on an unreachable compute API."""
ROLES: Final = tuple(sorted({str(c) for c in naming.SERVICE_BINARIES.values()}))


class _PodListError(Exception):
    pass


def fingerprint(ctx: PassContext) -> tuple[str, ...]:
    """The cached resourceVersions of the role Deployments ("" for one not there)."""
    out = []
    for role in ROLES:
        found = ctx.cached(DEPLOYMENTS, naming.deployment_name(ctx.name, naming.Component(role)))
        out.append(str(((found or {}).get("metadata") or {}).get("resourceVersion") or ""))
    return tuple(out)


def reuse(last: Sweep, current: tuple[str, ...], now: float) -> float | None:
    """Whether the last look still stands: None (look now), 0 (it does, nothing to do) or the seconds
    until the next look. A clean look stands while the Deployments are unchanged; a look that left
    records waiting stands until it is due, or until a Deployment changes; a failed look stands until
    it is due, or until a Deployment changes once ``SERVICE_RECORDS_WAIT`` has passed since it (a
    failing API is asked at most every 30 s, however often the CR wakes; but a rollout that ends a
    long outage, a password rotation say, is not followed by minutes of a backoff grown meanwhile)."""
    if last.clean:
        return 0.0 if last.fingerprint == current else None
    if now >= last.due:
        return None
    if last.fingerprint == current:
        return last.due - now
    if last.failures:  # a Deployment changed: look again, but not sooner than 30 s after the failure
        retry = last.at + intervals.SERVICE_RECORDS_WAIT
        return retry - now if now < retry else None
    return None


def _credentials(ctx: PassContext) -> Credentials:
    spec = ctx.nova.spec
    user = spec.service_user
    return Credentials(
        auth_url=str(spec.keystone_endpoint),
        username=user.username,
        password=ctx.state.service_user_password,
        project_name=user.project_name,
        user_domain_name=user.user_domain_name,
        project_domain_name=user.project_domain_name,
        ca_bundle=ctx.state.https_ca,
    )


def _pod_view(pod: dict[str, Any]) -> dict[str, Any]:
    """What ``service_records.live_hosts`` reads of a pod (the list is decoded item by item)."""
    meta = pod.get("metadata") or {}
    return {
        "metadata": {
            "name": meta.get("name"),
            "labels": {naming.COMPONENT_LABEL: (meta.get("labels") or {}).get(naming.COMPONENT_LABEL)},
            "deletionTimestamp": meta.get("deletionTimestamp"),
        },
        "spec": {"hostname": (pod.get("spec") or {}).get("hostname")},
        "status": {"phase": (pod.get("status") or {}).get("phase")},
    }


async def _look(ctx: PassContext) -> tuple[list[ComputeService], int, int]:
    """One look: delete what is stale, ``DELETES_PER_PASS`` at most; the records left waiting, how
    many were deleted and how many stale ones are left for the next look."""
    client = await ComputeClient.connect(_credentials(ctx), ctx.options.nova_api_url(ctx.name, ctx.namespace))
    records = await client.list_all_services()
    if not candidates(ctx.name, records):
        ctx.status["services"] = summary(records)
        return [], 0, 0
    selector = ",".join(f"{k}={v}" for k, v in sorted(ctx.marks.items()))
    try:
        pods = await ctx.kube.list(PODS, ctx.namespace, label_selector=selector, each=_pod_view)
    except KubeError as exc:
        raise _PodListError(f"listing the pods of Nova {ctx.namespace}/{ctx.name}: {exc}") from exc
    verdict = judge(ctx.name, records, live_hosts(pods.get("items") or []))
    waiting = list(verdict.waiting)
    deleted = 0
    gone: set[str] = set()
    for record in verdict.stale[:DELETES_PER_PASS]:
        outcome = await client.delete_service(record.id)
        if outcome is not DeleteOutcome.CONFLICT:
            gone.add(record.id)
        if outcome is DeleteOutcome.CONFLICT:  # only nova-compute deletes answer 409; judged again later
            waiting.append(record)
        elif outcome is DeleteOutcome.DELETED:  # GONE: somebody else deleted it
            deleted += 1
            component = naming.SERVICE_BINARIES[record.binary]
            ctx.metrics.stale_services_deleted.labels(ctx.name, ctx.namespace, record.binary).inc()
            await ctx.emit(
                "Normal",
                DELETED,
                f"deleted the {record.binary} service record of host {record.host} ({record.id}): no pod of "
                f"Deployment {naming.deployment_name(ctx.name, component)} has that name any more and Nova "
                "reports it down",
            )
    ctx.status["services"] = summary(r for r in records if r.id not in gone)  # what Nova lists now
    return waiting, deleted, max(0, len(verdict.stale) - DELETES_PER_PASS)


def _failed(
    ctx: PassContext, last: Sweep | None, current: tuple[str, ...], reason: str, error: str
) -> Result:
    failures = (last.failures if last is not None else 0) + 1
    delay = min(intervals.SERVICE_RECORDS_WAIT * 2 ** (failures - 1), intervals.SERVICE_RECORDS_RETRY_MAX)
    clock = ctx.options.monotonic or time.monotonic
    now = clock()
    sweep = Sweep(current, clean=False, due=now + delay, failures=failures, at=now)
    ctx.options.sweeps.looks[ctx.uid] = sweep
    ctx.set(
        CONDITION,
        False,
        reason,
        f"{error}; the service records of gone pods are not cleaned up until this works (looked at again "
        "after 30 s, doubling to 10 min, or at a change of its Deployments)",
    )
    return Result(requeue_after=delay)


async def reconcile_service_records(ctx: PassContext) -> Result:
    if not ctx.options.stale_services or not ctx.state.service_user_password:
        return Result()
    clock = ctx.options.monotonic or time.monotonic
    current = fingerprint(ctx)
    last = ctx.options.sweeps.looks.get(ctx.uid)
    previous = ctx.condition(CONDITION)
    if last is not None and previous is not None:
        wait = reuse(last, current, clock())
        if wait is not None:
            ctx.restamp(CONDITION)
            return Result(requeue_after=wait or None)
    try:
        async with asyncio.timeout(DEADLINE):
            waiting, deleted, left = await _look(ctx)
    except ComputeAPIError as exc:
        return _failed(ctx, last, current, COMPUTE_API_ERROR, str(exc))
    except TimeoutError:
        return _failed(
            ctx, last, current, COMPUTE_API_ERROR, f"the compute API did not answer within {DEADLINE:g} s"
        )
    except _PodListError as exc:
        return _failed(ctx, last, current, POD_LIST_ERROR, str(exc))
    if left:
        ctx.options.sweeps.looks[ctx.uid] = Sweep(current, clean=False, due=clock() + MORE_AFTER)
        ctx.set(
            CONDITION,
            False,
            DELETING,
            f"deleted {deleted} service records of gone control-plane pods in this pass; {left} more are "
            f"stale and are deleted by the next passes ({DELETES_PER_PASS} per pass at most)",
        )
        return Result(requeue_after=MORE_AFTER)
    if waiting:
        ctx.options.sweeps.looks[ctx.uid] = Sweep(
            current, clean=False, due=clock() + intervals.SERVICE_RECORDS_WAIT
        )
        hosts = ", ".join(sorted(f"{r.binary} on {r.host}" for r in waiting))
        ctx.set(
            CONDITION,
            False,
            WAITING,
            f"service records of pods that are gone or going are still reported up: {hosts}; each is "
            "deleted once Nova reports it down (service_down_time after its last heartbeat)",
        )
        return Result(requeue_after=intervals.SERVICE_RECORDS_WAIT)
    ctx.options.sweeps.looks[ctx.uid] = Sweep(current, clean=True)
    ctx.set(CONDITION, True, CLEAN, "no service record of a gone control-plane pod is left")
    return Result()
