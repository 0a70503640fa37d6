"""The logs of a Deployment's pods, followed through the API server into one file, and what became
of the pods, for ``make run`` with the operator installed by its chart.

``PodLogs.poll()`` lists the pods of ``selector``; for each container instance it has not followed
yet (a new pod, or a restart) it starts a thread that reads ``.../log?follow=true`` (the kubelet ends
the stream when the container ends) and appends each line to ``log`` after the pod's name, as
``kubectl logs -f --prefix`` would. It returns a line for each change worth printing: a pod
scheduled on a node, Ready, restarted (with the reason of its last end). ``output`` is the file's
tail. The threads are daemons: stopping the nodes or the API server ends their streams.
"""

from __future__ import annotations

import pathlib
import threading
import urllib.parse
from typing import Any

from simcluster.client.kube import Kube, KubeError


class PodLogs:
    def __init__(self, kube: Kube, namespace: str, selector: str, container: str, log: pathlib.Path) -> None:
        self.kube = kube
        self.namespace = namespace
        self.selector = selector
        self.container = container
        self.log = log
        self._followed: set[tuple[str, int]] = set()  # (pod uid, restart count)
        self._seen: dict[str, tuple[str, bool, int]] = {}  # uid -> node, ready, restarts
        self._lock = threading.Lock()
        log.parent.mkdir(parents=True, exist_ok=True)
        log.touch()

    @property
    def alive(self) -> bool:
        """Always: a pod that ends is restarted by its kubelet (``poll`` says so), never the run's end."""
        return True

    def output(self, tail_bytes: int = 20_000) -> str:
        return self.log.read_bytes()[-tail_bytes:].decode(errors="replace")

    def pods(self) -> list[dict[str, Any]]:
        query = urllib.parse.urlencode({"labelSelector": self.selector})
        try:
            found = self.kube.get(f"/api/v1/namespaces/{self.namespace}/pods?{query}")
        except (KubeError, OSError):
            return []
        return list(found.get("items") or [])

    def poll(self) -> list[str]:
        said = []
        for pod in self.pods():
            said += self._changes(pod)
            status = self._status(pod)
            if status is None or not ({"running", "terminated"} & set(status.get("state") or {})):
                continue
            key = (pod["metadata"]["uid"], int(status.get("restartCount", 0)))
            if key not in self._followed:
                self._followed.add(key)
                name = pod["metadata"]["name"]
                threading.Thread(target=self._follow, args=(name,), name=f"log {name}", daemon=True).start()
        return said

    def _status(self, pod: dict[str, Any]) -> dict[str, Any] | None:
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        return next((s for s in statuses if s.get("name") == self.container), None)

    def _changes(self, pod: dict[str, Any]) -> list[str]:
        name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
        node = (pod.get("spec") or {}).get("nodeName") or ""
        status = self._status(pod) or {}
        ready, restarts = bool(status.get("ready")), int(status.get("restartCount", 0))
        before = self._seen.get(uid, ("", False, 0))
        self._seen[uid] = (node, ready, restarts)
        said = []
        if node and not before[0]:
            said.append(f"operator pod {name} scheduled on {node}")
        if restarts > before[2]:
            last = (status.get("lastState") or {}).get("terminated") or {}
            reason = last.get("reason", "?")
            said.append(
                f"operator pod {name} restarted ({restarts}): {reason}, exit code {last.get('exitCode', '?')}"
            )
        if ready and not before[1]:
            said.append(f"operator pod {name} Ready on {node}")
        return said

    def _follow(self, name: str) -> None:
        query = urllib.parse.urlencode({"container": self.container, "follow": "true"})
        path = f"/api/v1/namespaces/{self.namespace}/pods/{name}/log?{query}"
        try:
            for line in self.kube.lines(path):
                self._write(f"{name} {line}\n")
        except (KubeError, OSError) as exc:
            self._write(f"{name} (its log stream ended: {exc})\n")

    def _write(self, text: str) -> None:
        with self._lock, self.log.open("a") as out:
            out.write(text)
