"""The controller-runtime and client-go metric names, for the dashboards and alerts that read them.

``StandardNames`` is a collector on the same registry as ``Metrics``: at every scrape it derives
the standard families from the ``nova_operator_*`` ones (which stay, the spec names them), so
the two can never disagree and nothing is counted twice on the hot path.

- ``controller_runtime_reconcile_total{controller,result}`` (``terminal_error`` counts as
  ``error``, as controller-runtime does), ``_reconcile_errors_total{controller}``,
  ``_reconcile_time_seconds{controller}``, ``_active_workers{controller}``,
  ``_max_concurrent_reconciles{controller}``;
- ``workqueue_{depth,adds_total,retries_total,queue_duration_seconds,work_duration_seconds,
  unfinished_work_seconds,longest_running_processor_seconds}{name,controller}`` (both the
  controller's name, as controller-runtime sets them; ``depth`` also ``priority=""``);
- ``leader_election_master_status{name}``;
- ``rest_client_requests_total{code,host,method}`` and ``rest_client_request_duration_seconds{host,verb}``
  (client-go's: the HTTP method, summed over resources; ``host`` is the API server's host:port).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Protocol

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

HTTP_METHODS = {
    "get": "GET",
    "list": "GET",
    "watch": "GET",
    "create": "POST",
    "update": "PUT",
    "patch": "PATCH",
    "apply": "PATCH",
    "delete": "DELETE",
}
Labels = Mapping[str, str]
Relabel = Callable[[Labels], dict[str, str]]
Key = tuple[tuple[str, str], ...]  # the relabelled label pairs of one output series


def _controller(labels: Labels) -> dict[str, str]:
    return {"controller": labels["controller"]}


def _result(labels: Labels) -> dict[str, str]:
    result = "error" if labels["result"] == "terminal_error" else labels["result"]
    return {"controller": labels["controller"], "result": result}


def _queue(labels: Labels) -> dict[str, str]:
    return {"name": labels["name"], "controller": labels["name"]}


def _queue_depth(labels: Labels) -> dict[str, str]:
    return {**_queue(labels), "priority": ""}


def _samples(wrapper: MetricWrapperBase) -> Iterator[tuple[str, Labels, float]]:
    for metric in wrapper.collect():
        for s in metric.samples:
            yield s.name, s.labels, s.value


class Sources(Protocol):
    """The ``nova_operator_*`` families the standard names are derived from (``metrics.Metrics``)."""

    reconcile_total: Counter
    reconcile_errors: Counter
    reconcile_time: Histogram
    active_workers: Gauge
    max_workers: Gauge
    queue_depth: Gauge
    queue_adds: Counter
    queue_retries: Counter
    queue_latency: Histogram
    queue_work: Histogram
    queue_unfinished: Gauge
    queue_longest: Gauge
    leader: Gauge
    api_requests: Counter
    api_request_duration: Histogram
    api_host: str


class StandardNames(Collector):
    def __init__(self, metrics: Sources) -> None:
        self._m = metrics

    def describe(self) -> Iterable[Metric]:
        return []  # nothing to check against the registry's other names at registration

    def collect(self) -> Iterable[Metric]:
        m = self._m
        cr, wq = "controller_runtime_", "workqueue_"
        yield self._counter(m.reconcile_total, cr + "reconcile_total", _result)
        yield self._counter(m.reconcile_errors, cr + "reconcile_errors_total", _controller)
        yield self._histogram(m.reconcile_time, cr + "reconcile_time_seconds", _controller)
        yield self._gauge(m.active_workers, cr + "active_workers", _controller)
        yield self._gauge(m.max_workers, cr + "max_concurrent_reconciles", _controller)
        yield self._gauge(m.queue_depth, wq + "depth", _queue_depth)
        yield self._counter(m.queue_adds, wq + "adds_total", _queue)
        yield self._counter(m.queue_retries, wq + "retries_total", _queue)
        yield self._histogram(m.queue_latency, wq + "queue_duration_seconds", _queue)
        yield self._histogram(m.queue_work, wq + "work_duration_seconds", _queue)
        yield self._gauge(m.queue_unfinished, wq + "unfinished_work_seconds", _queue)
        yield self._gauge(m.queue_longest, wq + "longest_running_processor_seconds", _queue)
        yield self._gauge(m.leader, "leader_election_master_status", lambda labels: {"name": labels["name"]})
        host = m.api_host

        def request(labels: Labels) -> dict[str, str]:
            method = HTTP_METHODS.get(labels["verb"], labels["verb"].upper())
            return {"code": labels["code"], "host": host, "method": method}

        def duration(labels: Labels) -> dict[str, str]:
            return {"host": host, "verb": HTTP_METHODS.get(labels["verb"], labels["verb"].upper())}

        yield self._counter(m.api_requests, "rest_client_requests_total", request)
        yield self._histogram(m.api_request_duration, "rest_client_request_duration_seconds", duration)

    @staticmethod
    def _summed(
        wrapper: MetricWrapperBase, suffix: str, relabel: Relabel
    ) -> dict[tuple[tuple[str, str], ...], float]:
        sums: dict[tuple[tuple[str, str], ...], float] = defaultdict(float)
        for name, labels, value in _samples(wrapper):
            if name.endswith(suffix):
                sums[tuple(relabel(labels).items())] += value
        return sums

    def _counter(self, wrapper: MetricWrapperBase, name: str, relabel: Relabel) -> Metric:
        family: CounterMetricFamily | None = None
        for labels, value in self._summed(wrapper, "_total", relabel).items():
            family = family or CounterMetricFamily(
                name, wrapper._documentation, labels=[k for k, _ in labels]
            )
            family.add_metric([v for _, v in labels], value)
        return family or CounterMetricFamily(name, wrapper._documentation)

    def _gauge(self, wrapper: MetricWrapperBase, name: str, relabel: Relabel) -> Metric:
        family: GaugeMetricFamily | None = None
        for labels, value in self._summed(wrapper, "", relabel).items():
            family = family or GaugeMetricFamily(name, wrapper._documentation, labels=[k for k, _ in labels])
            family.add_metric([v for _, v in labels], value)
        return family or GaugeMetricFamily(name, wrapper._documentation)

    def _histogram(self, wrapper: MetricWrapperBase, name: str, relabel: Relabel) -> Metric:
        buckets: dict[Key, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        sums: dict[Key, float] = defaultdict(float)
        for sample, labels, value in _samples(wrapper):
            if sample.endswith("_bucket"):
                key = tuple(relabel({k: v for k, v in labels.items() if k != "le"}).items())
                buckets[key][labels["le"]] += value
            elif sample.endswith("_sum"):
                sums[tuple(relabel(labels).items())] += value
        family: HistogramMetricFamily | None = None
        for key, by_le in buckets.items():
            family = family or HistogramMetricFamily(name, wrapper._documentation, labels=[k for k, _ in key])
            ordered = sorted(by_le.items(), key=lambda kv: float(kv[0]))
            family.add_metric([v for _, v in key], ordered, sum_value=sums[key])
        return family or HistogramMetricFamily(name, wrapper._documentation)
