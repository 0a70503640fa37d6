"""The kubelet stand-in: registers its nodes and runs every pod bound to them.

``Kubelet(kube, nodes, images, state_dir)``; ``await start()`` creates (or adopts) each Node with a
Ready condition, capacity/allocatable and addresses, keeps a Lease in ``kube-node-lease`` renewed
every 10 s, and lists + watches the pods whose ``spec.nodeName`` is one of its nodes; each pod gets
a ``PodWorker``. ``await stop()`` kills every container and removes the pods' directories and network
(the Node objects stay, as when a kubelet stops); ``await remove_node(name)`` does that for one node
and deletes its Node and Lease.

kwok leaves these nodes alone: the simulated cluster starts kwok with
``--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake`` and these nodes do not carry that
annotation; kwok only plays pods on the nodes it manages.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import pathlib
import shutil
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import aiohttp

from simcluster.client.asynckube import JSON, ApiError, AsyncKube
from simcluster.client.watchcache import Store, reflect
from simcluster.realtier.kubelet.backoff import BackOff
from simcluster.realtier.kubelet.pod import NodeContext, PodWorker
from simcluster.realtier.kubelet.runtime import Image

log = logging.getLogger("simcluster.kubelet")
LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION = 40
LEASE_RENEW = 10.0
STATUS_REPORT = 300.0  # the kubelet reports an unchanged node status every 5 min (the Lease is the heartbeat)
STANDIN_LABEL = "sim.nova.openstack.c5c3.io/kubelet"  # value "standin" on every node of the stand-in
VERSION = "v1.37.2-simkubelet"


def _micro(ts: datetime | None = None) -> str:
    return (ts or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _second(ts: datetime | None = None) -> str:
    return (ts or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_object(
    name: str, ip: str, resources: Mapping[str, str], labels: Mapping[str, str], taints: Sequence[JSON] = ()
) -> JSON:
    """The Node a kubelet registers (status included; written again through the status subresource)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                STANDIN_LABEL: "standin",
                **labels,
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"taints": list(taints)} if taints else {},
        "status": node_status(name, ip, resources),
    }


def node_status(name: str, ip: str, resources: Mapping[str, str]) -> JSON:
    now = _second()

    def cond(kind: str, status: str, reason: str, message: str) -> JSON:
        return {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }

    return {
        "capacity": dict(resources),
        "allocatable": dict(resources),
        "conditions": [
            cond(
                "MemoryPressure",
                "False",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            ),
            cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        ],
        "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
        "nodeInfo": {
            "architecture": "amd64",
            "operatingSystem": "linux",
            "kubeletVersion": VERSION,
            "kubeProxyVersion": VERSION,
            "containerRuntimeVersion": "simkubelet://1",
            "osImage": "simcluster kubelet stand-in",
            "kernelVersion": "",
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
        },
        "phase": "Running",
    }


class Kubelet:
    def __init__(
        self,
        kube: AsyncKube,
        nodes: Sequence[str],
        images: Mapping[str, Image],
        state_dir: pathlib.Path,
        *,
        node_ip: str = "127.0.0.1",
        labels: Mapping[str, str] | None = None,
        taints: Sequence[JSON] = (),
        resources: Mapping[str, str] | None = None,
        volume_resync: float = 10.0,
        lease_renew: float = LEASE_RENEW,
        network: Any = None,
    ) -> None:
        self.kube = kube
        self.nodes = list(nodes)
        self.images = dict(images)
        self.state_dir = pathlib.Path(state_dir)
        self.node_ip = network.gateway if network is not None and node_ip == "127.0.0.1" else node_ip
        self.labels = dict(labels or {})
        self.taints = list(taints)
        self.resources = dict(
            resources or {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
        )
        self.volume_resync = volume_resync
        self.lease_renew = lease_renew
        self.network = network  # a network.PodNetwork, or None: pods use the node's network
        self.backoff = BackOff()
        self.workers: dict[str, PodWorker] = {}
        self._worker_tasks: dict[str, asyncio.Task[None]] = {}
        self._worker_node: dict[str, str] = {}
        self._released: set[str] = set()
        self._node_tasks: dict[str, list[asyncio.Task[None]]] = {}

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> Kubelet:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        if self.network is not None:
            await self.network.start()
        for name in self.nodes:
            await self.add_node(name)
        return self

    async def add_node(self, name: str) -> None:
        if name not in self.nodes:
            self.nodes.append(name)
        await self._register(name)
        self._node_tasks[name] = [
            asyncio.create_task(self._lease_loop(name), name=f"lease {name}"),
            asyncio.create_task(self._status_loop(name), name=f"node status {name}"),
            asyncio.create_task(self._watch_pods(name), name=f"pods of {name}"),
        ]

    async def stop(self) -> None:
        """Stop every node's loops, kill every container, remove pod directories and the network."""
        for name in list(self._node_tasks):
            await self._stop_node(name)
        if self.network is not None:
            await self.network.stop()
        await asyncio.to_thread(shutil.rmtree, self.state_dir / "pods", True)

    async def remove_node(self, name: str) -> None:
        """Stop the node's pods and delete its Node and Lease."""
        await self._stop_node(name)
        if name in self.nodes:
            self.nodes.remove(name)
        for path in (
            f"/api/v1/nodes/{name}",
            f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{name}",
        ):
            with contextlib.suppress(ApiError):
                await self.kube.request("DELETE", path)
        await asyncio.to_thread(shutil.rmtree, self.state_dir / "hostpath" / name, True)

    async def _stop_node(self, name: str) -> None:
        tasks = self._node_tasks.pop(name, [])
        for loop in tasks:
            loop.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        uids = [uid for uid, node in self._worker_node.items() if node == name]
        for uid in uids:
            task: asyncio.Task[None] | None = self._worker_tasks.pop(uid, None)
            worker = self.workers.pop(uid, None)
            self._worker_node.pop(uid, None)
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            if worker is not None:
                await worker.cleanup()

    async def __aenter__(self) -> Kubelet:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- the node ------------------------------------------------------------------------------

    async def _register(self, name: str) -> None:
        body = node_object(name, self.node_ip, self.resources, self.labels, self.taints)
        try:
            node = await self.kube.create("/api/v1/nodes", body)
        except ApiError as exc:
            if exc.status != 409:
                raise
            node = await self.kube.merge_patch(f"/api/v1/nodes/{name}", {"metadata": body["metadata"]})
        await self.kube.merge_patch(f"/api/v1/nodes/{name}/status", {"status": body["status"]})
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": name,
                "namespace": LEASE_NAMESPACE,
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"]}
                ],
            },
            "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_DURATION, "renewTime": _micro()},
        }
        try:
            await self.kube.create(f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases", lease)
        except ApiError as exc:
            if exc.status != 409:
                raise

    async def _lease_loop(self, name: str) -> None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{name}"
        while True:
            await asyncio.sleep(self.lease_renew)
            try:
                await self.kube.merge_patch(path, {"spec": {"holderIdentity": name, "renewTime": _micro()}})
            except (ApiError, aiohttp.ClientError, TimeoutError) as exc:
                log.warning("lease of %s not renewed: %s", name, exc)

    async def _status_loop(self, name: str) -> None:
        while True:
            await asyncio.sleep(STATUS_REPORT)
            try:
                status = node_status(name, self.node_ip, self.resources)
                await self.kube.merge_patch(f"/api/v1/nodes/{name}/status", {"status": status})
            except (ApiError, aiohttp.ClientError, TimeoutError) as exc:
                log.warning("status of node %s not reported: %s", name, exc)

    # -- pods ----------------------------------------------------------------------------------

    async def _watch_pods(self, node: str) -> None:
        """The node's pods by list + watch (``watchcache.reflect``): each change goes to its worker; a
        pod gone between two lists is handed over as deleted."""
        pods = Store("pods", f"/api/v1/pods?fieldSelector={quote(f'spec.nodeName={node}')}")

        def changed(_: Store, pod: JSON, deleted: bool) -> None:
            self._dispatch(node, "DELETED" if deleted else "MODIFIED", pod)

        await reflect(self.kube, pods, changed, asyncio.Event())  # runs until the task is cancelled

    def _dispatch(self, node: str, kind: str, pod: JSON) -> None:
        uid = pod["metadata"]["uid"]
        worker = self.workers.get(uid)
        if kind == "DELETED":
            if worker is not None:
                worker.gone()
            self._released.discard(uid)
            return
        if worker is not None:
            worker.update(pod)
            return
        if uid in self._released:
            return
        ctx = NodeContext(
            kube=self.kube,
            node=node,
            host_ip=self.node_ip,
            allocatable=self.resources,
            images=self.images,
            state_dir=self.state_dir,
            backoff=self.backoff,
            volume_resync=self.volume_resync,
            network=self.network,
        )
        worker = PodWorker(ctx, pod)
        worker.update(pod)
        self.workers[uid] = worker
        self._worker_node[uid] = node
        task = asyncio.create_task(worker.run(), name=f"pod {pod['metadata']['name']}")
        self._worker_tasks[uid] = task
        task.add_done_callback(functools.partial(self._finished, uid))

    def _finished(self, uid: str, task: asyncio.Task[None]) -> None:
        if self._worker_tasks.get(uid) is not task:
            return
        self._worker_tasks.pop(uid, None)
        worker = self.workers.pop(uid, None)
        self._worker_node.pop(uid, None)
        if worker is not None and not worker.removed:
            self._released.add(uid)
        if not task.cancelled() and task.exception() is not None:
            log.error("pod worker %s failed: %r", uid, task.exception())
