"""Prometheus collectors of one operator process, held on one ``Metrics`` object.

Each ``Metrics`` owns its own ``CollectorRegistry`` (the manager serves it on /metrics), so
two managers in one test process do not collide and a test or a benchmark reads exact
counts from its own instance. Series with a fixed label set are pre-created at 0.

Names:

- API: ``nova_operator_api_requests_total{verb,resource,code}``,
  ``nova_operator_api_request_duration_seconds{verb,resource}``
- controllers: ``nova_operator_controller_reconcile_total{controller,result}``
  (result: success, error, requeue_after, terminal_error),
  ``nova_operator_controller_reconcile_errors_total{controller}``,
  ``nova_operator_controller_reconcile_time_seconds{controller}``,
  ``nova_operator_controller_active_workers{controller}``,
  ``nova_operator_controller_max_concurrent_reconciles{controller}``
- work queues (``name`` = controller): ``nova_operator_workqueue_depth``,
  ``_adds_total``, ``_retries_total``, ``_queue_duration_seconds``, ``_work_duration_seconds``,
  ``_longest_running_processor_seconds``, ``_unfinished_work_seconds`` (read at scrape time)
- informers: ``nova_operator_informer_events_total{resource,type}``,
  ``nova_operator_informer_relists_total{resource}``,
  ``nova_operator_informer_watch_restarts_total{resource,reason}``
- leader election: ``nova_operator_leader_election_master_status{name}``,
  ``nova_operator_leader_election_renewal_duration_seconds{name,result}``
- the process: ``nova_operator_event_loop_lag_seconds`` (how late a scheduled wake-up ran)

The step and per-Nova families are ``nova_operator.reconcilers.metrics.NovaMetrics``, on the same
registry.

The controller-runtime and client-go names (``controller_runtime_*``, ``workqueue_*``,
``leader_election_master_status``, ``rest_client_*``) are derived from these at scrape time by
``metrics_standard.StandardNames``.
"""

from __future__ import annotations

import contextlib
import gzip
from collections.abc import Iterator
from contextvars import ContextVar

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import Metric
from prometheus_client.exposition import choose_encoder, gzip_accepted

from nova_operator.metrics_standard import StandardNames

RESULTS = ("success", "error", "requeue_after", "terminal_error")
READ_VERBS = frozenset({"get", "list"})
WRITE_VERBS = frozenset({"create", "update", "apply", "patch", "delete"})
_RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class WriteTally:
    """The write requests (``WRITE_VERBS``) sent inside one ``counting_writes`` scope."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


_TALLY: ContextVar[WriteTally | None] = ContextVar("nova_operator_write_tally", default=None)


@contextlib.contextmanager
def counting_writes() -> Iterator[WriteTally]:
    """Count the writes sent by this task, and by the tasks it starts, until the scope ends.

    A controller wraps each pass in one, so "this pass wrote" is this pass's, never another
    worker's, concurrent write (tasks copy the context: the pass's own subtasks count too).
    """
    tally = WriteTally()
    token = _TALLY.set(tally)
    try:
        yield tally
    finally:
        _TALLY.reset(token)


class Metrics:
    """All collectors, registered on ``registry`` (a fresh one unless given)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        own = registry is None
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        if own:  # process_* and python_* series, as the global registry would have them
            ProcessCollector(registry=r)
            PlatformCollector(registry=r)
        self.api_requests = Counter(
            "nova_operator_api_requests_total",
            "API requests by verb, resource and HTTP status code ('error' when there was no answer)",
            ["verb", "resource", "code"],
            registry=r,
        )
        self.api_request_duration = Histogram(
            "nova_operator_api_request_duration_seconds",
            "API request latency (for watches: until the stream opened); the Lease requests are "
            "resource=leases.coordination.k8s.io",
            ["verb", "resource"],
            buckets=_RECONCILE_BUCKETS,
            registry=r,
        )
        self.api_retries = Counter(
            "nova_operator_api_retries_total",
            "Requests retried after a 429 or a 5xx (Retry-After honoured, bounded)",
            ["verb", "resource", "code"],
            registry=r,
        )
        self.damped_events = Counter(
            "nova_operator_controller_damped_events_total",
            "Events for a hot key (re-triggered pass after pass) delayed instead of reconciled at once",
            ["controller"],
            registry=r,
        )
        self.passes_left_over = Counter(
            "nova_operator_controller_passes_left_over_total",
            "Passes that stopped at their time budget (--pass-budget) with work left, requeued at once",
            ["controller"],
            registry=r,
        )
        self.reconcile_total = Counter(
            "nova_operator_controller_reconcile_total",
            "Reconciles by controller and outcome",
            ["controller", "result"],
            registry=r,
        )
        self.reconcile_errors = Counter(
            "nova_operator_controller_reconcile_errors_total",
            "Reconciles that raised (retried with backoff, or terminal)",
            ["controller"],
            registry=r,
        )
        self.reconcile_time = Histogram(
            "nova_operator_controller_reconcile_time_seconds",
            "Duration of one reconcile",
            ["controller"],
            buckets=_RECONCILE_BUCKETS,
            registry=r,
        )
        self.active_workers = Gauge(
            "nova_operator_controller_active_workers",
            "Workers currently reconciling",
            ["controller"],
            registry=r,
        )
        self.max_workers = Gauge(
            "nova_operator_controller_max_concurrent_reconciles",
            "Configured workers",
            ["controller"],
            registry=r,
        )
        self.queue_depth = Gauge("nova_operator_workqueue_depth", "Keys waiting", ["name"], registry=r)
        self.queue_adds = Counter("nova_operator_workqueue_adds_total", "Keys added", ["name"], registry=r)
        self.queue_retries = Counter(
            "nova_operator_workqueue_retries_total", "Rate-limited re-adds", ["name"], registry=r
        )
        self.queue_latency = Histogram(
            "nova_operator_workqueue_queue_duration_seconds",
            "Time a key waited in the queue before a worker took it",
            ["name"],
            buckets=_RECONCILE_BUCKETS,
            registry=r,
        )
        self.queue_work = Histogram(
            "nova_operator_workqueue_work_duration_seconds",
            "Time a worker held a key",
            ["name"],
            buckets=_RECONCILE_BUCKETS,
            registry=r,
        )
        self.queue_longest = Gauge(
            "nova_operator_workqueue_longest_running_processor_seconds",
            "How long the key held longest by a worker has been held (a stuck reconcile grows it)",
            ["name"],
            registry=r,
        )
        self.queue_unfinished = Gauge(
            "nova_operator_workqueue_unfinished_work_seconds",
            "Seconds of work in progress: the sum over held keys of the time they have been held",
            ["name"],
            registry=r,
        )
        self.informer_events = Counter(
            "nova_operator_informer_events_total",
            "Watch events and relist differences applied to a cache",
            ["resource", "type"],
            registry=r,
        )
        self.informer_relists = Counter(
            "nova_operator_informer_relists_total",
            "Full LISTs after start, 410 Gone or errors",
            ["resource"],
            registry=r,
        )
        self.informer_watch_restarts = Counter(
            "nova_operator_informer_watch_restarts_total",
            "Watches re-opened, by reason: closed (normal end), gone (410), inactive (silent), "
            "open_timeout, short (ended at once without an event), error",
            ["resource", "reason"],
            registry=r,
        )
        self.informer_held_bytes = Gauge(
            "nova_operator_informer_held_bytes",
            "Size of what a size-bounded informer cache holds whole, by resource (secrets: the decoded "
            "bytes of the data of the Secrets kept with their data; bounded per Secret and per namespace)",
            ["resource"],
            registry=r,
        )
        self.leader = Gauge(
            "nova_operator_leader_election_master_status",
            "1 while this process holds the lease",
            ["name"],
            registry=r,
        )
        self.lease_renewal = Histogram(
            "nova_operator_leader_election_renewal_duration_seconds",
            "From a renewal's due time until the Lease was renewed (result=renewed, retries included) "
            "or given up at the renew deadline (result=lost)",
            ["name", "result"],
            buckets=_RECONCILE_BUCKETS,
            registry=r,
        )
        self.loop_lag = Histogram(
            "nova_operator_event_loop_lag_seconds",
            "How much later than asked a periodic wake-up ran on the event loop: every task, the "
            "Lease renewal among them, waits this long behind whatever holds the loop",
            buckets=_LAG_BUCKETS,
            registry=r,
        )
        self.api_host = ""  # host:port of the API server (the Kube client sets it), for rest_client_*
        r.register(StandardNames(self))

    def register_controller(self, name: str, workers: int) -> None:
        """Pre-create a controller's series at 0 so rates and alerts work from the start."""
        for result in RESULTS:
            self.reconcile_total.labels(name, result)
        self.reconcile_errors.labels(name)
        self.active_workers.labels(name).set(0)
        self.max_workers.labels(name).set(workers)
        self.queue_depth.labels(name).set(0)
        self.queue_adds.labels(name)
        self.queue_retries.labels(name)
        self.damped_events.labels(name)
        self.passes_left_over.labels(name)

    def count_request(self, verb: str, resource: str, code: str) -> None:
        """One API request sent (``code``: the HTTP status, or 'error' when there was no answer)."""
        self.api_requests.labels(verb, resource, code).inc()
        # A pass compares its own writes through the tally of its task (a ContextVar), not a
        # process-wide count: the Lease's thread sends writes too, and shares no counter with it.
        if verb in WRITE_VERBS and (tally := _TALLY.get()) is not None:
            tally.count += 1

    def api_request_count(self, verbs: frozenset[str] | None = None, resource: str | None = None) -> int:
        """Sum of ``nova_operator_api_requests_total`` over the given verbs (all if None)."""
        total = 0.0
        metric: Metric
        for metric in self.api_requests.collect():
            for s in metric.samples:
                if not s.name.endswith("_total"):
                    continue
                if verbs is not None and s.labels["verb"] not in verbs:
                    continue
                if resource is not None and s.labels["resource"] != resource:
                    continue
                total += s.value
        return int(total)

    def api_request_counts(self) -> dict[tuple[str, str], float]:
        """``nova_operator_api_requests_total`` by (verb, resource), whatever the answer."""
        counts: dict[tuple[str, str], float] = {}
        for metric in self.api_requests.collect():
            for s in metric.samples:
                if s.name.endswith("_total"):
                    key = (s.labels["verb"], s.labels["resource"])
                    counts[key] = counts.get(key, 0.0) + s.value
        return counts

    def render(self) -> bytes:
        """The text exposition of every collector."""
        return generate_latest(self.registry)

    def exposition(self, accept: str, accept_encoding: str, names: list[str]) -> tuple[dict[str, str], bytes]:
        """What ``/metrics`` answers, negotiated as prometheus_client's own servers do: the text format
        or OpenMetrics as ``accept`` asks, gzip-compressed when ``accept_encoding`` allows it, and
        only the families ``names`` lists (``name[]``) when it lists any."""
        encoder, content_type = choose_encoder(accept)
        source = self.registry.restricted_registry(names) if names else self.registry
        body = encoder(source)
        headers = {"Content-Type": content_type}
        if gzip_accepted(accept_encoding):
            body = gzip.compress(body)
            headers["Content-Encoding"] = "gzip"
        return headers, body
