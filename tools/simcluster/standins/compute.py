"""nova-compute and host discovery, played on the fake Nova API.

A ``nova-compute`` pool pod Ready for ``REGISTER_DELAY`` registers its node as a compute service
(unmapped), a Succeeded ``discover-hosts`` Job pod maps every registered host, and a service whose
pod is gone is reported ``down``. Not cache-driven: a loop of its own, woken by pod events, a 2 s
tick, or a registration falling due.

The delay is real nova's: the pod has no probe, so it is Ready once the container runs, and
nova-compute creates its service record only after it has loaded its config, set up its virt
driver and reached the conductor (``nova.service.Service.start``), a few seconds later. Without it
an operator woken by the pod turning Ready would find the service at once here and never in a
real cell.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping

from simcluster.client.asynckube import ApiError, AsyncKube, sleep_or
from simcluster.client.watchcache import Store, reflect
from simcluster.standins.base import StandIn
from simcluster.standins.objects import is_pod_ready
from simcluster.standins.openstack import FakeOpenStack

log = logging.getLogger("simcluster.standins")

# Pods the compute agent follows (labels of novacompute-crd.md §9.1 and §15).
COMPUTE_COMPONENT = "nova-compute"
DISCOVERY_COMPONENT = "discover-hosts"
COMPUTE_PODS = (
    "/api/v1/pods?labelSelector=app.kubernetes.io%2Fcomponent%20in%20%28"
    f"{COMPUTE_COMPONENT}%2C{DISCOVERY_COMPONENT}%29"
)
REGISTER_DELAY = 3.0
"""Seconds from a nova-compute pod seen Ready until its service is registered (see above)."""


class ComputeAgent(StandIn):
    def __init__(
        self,
        kube: AsyncKube,
        stores: Mapping[str, Store],
        fake: FakeOpenStack,
        register_delay: float = REGISTER_DELAY,
    ) -> None:
        super().__init__(kube, stores)
        self.fake = fake
        self.register_delay = register_delay
        self._ready_since: dict[str, float] = {}  # node -> when its pod was first seen Ready
        self._due: float | None = None  # the next registration falling due (monotonic)
        self.kick = asyncio.Event()  # the agent's wake-up
        self.passes = 0
        self._discovered: set[str] = set()  # uids of discover-hosts pods already acted on
        # The pods the agent follows, kept by a watch: a pass reads this copy, never a LIST of its
        # own (at 5,000 nodes a LIST per pod event cost the API server more than the operator did).
        self.pods = Store("pods", COMPUTE_PODS)

    async def run(self, stop: asyncio.Event) -> None:
        watcher = asyncio.create_task(
            reflect(self.kube, self.pods, lambda *_: self.kick.set(), stop), name=f"watch {COMPUTE_PODS}"
        )
        try:
            while not (stop.is_set() or self.pods.synced.is_set()):  # the first list, before any pass
                await sleep_or(self.pods.synced, 0.5)
            while not stop.is_set():
                self.kick.clear()
                try:
                    await self.agent_pass()
                except ApiError as exc:
                    log.info("compute agent pass retried: %s", exc)
                except Exception:  # keep going; the log tells why
                    log.exception("compute agent pass failed")
                self.passes += 1
                wait = 2.0 if self._due is None else max(0.05, min(2.0, self._due - time.monotonic()))
                await sleep_or(self.kick, wait)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watcher

    async def agent_pass(self) -> None:
        """A Ready nova-compute pod registers its node's service (unmapped, as nova-compute does on
        start); a Succeeded discover-hosts Job pod maps every registered host; a service whose pod
        is gone goes ``down``, as Nova reports it after service_down_time."""
        fake = self.fake
        pods = list(self.pods.list())
        by_host = fake.services_by_host()  # one walk per pass, not one per pod (5,000 nodes)
        running: set[str] = set()
        now = time.monotonic()
        self._due = None
        for pod in pods:
            labels = pod["metadata"].get("labels", {})
            component = labels.get("app.kubernetes.io/component")
            node = pod.get("spec", {}).get("nodeName")
            if component == COMPUTE_COMPONENT and node and not pod["metadata"].get("deletionTimestamp"):
                if is_pod_ready(pod):
                    running.add(node)
                    svc = by_host.get(node)
                    due = self._ready_since.setdefault(node, now) + self.register_delay
                    if svc is None and due > now:
                        self._due = due if self._due is None else min(self._due, due)
                    elif svc is None:
                        by_host[node] = fake.add_compute(node, mapped=False, by_agent=True)
                    elif svc.state == "down" and not svc.forced_down:
                        fake.set_service_state(node, "up")
            elif component == DISCOVERY_COMPONENT and pod.get("status", {}).get("phase") == "Succeeded":
                uid = pod["metadata"]["uid"]
                if uid not in self._discovered:
                    self._discovered.add(uid)
                    fake.map_all_hosts()
        for gone in set(self._ready_since) - running:  # a pod that comes back starts nova-compute anew
            del self._ready_since[gone]
        for svc in fake.compute_services():
            if svc.host not in running and svc.state == "up" and svc.host in fake.agent_hosts:
                fake.set_service_state(svc.host, "down")
