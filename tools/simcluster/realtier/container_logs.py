"""A container's log as the real-Nova tier's tests read it: the API server's ``pods/log`` (which the
kubelet serves), the last ended run's (``previous``, when the container restarted) before the current
one's. A kubelet keeps no run before the last ended one, nor the log of a pod that is gone: ``follow``
keeps the current run's in a file of the host as the kubelet streams it.
"""

from __future__ import annotations

import pathlib
import threading
import urllib.parse
from typing import Any

from simcluster.client.kube import Kube, KubeError


def _restarted(pod: dict[str, Any], container: str) -> bool:
    statuses = [
        *((pod.get("status") or {}).get("containerStatuses") or []),
        *((pod.get("status") or {}).get("initContainerStatuses") or []),
    ]
    return any(s.get("name") == container and int(s.get("restartCount", 0)) > 0 for s in statuses)


def api_log(kube: Kube, pod: dict[str, Any], container: str) -> str:
    meta = pod["metadata"]
    path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/log"
    runs = [{"container": container, "previous": "true"}] if _restarted(pod, container) else []
    runs.append({"container": container})
    text = []
    for query in runs:
        try:
            lines = list(kube.lines(f"{path}?{urllib.parse.urlencode(query)}"))
        except KubeError as exc:  # a run that has not started (yet), or a pod gone
            if exc.status not in (400, 404):
                raise
            continue
        text.append("".join(f"{line}\n" for line in lines))
    return "".join(text)


def follow(kube: Kube, pod: dict[str, Any], container: str, into: pathlib.Path) -> threading.Thread:
    """A thread that appends the current run's log of ``container`` to ``into`` as the kubelet
    streams it (``follow``), until the run ends (the kubelet ends the stream then): readable after
    the pod is gone."""
    meta = pod["metadata"]
    query = urllib.parse.urlencode({"container": container, "follow": "true"})
    path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/log?{query}"
    into.parent.mkdir(parents=True, exist_ok=True)
    into.touch()

    def run() -> None:
        with into.open("a") as out:
            try:
                for line in kube.lines(path):
                    out.write(line + "\n")
                    out.flush()
            except (KubeError, OSError) as exc:
                out.write(f"(the log stream ended: {exc})\n")

    thread = threading.Thread(target=run, name=f"log {meta['name']}/{container}", daemon=True)
    thread.start()
    return thread
