"""A pod's status from its containers' records, as the kubelet computes it (pure).

``phase`` follows the kubelet's ``getPhase``: any init container not done keeps the pod Pending
(Failed when it failed and the pod never restarts); a waiting container that never ran keeps it
Pending; one running makes it Running; when all stopped, ``restartPolicy`` decides between Running
(will restart), Succeeded and Failed. Conditions: PodScheduled, PodReadyToStartContainers,
Initialized, ContainersReady, Ready, with the kubelet's reasons and messages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]


@dataclass
class Record:
    """What the kubelet knows of one container (its ``containerStatuses`` entry)."""

    name: str
    image: str
    state: JSON = field(default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}})
    last_state: JSON = field(default_factory=dict)
    restart_count: int = 0
    ready: bool = False
    started: bool = False
    container_id: str = ""

    @property
    def running(self) -> bool:
        return "running" in self.state

    @property
    def exit_code(self) -> int | None:
        term = self.state.get("terminated")
        return None if term is None else int(term["exitCode"])

    def to_api(self) -> JSON:
        out: JSON = {
            "name": self.name,
            "image": self.image,
            "imageID": "",
            "ready": self.ready,
            "started": self.started,
            "restartCount": self.restart_count,
            "state": self.state,
            "lastState": self.last_state,
        }
        if self.container_id:
            out["containerID"] = self.container_id
        return out


def phase(restart_policy: str, init: Sequence[Record], main: Sequence[Record], terminal: bool = False) -> str:
    """The pod's phase; ``terminal``: the pod is being deleted and all its containers stopped, so it
    ends Succeeded only if every container exited 0 (the kubelet's terminal phase)."""
    if terminal:
        return "Succeeded" if main and all(r.exit_code == 0 for r in main) else "Failed"
    failed_init = pending_init = 0
    for rec in init:
        code = rec.exit_code
        if code is None and "waiting" in rec.state and rec.last_state.get("terminated"):
            code = int(rec.last_state["terminated"]["exitCode"])
        if code is None:
            pending_init += 1
        elif code != 0:
            failed_init += 1
    if failed_init and restart_policy == "Never":
        return "Failed"
    if pending_init or failed_init:
        return "Pending"
    running = waiting = stopped = succeeded = 0
    for rec in main:
        if rec.running:
            running += 1
        elif "terminated" in rec.state:
            stopped += 1
            succeeded += rec.exit_code == 0
        elif rec.last_state.get("terminated"):
            stopped += 1
            succeeded += rec.last_state["terminated"]["exitCode"] == 0
        else:
            waiting += 1
    if waiting:
        return "Pending"
    if running:
        return "Running"
    if restart_policy == "Always":
        return "Running"
    if restart_policy == "OnFailure":
        return "Succeeded" if stopped == succeeded else "Running"
    return "Failed" if stopped > succeeded else "Succeeded"


def conditions(
    pod_phase: str,
    init: Sequence[Record],
    main: Sequence[Record],
    sandbox_ready: bool,
    previous: Sequence[JSON],
    now: str,
) -> list[JSON]:
    """The pod's conditions; ``lastTransitionTime`` kept from ``previous`` while a status holds."""
    before = {c["type"]: c for c in previous}

    def cond(kind: str, ok: bool, reason: str = "", message: str = "") -> JSON:
        c: JSON = {"type": kind, "status": "True" if ok else "False"}
        if not ok and reason:
            c["reason"] = reason
        if not ok and message:
            c["message"] = message
        old = before.get(kind)
        c["lastTransitionTime"] = old["lastTransitionTime"] if old and old["status"] == c["status"] else now
        c["lastProbeTime"] = None
        return c

    done = pod_phase in ("Succeeded", "Failed")
    pending_init = [r.name for r in init if r.exit_code != 0]
    unready = [r.name for r in main if not r.ready]
    initialized = cond(
        "Initialized",
        not pending_init,
        "ContainersNotInitialized",
        f"containers with incomplete status: [{' '.join(pending_init)}]",
    )
    if done:
        reason = "PodCompleted" if pod_phase == "Succeeded" else "PodFailed"
        containers_ready = cond("ContainersReady", False, reason)
        ready = cond("Ready", False, reason)
    else:
        message = f"containers with unready status: [{' '.join(unready)}]"
        containers_ready = cond("ContainersReady", not unready, "ContainersNotReady", message)
        ready = cond("Ready", not unready, "ContainersNotReady", message)
    return [
        cond("PodReadyToStartContainers", sandbox_ready and not done),
        initialized,
        ready,
        containers_ready,
        cond("PodScheduled", True),
    ]


def render(
    pod: JSON,
    init: Sequence[Record],
    main: Sequence[Record],
    *,
    sandbox_ready: bool,
    host_ip: str,
    pod_ip: str,
    start_time: str,
    now: str,
    extra: Mapping[str, Any] | None = None,
    terminal: bool = False,
) -> JSON:
    """The whole ``status`` to write (the kubelet owns every field of it)."""
    restart_policy = pod["spec"].get("restartPolicy", "Always")
    pod_phase = phase(restart_policy, init, main, terminal)
    previous = (pod.get("status") or {}).get("conditions") or []
    status: JSON = {
        "phase": pod_phase,
        "conditions": conditions(pod_phase, init, main, sandbox_ready, previous, now),
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": start_time,
        "qosClass": (pod.get("status") or {}).get("qosClass", "BestEffort"),
        "containerStatuses": [r.to_api() for r in main],
    }
    if init:
        status["initContainerStatuses"] = [r.to_api() for r in init]
    if pod_ip:
        status["podIP"] = pod_ip
        status["podIPs"] = [{"ip": pod_ip}]
    status.update(extra or {})
    return status
