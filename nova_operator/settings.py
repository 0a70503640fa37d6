"""The operator's settings: one frozen tree, grouped by concern, passed explicitly.

Defaults are the production values (reconciler spec §1 and issue 3); tests pass shorter
intervals. ``cli.py`` builds a ``Settings`` from flags and ``NOVA_OPERATOR_*`` variables.
"""

from __future__ import annotations

import socket
import uuid
from dataclasses import dataclass, field
from typing import Literal

from nova_operator.secret_refs import SecretRefPolicy

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where the kubelet mounts a pod's ServiceAccount token, CA bundle and namespace."""


@dataclass(frozen=True, slots=True)
class KubeSettings:
    kubeconfig: str | None = None  # None: $KUBECONFIG, in-cluster, else ~/.kube/config
    context: str | None = None
    request_timeout: float = 30.0
    # The pod's ServiceAccount mount (token, ca.crt, namespace). Tests move it with
    # NOVA_OPERATOR_SERVICE_ACCOUNT_DIR; there is no flag, a pod always has it here.
    service_account_dir: str = SERVICE_ACCOUNT_DIR


@dataclass(frozen=True, slots=True)
class WatchSettings:
    namespaces: tuple[str, ...] = ()  # empty: all namespaces
    watch_timeout_min: float = 300.0  # server-side timeoutSeconds, randomized in [min, max]
    watch_timeout_max: float = 600.0
    inactivity_timeout: float = 70.0  # no event and no bookmark for this long: the stream is dead
    open_timeout: float = 30.0  # opening a watch (connect, response headers) takes no longer
    min_watch_duration: float = 1.0  # a watch ended sooner with no event is an error (backed off)
    max_concurrent_opens: int = 16  # LISTs and watch opens in flight at once, across all informers
    backoff_initial: float = 0.8
    backoff_max: float = 30.0
    backoff_jitter: float = 0.2
    resync_period: float | None = 10 * 3600.0
    list_page_size: int = 500  # LIST in pages (limit/continue) so a large relist stays bounded
    sync_timeout: float = 120.0  # caches not synced by then: the manager fails


DEFAULT_RECONCILE_TIMEOUT = 300.0
DEFAULT_PASS_BUDGET = 30.0


@dataclass(frozen=True, slots=True)
class QueueSettings:
    workers: int = 2
    backoff_base: float = 0.005
    backoff_cap: float = 30.0
    bucket_rate: float = 10.0
    bucket_burst: int = 100
    # --reconcile-timeout: a pass still running after this long is cancelled, counted as an error
    # and requeued with backoff (controller-runtime's ReconciliationTimeout). Below ``stuck_after``,
    # so a pass that hangs frees its worker long before /healthz calls the worker stuck.
    reconcile_timeout: float | None = DEFAULT_RECONCILE_TIMEOUT  # None: no per-reconcile timeout
    stuck_after: float = 600.0  # one key held longer than this: the worker is stuck (/healthz 503)
    # --pass-budget: a pass begins no more work after this long (``pipeline.Budget``): what is left
    # goes to the key's next pass, in its namespace's next turn. Well below ``reconcile_timeout``: the
    # queue's fair shares promise another namespace's event at most one pass of waiting. Read by the
    # reconcilers (the controllers hand it to them), never enforced by the controller.
    pass_budget: float = DEFAULT_PASS_BUDGET
    hot_after: int = 30  # a key passed more often than this, each < 1 s after the last, is hot
    hot_delay_cap: float = 10.0  # events for a hot key wait 0.5 s doubling to this
    # A requeue of at most this many seconds continues its pass's work (reconciler.md's 1 s "next
    # pass", which must see a write of this one), not a poll: when due it is handed out in turn with
    # the events, not behind them (``WorkQueue.add_after(prompt=True)``).
    prompt_requeue: float = 1.0
    # The events of a CR's children (and of anything else mapped to it) that come within this many
    # seconds of the first are handled by one pass: a burst (the MariaDB objects turning Ready one
    # after the other, five Deployments becoming available) moves the CR's conditions once, not once
    # per object. The CR's own events are not held. 0: every event at once.
    coalesce: float = 0.25


@dataclass(frozen=True, slots=True)
class LeaderElectionSettings:
    enabled: bool = True
    namespace: str = "nova-system"
    name: str = "nova-operator-leader"
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}")
    release_on_cancel: bool = True  # tests turn it off to play a crashed leader
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


@dataclass(frozen=True, slots=True)
class ServerSettings:
    # loopback: a bare ``nova-operator`` is no more open than the chart, which passes the pod IP
    metrics_bind_address: str = "127.0.0.1:8080"  # "0" disables
    health_probe_bind_address: str = ":8081"  # "0" disables


@dataclass(frozen=True, slots=True)
class LogSettings:
    format: Literal["json", "console"] = "json"
    level: str = "info"


DEFAULT_NOVA_API_URL = "http://{name}.{namespace}.svc.cluster.local:8774"


@dataclass(frozen=True, slots=True)
class OpenStackSettings:
    # Where the NovaCompute controller reaches a Nova's compute API: ``{name}`` and ``{namespace}``
    # are the Nova's. The default is its in-cluster Service; an operator running outside the
    # cluster (``make run``, development) points it elsewhere.
    nova_api_url: str = DEFAULT_NOVA_API_URL

    def nova_api_url_for(self, name: str, namespace: str) -> str:
        return self.nova_api_url.format(name=name, namespace=namespace)


@dataclass(frozen=True, slots=True)
class Settings:
    kube: KubeSettings = field(default_factory=KubeSettings)
    watch: WatchSettings = field(default_factory=WatchSettings)
    queue: QueueSettings = field(default_factory=QueueSettings)
    leader_election: LeaderElectionSettings = field(default_factory=LeaderElectionSettings)
    servers: ServerSettings = field(default_factory=ServerSettings)
    log: LogSettings = field(default_factory=LogSettings)
    openstack: OpenStackSettings = field(default_factory=OpenStackSettings)
    # Where the operator runs ($POD_NAMESPACE or the ServiceAccount mount's, else nova-system):
    # the default namespace of the Lease and the allowed source in the Novas' NetworkPolicies.
    operator_namespace: str = "nova-system"
    # --drain-timeout: in-flight reconciles get this long after SIGTERM, then are cancelled and
    # the Lease is released. Well under the kubelet's default 30 s grace period.
    shutdown_timeout: float = 10.0
    # --default-image-pull-policy: imagePullPolicy of compute pods whose image names none
    # (novacompute spec §9.7); None: Always for a tag, IfNotPresent for a digest.
    default_image_pull_policy: str | None = None
    # --secret-ref-label: a Secret a CR names is used only while it carries this label (None: any)
    secret_refs: SecretRefPolicy | None = None
