"""The kubelet's probe state machine (pure): thresholds, initial results, hold after failure.

A probe's result only changes after ``failureThreshold`` failures or ``successThreshold`` successes
in a row. Before any change, readiness is Failure, liveness Success and startup Unknown. A probe
ticks every ``periodSeconds`` from the container's start and skips the ticks before
``initialDelaySeconds``; liveness and readiness skip until the startup probe (if any) succeeded.
Once a liveness or startup probe turns Failure the container is restarted, and the probe holds until
the new container runs.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

JSON = dict[str, Any]


class Result(enum.Enum):
    UNKNOWN = "unknown"
    SUCCESS = "success"
    FAILURE = "failure"


INITIAL = {"readiness": Result.FAILURE, "liveness": Result.SUCCESS, "startup": Result.UNKNOWN}


@dataclass
class Timing:
    initial_delay: float
    period: float
    timeout: float
    success_threshold: int
    failure_threshold: int

    @classmethod
    def of(cls, probe: JSON) -> Timing:
        """The API defaults: period 10 s, timeout 1 s, thresholds 1 and 3."""
        return cls(
            initial_delay=float(probe.get("initialDelaySeconds", 0)),
            period=float(probe.get("periodSeconds", 10)),
            timeout=float(probe.get("timeoutSeconds", 1)),
            success_threshold=int(probe.get("successThreshold", 1)),
            failure_threshold=int(probe.get("failureThreshold", 3)),
        )


@dataclass
class ProbeState:
    kind: str  # readiness | liveness | startup
    timing: Timing
    result: Result = Result.UNKNOWN
    last: Result | None = None
    run: int = 0
    on_hold: bool = False

    def __post_init__(self) -> None:
        self.result = INITIAL[self.kind]

    def due(self, running_for: float) -> bool:
        """Whether a probe may run, the container having run ``running_for`` seconds."""
        return not self.on_hold and running_for >= self.timing.initial_delay

    def record(self, outcome: Result) -> bool:
        """Count one probe outcome; True when the probe's result changed."""
        if outcome == self.last:
            self.run += 1
        else:
            self.last, self.run = outcome, 1
        threshold = (
            self.timing.failure_threshold if outcome == Result.FAILURE else self.timing.success_threshold
        )
        if self.run < threshold:
            return False
        changed = outcome != self.result
        self.result = outcome
        if outcome == Result.FAILURE and self.kind in ("liveness", "startup"):
            self.on_hold, self.run = True, 0
        return changed

    def restarted(self) -> None:
        """A new container runs: probing starts over from the initial result."""
        self.result, self.last, self.run, self.on_hold = INITIAL[self.kind], None, 0, False
