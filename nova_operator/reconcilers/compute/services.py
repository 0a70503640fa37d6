"""Step Services (condition ServicesReady): registration, mapping, the drain and the release (§12).

The drain: a leaving node's *enabled* service is disabled (once: the test is made again on
every pass from what Nova reports), its servers are counted and nothing else is done about
them: never a migration, never an enable, never a timeout. With zero servers the node is
Releasing: its pod goes, and once no pod of the pool runs on it the service is deleted
(409 sends the node back to Draining, 404 counts as done). A failed call stops the walk and
leaves every entry not yet walked exactly as it was.

The walk is bounded by the pass's budget (``pipeline.Budget``): a leaving node costs calls to the
tenant's compute API (a disable, a server count, a delete: up to 10 s each), and a pool may hold
hundreds. Once the budget is spent no further leaving node is walked (at least one is, so every pass
moves on); they keep their entries as they were, the pass ends with a requeue at once, and the next
pass walks the leaving nodes after the last one this pass reached first (``WalkResume``), so every
node's turn comes. Nodes that cost no call (Pending, Active) are walked whatever the budget.

A Pending node stays Pending until its host is mapped into the cell (it shows in the
hypervisor list). The scheduler's periodic discovery (300 s, the seed) maps it; while some
host waits, the pool also runs the Nova's shared ``{nova}-discover-hosts`` Job (§15,
``host_discovery``) and polls at 10 s.
"""

from __future__ import annotations

from collections.abc import Mapping

import structlog

from nova_operator import conditions
from nova_operator.decisions import nodeplan
from nova_operator.kube import errors
from nova_operator.kube.resources import PODS
from nova_operator.kube.types import Object
from nova_operator.openstack import ComputeAPIError, ComputeService, DeleteOutcome, view
from nova_operator.openstack.view import ComputeAPI
from nova_operator.pipeline import LEFT_OVER
from nova_operator.reconcilers.compute import host_discovery, pool_pods
from nova_operator.reconcilers.compute.context import ComputeIntervals, ComputePass
from nova_operator.renderers import compute_pool
from nova_operator.runtime.request import Result

COND = conditions.SERVICES_READY
log = structlog.get_logger("nova_operator.novacompute")
_SERVICE_FIELDS = ("serviceID", "serviceStatus", "serviceState", "disabledReason")
_COSTLY = (nodeplan.DRAINING, nodeplan.RELEASING)  # entries whose walk calls the compute API


def poll_interval(ledger: list[Object], every: ComputeIntervals) -> float:
    """60 s, lowered to the shortest interval an entry needs: Releasing 10 s, Draining and Pending 30 s."""
    by_phase = {
        nodeplan.RELEASING: every.releasing,
        nodeplan.DRAINING: every.draining,
        nodeplan.PENDING: every.draining,
    }
    return min([every.settled, *(by_phase.get(e.get("phase", ""), every.settled) for e in ledger)])


def copy_service(entry: Object, service: ComputeService | None) -> None:
    for key in _SERVICE_FIELDS:
        entry.pop(key, None)
    if service is not None:
        entry.update(
            serviceID=service.id,
            serviceStatus=service.status,
            serviceState=service.state,
            disabledReason=service.disabled_reason,
        )


class _PodListError(Exception):
    pass


async def _disabled_as_asked(client: ComputeAPI, service: ComputeService, asked: str) -> bool:
    """Whether a disable that got no answer (a timeout, a dropped connection) took effect all the same.

    Nova saves the disable first, then calls the host's nova-compute (``set_host_enabled``) to sync
    the COMPUTE_STATUS_DISABLED trait, and answers only after that call. A node just labelled out of
    the pool has lost its pod (the DaemonSet controller drops it before the pass adds the hold term)
    while Nova still counts the service up, so that call waits for its RPC timeout (60 s), longer
    than a request of ours. Counting such a disable as failed would lose it for good: the next pass
    finds the service disabled, sends no PUT, and ``ComputeServiceDisabled`` is never emitted.
    """
    try:
        now = (await client.list_services()).get(service.host)
    except ComputeAPIError:
        return False
    return (
        now is not None
        and now.id == service.id
        and now.status == "disabled"
        and now.disabled_reason == asked  # Nova's disabled_reason, not a condition's
    )


class _Walk:
    """One pass over the ledger; ``failure`` ends it and keeps the rest of the entries as they were."""

    def __init__(self, p: ComputePass, services: Mapping[str, ComputeService], mapped: set[str]) -> None:
        self.p = p
        self.services = services
        self.mapped = mapped
        self.unmapped: list[str] = []
        self.failure: Exception | None = None
        self.stopped = False  # the budget ran out: some leaving nodes were not walked
        self._pod_nodes: set[str] | None = None
        self._releasing_at_start = [e["name"] for e in p.nodes if e.get("phase") == nodeplan.RELEASING]

    async def run(self) -> list[Object]:
        """The ledger after the walk, in its own order; an entry not walked is kept as it was."""
        p = self.p
        entries = [dict(e) for e in p.nodes]
        after = p.settings.resume.after(p.namespace, p.name)
        order = list(range(len(entries)))
        if after is not None:  # the leaving nodes after the last one the previous pass reached, first
            order.sort(key=lambda i: (entries[i]["name"] <= after, entries[i]["name"]))
        walked: dict[int, bool] = {}  # index -> kept
        last = ""
        for i in order:
            entry = entries[i]
            costly = entry.get("phase") in _COSTLY
            if costly and (self.stopped or (last and p.budget.spent())):
                self.stopped = True
                continue
            try:
                walked[i] = await self._one(entry)
            except (ComputeAPIError, _PodListError) as exc:
                self.failure = exc  # this and every entry not walked yet: unchanged
                break
            if costly:
                last = entry["name"]
        if self.stopped and self.failure is None:
            p.settings.resume.stopped(p.namespace, p.name, last)
            log.info(
                "the pass's budget is spent; the leaving nodes left are walked in the next pass",
                walked_after=after,
                walked_to=last,
            )
        elif self.failure is None:
            p.settings.resume.finished(p.namespace, p.name)
        return [
            (entries[i] if i in walked else original)
            for i, original in enumerate(p.nodes)
            if walked.get(i, True)
        ]

    async def _one(self, entry: Object) -> bool:
        """Walk one entry (changed in place); False drops it from the ledger."""
        phase = entry.get("phase")
        if phase == nodeplan.CONFLICT:
            return True
        host = entry["name"]
        service = self.services.get(host)
        copy_service(entry, service)
        if phase in (nodeplan.PENDING, nodeplan.ACTIVE):
            entry["phase"] = nodeplan.PENDING
            if service is not None and (phase == nodeplan.ACTIVE or host in self.mapped):
                entry["phase"] = nodeplan.ACTIVE
            elif service is not None:
                self.unmapped.append(host)
            return True
        if phase == nodeplan.DRAINING:
            await self._drain(entry, service)
            return True
        if phase == nodeplan.RELEASING:
            return await self._release(entry, service)
        return True

    async def _drain(self, entry: Object, service: ComputeService | None) -> None:
        p = self.p
        client = await p.compute()
        if service is not None and service.status == "enabled":
            reason = f"c5c3.io: leaving NovaCompute {p.namespace}/{p.name}"
            try:
                await client.disable_service(service.id, reason)
            except ComputeAPIError as exc:
                if exc.status or not await _disabled_as_asked(client, service, reason):
                    raise
            entry["serviceStatus"] = "disabled"
            entry["disabledReason"] = reason
            await p.emit(
                "Normal",
                "ComputeServiceDisabled",
                f"disabled the compute service of node {entry['name']} ({service.id}): it left the pool",
            )
        # Counted even without a service: servers outlive their service record.
        count = await client.count_servers(entry["name"])
        if count > 0:
            entry["instances"] = count
        else:
            entry.pop("instances", None)
            entry["phase"] = nodeplan.RELEASING

    async def _release(self, entry: Object, service: ComputeService | None) -> bool:
        p = self.p
        host = entry["name"]
        if host in await self._pods_on_nodes():
            return True  # the pod is still there: wait
        handover = p.plan is not None and host in p.plan.handover
        if handover or service is None:
            return False  # no Nova call: the rival keeps the service, or there is none
        outcome = await (await p.compute()).delete_service(service.id)
        if outcome is DeleteOutcome.CONFLICT:  # instances or migrations came back
            entry["phase"] = nodeplan.DRAINING
            return True
        await p.emit(
            "Normal",
            "ComputeServiceDeleted",
            f"deleted the compute service of node {host} ({service.id}); its host mapping went with it",
        )
        return False

    async def _pods_on_nodes(self) -> set[str]:
        """Nodes that still run a pod of this pool (listed at most once per pass)."""
        if self._pod_nodes is None:
            p = self.p
            selector = ",".join(f"{k}={v}" for k, v in sorted(compute_pool.selector_labels(p.name).items()))
            try:
                listed = await p.kube.list(PODS, p.namespace, label_selector=selector)
            except errors.KubeError as exc:
                raise _PodListError(f"listing the pool's pods: {exc}") from exc
            only = self._releasing_at_start[0] if len(self._releasing_at_start) == 1 else None
            self._pod_nodes = {
                node
                for pod in listed.get("items") or []
                if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                and (node := (pod.get("spec") or {}).get("nodeName"))
                and (only is None or node == only)
            }
        return self._pod_nodes


async def reconcile_services(p: ComputePass) -> Result:
    every = p.settings.intervals
    poll = poll_interval(p.nodes, every)  # before the walk: a node dropped now still polls soon
    pending = [e["name"] for e in p.nodes if e.get("phase") == nodeplan.PENDING]
    moving = pending or any(e.get("phase") in _COSTLY for e in p.nodes) or _coming_back(p)
    try:
        # A pool with a joining or leaving node reads the services anew: a joining node's service
        # shows at once, and no drain decision rests on a read a sibling made seconds ago (a cell
        # that stopped answering since must stop it). So does a pool looking again for a down
        # service whose pod turned Ready lately. Only a settled pool shares the Nova's view.
        client = await (p.fresh(view.SERVICES) if moving else p.compute())
        services = await client.list_services()
    except ComputeAPIError as exc:
        p.set(COND, False, "ComputeAPIError", str(exc))
        return pool_pods.after_api_failure(p)
    mapping_error: ComputeAPIError | None = None
    mapped: set[str] = set()
    if any(name in services for name in pending):
        try:
            mapped = await (await p.fresh(view.HYPERVISORS)).mapped_hosts()
        except ComputeAPIError as exc:
            mapping_error = exc
    draining = {e["name"] for e in p.nodes if e.get("phase") == nodeplan.DRAINING}
    walk = _Walk(p, services, mapped)
    p.status["nodes"] = await walk.run()
    poll = min(poll, poll_interval(p.nodes, every), *_hinted(p, services, draining))
    if isinstance(walk.failure, _PodListError):
        p.set(COND, False, "PodListError", str(walk.failure))
        raise walk.failure
    if walk.failure is not None:
        p.set(COND, False, "ComputeAPIError", str(walk.failure))
        return Result(requeue_after=every.draining)
    if mapping_error is not None:
        p.set(COND, False, "ComputeAPIError", f"listing hypervisors: {mapping_error}")
        return Result(requeue_after=poll)
    note = ""
    if walk.unmapped:
        try:
            note = await host_discovery.discover(p, walk.unmapped)
        except host_discovery.HostDiscoveryError as exc:
            log.warning("host discovery failed", error=str(exc))
            p.set(COND, False, "HostDiscoveryError", str(exc))
            return Result(requeue_after=min(poll, every.draining))
        poll = min(poll, every.releasing, *([p.discovery_due] if p.discovery_due is not None else []))
    _condition(p, walk.unmapped, note)
    return LEFT_OVER if walk.stopped else Result(requeue_after=poll)


def _hinted(p: ComputePass, services: Mapping[str, ComputeService], draining: set[str]) -> list[float]:
    """Earlier looks than the spec's polls, where this pass knows what it waits on moves soon (issue 41).

    - A node this pass moved from Draining to Releasing: its pod is kept by the DaemonSet's hold
      term until the next pass renders the DaemonSet without it, so that pass comes at once
      (``next_pass``) rather than after the Releasing poll; the pod's going then wakes the pool
      (``pool_pods``).
    - A Pending node with no service, or an Active node whose service is down, whose pod turned
      Ready: ``pool_pods.recheck``.
    """
    every = p.settings.intervals
    found: list[float] = []
    if any(e.get("phase") == nodeplan.RELEASING and e["name"] in draining for e in p.nodes):
        found.append(every.next_pass)
    waiting = [e["name"] for e in p.nodes if e.get("phase") == nodeplan.PENDING and e["name"] not in services]
    again = pool_pods.recheck(p, waiting, pool_pods.returning(p.nodes))
    if again is not None:
        found.append(again)
    return found


def _coming_back(p: ComputePass) -> bool:
    """A node whose service the pool last saw down runs a pod whose Ready is recent enough for a
    recheck (``pool_pods.recheck``): this pass looks for that service's return."""
    back = pool_pods.returning(p.nodes)
    return bool(back) and pool_pods.recheck(p, [], back) is not None


def _condition(p: ComputePass, unmapped: list[str], note: str) -> None:
    nodes = p.nodes
    waiting = [e["name"] for e in nodes if e.get("phase") == nodeplan.PENDING and e["name"] not in unmapped]
    if waiting:
        p.set(
            COND, False, "WaitingForServices", "no compute service registered yet on: " + ", ".join(waiting)
        )
        return
    if unmapped:
        p.set(
            COND,
            False,
            "WaitingForHostMapping",
            "hosts not mapped to a cell yet: " + ", ".join(unmapped) + f"; {note}",
        )
        return
    down = [e["name"] for e in nodes if e.get("phase") == nodeplan.ACTIVE and e.get("serviceState") == "down"]
    if down:
        p.set(COND, False, "ServicesDown", "compute services down on: " + ", ".join(down))
        return
    leaving = [e for e in nodes if e.get("phase") in (nodeplan.DRAINING, nodeplan.RELEASING)]
    if leaving:
        detail = ", ".join(f"{e['name']}: {int(e.get('instances') or 0)} instances" for e in leaving)
        p.set(COND, True, "Draining", detail)
        return
    p.set(COND, True, "ServicesUp", "every compute service of the pool is up")
