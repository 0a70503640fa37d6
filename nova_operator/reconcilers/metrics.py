"""The Nova and NovaCompute metric families (reconciler.md §14), beside the process's generic ones.

``NovaMetrics.of(metrics)`` registers them once on the registry of the process's ``Metrics`` (the
one ``/metrics`` serves) and hands back the same object every time after, so the two controllers
and every pass share one set of series. The runtime never sees them: it counts requests, queues
and passes; what a step or a Nova did is counted here.

Names:

- steps (§14.1): ``nova_operator_reconcile_duration_seconds{sub_reconciler}``,
  ``nova_operator_reconcile_errors_total{sub_reconciler,condition_type}``
- per-CR Jobs (§14.2): ``nova_operator_db_sync_total{nova,namespace,result}``,
  ``nova_operator_db_sync_duration_seconds{nova,namespace}``, ``nova_operator_db_archive_total``,
  ``nova_operator_db_archive_duration_seconds``, ``nova_operator_nova_ready{nova,namespace}``
  (1 while the Nova's Ready condition is True, else 0),
  ``nova_operator_stale_services_deleted_total{nova,namespace,binary}`` (beyond the spec: service
  records of gone pods the ServiceRecords step deleted); all deleted with ``forget_nova`` on
  finalizer release
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics import MetricWrapperBase

from nova_operator.metrics import Metrics
from nova_operator.naming import SERVICE_BINARIES

_STEP_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_JOB_BUCKETS = (1, 5, 10, 30, 60, 120, 300, 600)
JOB_RESULTS = ("succeeded", "failed")

_REGISTERED: weakref.WeakKeyDictionary[CollectorRegistry, NovaMetrics] = weakref.WeakKeyDictionary()


class NovaMetrics:
    """The step and per-Nova families, registered on ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = self.registry = registry
        self.step_duration = Histogram(
            "nova_operator_reconcile_duration_seconds",
            "Wall-clock duration of one step (sub-reconciler) invocation",
            ["sub_reconciler"],
            buckets=_STEP_BUCKETS,
            registry=r,
        )
        self.step_errors = Counter(
            "nova_operator_reconcile_errors_total",
            "Steps that returned an error",
            ["sub_reconciler", "condition_type"],
            registry=r,
        )
        self.db_sync_total = Counter(
            "nova_operator_db_sync_total",
            "Terminated db-sync and expand/migrate/contract Jobs",
            ["nova", "namespace", "result"],
            registry=r,
        )
        self.db_sync_duration = Histogram(
            "nova_operator_db_sync_duration_seconds",
            "Durations of terminated db-sync and expand/migrate/contract Jobs",
            ["nova", "namespace"],
            buckets=_JOB_BUCKETS,
            registry=r,
        )
        self.db_archive_total = Counter(
            "nova_operator_db_archive_total",
            "Terminated db-archive runs",
            ["nova", "namespace", "result"],
            registry=r,
        )
        self.db_archive_duration = Histogram(
            "nova_operator_db_archive_duration_seconds",
            "Durations of terminated db-archive runs",
            ["nova", "namespace"],
            buckets=_JOB_BUCKETS,
            registry=r,
        )
        self.nova_ready = Gauge(
            "nova_operator_nova_ready",
            "1 while the Nova's Ready condition is True, 0 otherwise (set on each status write)",
            ["nova", "namespace"],
            registry=r,
        )
        self.stale_services_deleted = Counter(
            "nova_operator_stale_services_deleted_total",
            "Service records of control-plane pods that are gone, deleted from Nova (reported down)",
            ["nova", "namespace", "binary"],
            registry=r,
        )

    @classmethod
    def of(cls, metrics: Metrics) -> NovaMetrics:
        """The families on ``metrics``' registry, registered on the first call."""
        found = _REGISTERED.get(metrics.registry)
        if found is None:
            found = _REGISTERED[metrics.registry] = cls(metrics.registry)
        return found

    def forget_nova(self, name: str, namespace: str) -> None:
        """Delete every per-CR series of one Nova (on release of its finalizer)."""
        for counter in (self.db_sync_total, self.db_archive_total):
            for result in JOB_RESULTS:
                with contextlib.suppress(KeyError):
                    counter.remove(name, namespace, result)
        for per_cr in (self.db_sync_duration, self.db_archive_duration, self.nova_ready):
            with contextlib.suppress(KeyError):
                per_cr.remove(name, namespace)
        for binary in SERVICE_BINARIES:
            with contextlib.suppress(KeyError):
                self.stale_services_deleted.remove(name, namespace, binary)


class StepMetrics:
    """A pipeline's observer (§14.1): each step's duration, and its errors under the condition it owns.

    ``steps`` are the (step, condition) pairs of the pipeline: their error series exist at 0 from the
    start, so rates and alerts work before the first failure.
    """

    def __init__(self, metrics: NovaMetrics, steps: Iterable[tuple[str, str]]) -> None:
        self._metrics = metrics
        for step, condition in steps:
            metrics.step_errors.labels(step, condition)

    def observe_step(self, step: str, condition: str, seconds: float, *, failed: bool) -> None:
        self._metrics.step_duration.labels(step).observe(seconds)
        if failed:
            self._metrics.step_errors.labels(step, condition).inc()


def operator_families(metrics: Metrics) -> list[MetricWrapperBase]:
    """Every ``nova_operator_*`` family the operator process registers: the generic ones and these."""
    values = [*vars(metrics).values(), *vars(NovaMetrics.of(metrics)).values()]
    return [v for v in values if isinstance(v, MetricWrapperBase)]
