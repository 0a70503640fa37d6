"""``ComputePass``: what one NovaCompute pass hands its steps, and what the steps hand forward.

A pass object is built fresh for every reconcile: pools are reconciled concurrently, so
nothing a step produces may live on the controller (novacompute-crd.md §5.1, §20). The
compute API is reached through the Nova's ``NovaView`` (``openstack.view``), taken lazily once
per pass and shared by the Aggregates and Services steps: within its short window every pool of
the Nova shares one token and one read of the services, hypervisors and aggregates (issue 41), so
a pass asks Keystone for one token at most.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from nova_operator import conditions, intervals
from nova_operator.clock import utcnow
from nova_operator.decisions.nodeplan import Plan
from nova_operator.kube.client import Kube
from nova_operator.kube.resources import SECRETS, ResourceRef
from nova_operator.kube.types import Object
from nova_operator.models.novacompute import NovaCompute
from nova_operator.openstack import Credentials
from nova_operator.openstack.client import REQUEST_TIMEOUT
from nova_operator.openstack.view import ComputeAPI, NovaView, NovaViews
from nova_operator.pipeline import UNLIMITED, Budget, StepInputError
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.events import EventSink, EventType
from nova_operator.secret_refs import (
    SECRET_DATA_LIMIT,
    SECRET_TOO_LARGE,
    SecretRefPolicy,
    secret_data_size,
    too_large,
)
from nova_operator.settings import DEFAULT_PASS_BUDGET

DRAIN_FINALIZER: Final = "nova.openstack.c5c3.io/compute-drain"
COMPONENT: Final = "novacompute-controller"
NOVA_REF_INDEX: Final = "spec.novaRef.name"


def default_nova_api_url(nova: str, namespace: str) -> str:
    """The Nova API of a local Nova: its Service on port 8774 (§6)."""
    return f"http://{nova}.{namespace}.svc.cluster.local:8774"


class SecretTooLarge(StepInputError):
    """A Secret the pass reads holds more data than ``secret_refs.SECRET_DATA_LIMIT`` (names the
    Secret, its size and the limit; never its content). Looked at again after 60 s, or when it changes."""

    reason = SECRET_TOO_LARGE
    requeue_after = intervals.CHILD_OWNED_POLL


PoolLister = Callable[[str, str], list[Object]]
"""(namespace, nova name) -> the NovaComputes of that Nova (the ``spec.novaRef.name`` index)."""
Lookup = Callable[[ResourceRef, str, str], Object | None]
"""(kind, namespace, name) -> the cached object, or None (unknown: the caller applies)."""


Listing = Callable[[ResourceRef, str, Mapping[str, str]], list[Object] | None]
"""(kind, namespace, labels) -> the cached objects carrying every label, or None (not cached: list)."""


Fill = Callable[[ResourceRef, Object], None]
"""(kind, object read with a GET) -> hand it to the informer cache (a withheld entry is filled)."""


def no_cache(ref: ResourceRef, namespace: str, name: str) -> Object | None:
    return None


def no_fill(ref: ResourceRef, obj: Object) -> None:
    return None


def no_listing(ref: ResourceRef, namespace: str, labels: Mapping[str, str]) -> list[Object] | None:
    return None


@dataclass(frozen=True)
class ComputeIntervals:
    """The named requeues of §19; production values from ``nova_operator.intervals``."""

    next_pass: float = intervals.NEXT_PASS  # after adding the finalizer
    wait: float = intervals.SECRET_POLL  # NovaReady and ConfigReady waits, NodesForbidden (15 s)
    releasing: float = intervals.COMPUTE_NODE_RELEASING  # Releasing nodes, a concurrent aggregate (10 s)
    draining: float = intervals.COMPUTE_NODE_DRAINING  # Draining/Pending, every failed API call (30 s)
    settled: float = intervals.COMPUTE_SETTLED  # every node settled (60 s)
    discovery_grace: float = 30.0  # a finished discovery Job is left alone this long, then replaced

    def scaled(self, factor: float) -> ComputeIntervals:
        """Every interval times ``factor`` (tests run the same state machine faster)."""
        return ComputeIntervals(*(getattr(self, f) * factor for f in self.__dataclass_fields__))


class WalkResume:
    """The ledger entry after which a pool's next pass walks first, for a walk the budget stopped.
    Kept across passes on purpose (the queue never runs one pool's passes at once); a pool's entry is
    dropped when a walk ends without the budget stopping it, and by the pool's release."""

    def __init__(self) -> None:
        self._after: dict[tuple[str, str], str] = {}

    def after(self, namespace: str, name: str) -> str | None:
        return self._after.get((namespace, name))

    def stopped(self, namespace: str, name: str, last: str) -> None:
        self._after[(namespace, name)] = last

    def finished(self, namespace: str, name: str) -> None:
        self._after.pop((namespace, name), None)

    def __len__(self) -> int:
        return len(self._after)


class ZoneClaims:
    """The zones each pool's latest pass holds, as its Aggregates step saw them (issue 41, item 5).

    A pass creates a zone aggregate before its status (the ledger that shows the zone) is written,
    so a sibling's pass in between sees a marked, empty aggregate that no ledger it knows needs, and
    deleted it (the owner then created it again: 7 creates and 1 delete for 5 aggregates at 20
    pools). A pass records its zones here before it creates anything, and a pass counts its live
    siblings' claims as required as well as their ledgers: an aggregate goes once neither shows it.
    Kept across passes like ``WalkResume``; a pool's claim goes with its release.
    """

    def __init__(self) -> None:
        self._zones: dict[tuple[str, str], frozenset[str]] = {}

    def hold(self, namespace: str, name: str, zones: frozenset[str]) -> None:
        self._zones[(namespace, name)] = zones

    def of(self, namespace: str, names: list[str]) -> set[str]:
        return {zone for name in names for zone in self._zones.get((namespace, name), ())}

    def finished(self, namespace: str, name: str) -> None:
        self._zones.pop((namespace, name), None)

    def __len__(self) -> int:
        return len(self._zones)


@dataclass(frozen=True)
class ComputeSettings:
    """Knobs of the NovaCompute controller; production defaults, tests inject faster ones."""

    nova_api_url: Callable[[str, str], str] = default_nova_api_url
    request_timeout: float = REQUEST_TIMEOUT
    default_pull_policy: str | None = None  # the operator-wide --default-image-pull-policy
    clock: Callable[[], datetime] = utcnow
    config_map_history: int = 3
    secret_refs: SecretRefPolicy | None = None  # --secret-ref-label: None lets a CR name any Secret
    intervals: ComputeIntervals = field(default_factory=ComputeIntervals)
    pass_budget: float | None = DEFAULT_PASS_BUDGET  # --pass-budget (``pipeline.Budget``); None: unlimited
    monotonic: Callable[[], float] = time.monotonic  # the budget's clock
    # Where a walk the budget stopped goes on in the pool's next pass (``services``), by pool.
    resume: WalkResume = field(default_factory=WalkResume)
    # The zones each pool's latest pass holds, for its siblings' Aggregates steps.
    claims: ZoneClaims = field(default_factory=ZoneClaims)
    # The compute API reads and token every pool of a Nova shares within a short window.
    views: NovaViews = field(default_factory=NovaViews)


@dataclass
class ComputePass:
    kube: Kube
    events: EventSink
    settings: ComputeSettings
    cr: Object
    """The CR as read at the start of the pass (owner of children, subject of events)."""
    pool: NovaCompute
    status: Object
    """The status being built; written once at the end of the pass when it changed."""
    pools: PoolLister
    cached: Lookup = no_cache
    listed: Listing = no_listing
    fill: Fill = no_fill
    node_cache: Cache | None = None  # the Node informer's (metadata only), read once it has synced
    now: datetime = field(default_factory=utcnow)
    budget: Budget = UNLIMITED  # when the pass stops beginning work (``pipeline.Budget``)

    # handed forward (per pass)
    nova: Object | None = None
    image: str = ""
    contract_secret: str = ""
    credentials: Credentials | None = None
    nova_url: str = ""
    siblings: list[Object] | None = None
    plan: Plan | None = None
    config_map: str = ""
    contract_hash: str = ""
    digest_key: bytes = field(default=b"", repr=False)  # the Nova's {name}-digest-key
    secret_config_secret: str = ""  # the pool's derived spec.secretConfig Secret, while set
    secret_config_keys: tuple[str, ...] = ()
    secret_config_hash: str = ""
    https_ca_hash: str = ""  # SHA-256 of the pool's own spec.tls bundle (PoolConfig)
    daemonset_rendered: bool = False
    aggregates_ensured: bool = False
    discovery_due: float | None = None  # seconds until the discovery Job's state machine can move on
    _client: ComputeAPI | None = None

    # -- identity --------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return str(self.cr["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.cr["metadata"]["namespace"])

    @property
    def generation(self) -> int:
        return int(self.cr["metadata"].get("generation") or 0)

    @property
    def deleting(self) -> bool:
        return bool(self.cr["metadata"].get("deletionTimestamp"))

    @property
    def nova_name(self) -> str:
        return self.pool.spec.nova_ref.name

    @property
    def nodes(self) -> list[Object]:
        nodes: list[Object] = self.status.setdefault("nodes", [])
        return nodes

    # -- conditions ------------------------------------------------------------------------

    @property
    def conditions(self) -> list[conditions.Condition]:
        conds: list[conditions.Condition] = self.status.setdefault("conditions", [])
        return conds

    def set(self, cond_type: str, ok: bool, reason: str, message: str) -> None:
        conditions.set_condition(
            self.conditions, cond_type, ok, reason, message, generation=self.generation, now=self.now
        )

    def condition(self, cond_type: str) -> Mapping[str, Any] | None:
        return conditions.find(self.conditions, cond_type)

    async def read(self, ref: ResourceRef, name: str) -> Object:
        """The object from the informer cache, or a GET on a miss (raises NotFound when it is gone);
        what the GET read is handed to the cache (``fill``: a withheld Secret is kept whole from then on)."""
        cached = self.cached(ref, self.namespace, name)
        if cached is not None:
            return cached  # a bounded cache holds no Secret over the limit whole
        obj = await self.kube.get(ref, name, self.namespace)
        if ref == SECRETS and (size := secret_data_size(obj)) > SECRET_DATA_LIMIT:
            raise SecretTooLarge(too_large(self.namespace, name, size))
        self.fill(ref, obj)
        return obj

    async def emit(self, type_: EventType, reason: str, message: str) -> None:
        await self.events.emit(self.cr, type_, reason, message)

    # -- the compute API (the Nova's shared view) ---------------------------------------------

    async def compute(self) -> ComputeAPI:
        """The Nova's compute API view (authenticated on its first call, which raises ``ComputeAPIError``)."""
        if self._client is None:
            if self.credentials is None:
                raise RuntimeError("the NovaRef step did not resolve the credentials")
            self._client = self.settings.views.view(
                self.namespace,
                self.nova_name,
                self.credentials,
                self.nova_url,
                request_timeout=self.settings.request_timeout,
            )
        return self._client

    async def fresh(self, *kinds: str) -> ComputeAPI:
        """The view, with its reads of ``kinds`` forgotten: this pass reads them anew (a joining node's
        service and mapping show in a read started now, not in one a sibling made seconds ago)."""
        client = await self.compute()
        if isinstance(client, NovaView):
            client.invalidate(*kinds)
        return client

    def close(self) -> None:
        """Let go of the view (no connection is held: each call opens and closes its own)."""
        self._client = None
