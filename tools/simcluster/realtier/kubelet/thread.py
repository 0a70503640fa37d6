"""The kubelet stand-in for synchronous callers (the launcher, ``make run``): its own event loop in a
thread that lives as long as the stand-in, so the parent-death signal of its containers (tied to the
thread that started them) fires only when the stand-in is gone."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import pathlib
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from simcluster.client.asynckube import AsyncKube
from simcluster.realtier.kubelet.network import PodNetwork
from simcluster.realtier.kubelet.node import Kubelet
from simcluster.realtier.kubelet.runtime import Image


class KubeletThread:
    """``start()`` returns once the nodes are registered; ``stop()`` kills every container and removes
    the network (``remove_nodes=True``: the Node and Lease objects too)."""

    def __init__(
        self,
        server: str,
        token: str,
        ca_file: pathlib.Path,
        nodes: Sequence[str],
        images: Mapping[str, Image],
        state_dir: pathlib.Path,
        *,
        network: bool | Mapping[str, Any] = True,
        **options: Any,
    ) -> None:
        self._args = (server, token, ca_file)
        self._nodes, self._images, self._state_dir = list(nodes), dict(images), state_dir
        self._network, self._options = network, options
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kubelet-standin", daemon=True)
        self._kube: AsyncKube | None = None
        self.kubelet: Kubelet | None = None
        self._log: logging.FileHandler | None = None

    def _open_log(self) -> None:
        """The stand-in's own records (pods started, deleted, released) in ``<state_dir>/kubelet.log``,
        from its thread only: a scenario that waits on a pod can read why it is stuck."""
        self._state_dir.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(self._state_dir / "kubelet.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        handler.addFilter(lambda record: record.thread == self._thread.ident)
        logger = logging.getLogger("simcluster.kubelet")
        logger.addHandler(handler)
        if logger.level == logging.NOTSET or logger.level > logging.INFO:
            logger.setLevel(logging.INFO)
        self._log = handler

    def _close_log(self) -> None:
        if self._log is not None:
            logging.getLogger("simcluster.kubelet").removeHandler(self._log)
            self._log.close()
            self._log = None

    def _call(self, coro: Any, timeout: float = 120.0) -> Any:
        future: concurrent.futures.Future[Any] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return future.result(timeout)

    def start(self) -> KubeletThread:
        self._thread.start()
        self._open_log()
        self._call(self._start())
        return self

    async def _start(self) -> None:
        self._kube = await AsyncKube(*self._args).__aenter__()
        network = None
        if self._network:
            settings = dict(self._network) if isinstance(self._network, Mapping) else {}
            network = PodNetwork(self._kube, **settings)
        self.kubelet = Kubelet(
            self._kube, self._nodes, self._images, self._state_dir, network=network, **self._options
        )
        await self.kubelet.start()

    def attach_hosts(self, name: str, namespace: str, path: pathlib.Path) -> None:
        """Keep ``path`` an ``/etc/hosts`` naming every Service, as a pod ``name`` in ``namespace``
        would see it (for a host process that must resolve in-cluster names)."""
        assert self.kubelet is not None
        assert self.kubelet.network is not None
        network = self.kubelet.network
        pod = {"metadata": {"uid": f"host-{name}", "name": name, "namespace": namespace}, "spec": {}}

        async def _attach() -> None:
            network.attach_hosts(pod, network.gateway, path)
            await network.sync()

        self._call(_attach())

    def alias(self, name: str, namespace: str, service: str) -> None:
        """Every pod resolves ``name`` (a name outside the cluster, e.g. a brownfield database's) to
        the ClusterIP of Service ``namespace/service``."""
        assert self.kubelet is not None
        assert self.kubelet.network is not None
        network = self.kubelet.network

        async def _alias() -> None:
            network.aliases[name] = (namespace, service)
            await network.sync()

        self._call(_alias())

    def add_images(self, images: Mapping[str, Image]) -> None:
        """Serve ``images`` from now on: a container waiting in ``ErrImagePull`` for one of them starts
        at its next try (every ``pod.RETRY`` seconds); one already served keeps its tree."""
        assert self.kubelet is not None
        kubelet = self.kubelet

        async def _add() -> None:
            for name, image in images.items():
                kubelet.images.setdefault(name, image)

        self._call(_add())

    def stop(self, *, remove_nodes: bool = False) -> None:
        if not self._thread.is_alive():
            self._close_loop()
            return
        try:
            self._call(self._stop(remove_nodes))
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._close_log()
            self._close_loop()

    def _close_loop(self) -> None:
        """The loop closed once its thread has ended (left open, it warned at the interpreter's exit)."""
        if not self._thread.is_alive() and not self._loop.is_closed():
            self._loop.close()

    async def _stop(self, remove_nodes: bool) -> None:
        if self.kubelet is not None:
            await self.kubelet.stop()
            if remove_nodes:
                for node in list(self.kubelet.nodes):
                    await self.kubelet.remove_node(node)
        if self._kube is not None:
            await self._kube.__aexit__(None, None, None)

    def __enter__(self) -> KubeletThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
