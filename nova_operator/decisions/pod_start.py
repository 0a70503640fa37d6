"""Whether a workload's pod cannot start, and how a waiting step names it (issue 37 item 5).

A step that waits on a Job or a rollout would otherwise say only "running" or "not available yet"
while the kubelet has given up on a pod: an image it cannot pull, a Secret key the environment
names that does not exist, a container that keeps crashing. ``first_stuck`` picks one such pod of
the workload (the first by name) and the waiting reason of its first stuck container (init
containers first, as the kubelet runs them); ``annotate`` appends it to the step's message, e.g.
``Expand phase running: pod nova-db-expand-x7k2p cannot start: ImagePullBackOff (image nova:2026.1)``.

Only the kubelet's *reason* and the container's image reference are read. Its waiting *message* is
never read, kept or shown: it may quote an environment value, a registry credential or a Secret's
key. The text changes only when the pod's state changes (a new reason, another pod), so a waiting
step that polls writes no status while nothing moves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

Obj = Mapping[str, Any]

STUCK_REASONS: Final = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "CrashLoopBackOff",
    }
)
"""Waiting reasons after which the kubelet will not start the container by itself."""

_IMAGE_LIMIT: Final = 200
"""An image reference longer than this is cut (a condition message stays short)."""


@dataclass(frozen=True, slots=True)
class Stuck:
    """A pod that cannot start: its name, its first stuck container and that container's waiting
    reason (``waiting``: the kubelet's, not a condition's) and image."""

    pod: str
    container: str
    waiting: str
    image: str

    def __str__(self) -> str:
        image = f" (image {self.image})" if self.image else ""
        return f"pod {self.pod} cannot start: {self.waiting}{image}"


def _statuses(pod: Obj) -> list[Obj]:
    status = pod.get("status") or {}
    found: list[Obj] = []
    for key in ("initContainerStatuses", "containerStatuses"):
        found += [s for s in status.get(key) or [] if isinstance(s, Mapping)]
    return found


def stuck_containers(pod: Obj) -> tuple[tuple[str, str, str], ...]:
    """(container, reason, image) of each container of ``pod`` waiting for one of ``STUCK_REASONS``."""
    meta = pod.get("metadata") or {}
    if meta.get("deletionTimestamp") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return ()
    found = []
    for s in _statuses(pod):
        waiting = (s.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason") if isinstance(waiting, Mapping) else None
        if reason in STUCK_REASONS:
            found.append((str(s.get("name") or ""), str(reason), str(s.get("image") or "")[:_IMAGE_LIMIT]))
    return tuple(found)


def first_stuck(pods: Iterable[Obj]) -> Stuck | None:
    """The first pod by name that cannot start, with its first stuck container; None when none is."""
    named = sorted(pods, key=lambda p: str((p.get("metadata") or {}).get("name") or ""))
    for pod in named:
        containers = stuck_containers(pod)
        if containers:
            container, reason, image = containers[0]
            return Stuck(str((pod.get("metadata") or {}).get("name") or ""), container, reason, image)
    return None


def annotate(message: str, pods: Iterable[Obj]) -> str:
    """``message``, followed by the pod that cannot start when there is one."""
    stuck = first_stuck(pods)
    return message if stuck is None else f"{message}: {stuck}"
