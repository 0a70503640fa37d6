"""``PassContext``: everything one Nova pass hands its steps, and ``PassState``, what steps hand forward.

A context is built fresh for every pass (up to N CRs are reconciled concurrently, so nothing
a step produces may live on the controller). Steps read children from the informer caches
(``cached``), fall back to a GET for kinds nobody watches (``live``), write through
``ensure`` (server-side apply that is skipped when the cached object already carries every
rendered field, so a converged pass sends no write) and ``remove`` (a delete only when the
object is there). Conditions are set with ``ctx.set`` which stamps the pass's generation.

The concurrent group forks the context (``fork``): each member gets its own copy of the
status, and ``adopt_condition`` copies the member's one condition back afterwards.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final

from nova_operator import apply, conditions, intervals, naming, ownership
from nova_operator.digests import sha256_hex
from nova_operator.kube.client import Kube
from nova_operator.kube.errors import NotFound
from nova_operator.kube.owners import controlled_by
from nova_operator.kube.resources import SECRETS, ResourceRef, ref_for
from nova_operator.kube.types import Object
from nova_operator.models.nova import Nova
from nova_operator.openstack.trust import TrustMemory
from nova_operator.pipeline import UNLIMITED, Budget, StepInputError
from nova_operator.reconcilers.metrics import NovaMetrics
from nova_operator.renderers.workload import Digests, WorkloadInputs
from nova_operator.runtime.cache import Cache, copy_object
from nova_operator.runtime.echoes import OwnWrites
from nova_operator.runtime.events import EventSink, EventType
from nova_operator.runtime.request import Request
from nova_operator.secret_refs import (
    SECRET_DATA_LIMIT,
    SECRET_TOO_LARGE,
    SecretRefPolicy,
    secret_data_size,
    too_large,
)
from nova_operator.settings import DEFAULT_PASS_BUDGET, OpenStackSettings


class ProbeError(Exception):
    """A transport failure of the API probe; ``reason`` is the NovaAPIReady False reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


Prober = Callable[[str, float], Awaitable[int]]
"""GET ``url`` within a deadline, following no redirect; returns the status code or raises ``ProbeError``."""


@dataclass
class HealthCache:
    """Successful API probes by (CR UID, URL) -> monotonic time; shared across passes on purpose."""

    successes: dict[tuple[str, str], float] = field(default_factory=dict)

    def evict(self, uid: str) -> None:
        for key in [k for k in self.successes if k[0] == uid]:
            del self.successes[key]


@dataclass(frozen=True, slots=True)
class Sweep:
    """The last look of the ServiceRecords step at one Nova's service records."""

    fingerprint: tuple[str, ...]  # resourceVersions of the role Deployments when it looked
    clean: bool  # nothing stale or waiting was left
    due: float = 0.0  # monotonic time of the next look when not clean
    failures: int = 0  # consecutive failed looks (the backoff)
    at: float = 0.0  # monotonic time of this look


@dataclass
class SweepMemory:
    """ServiceRecords looks by CR UID; shared across passes on purpose (like ``HealthCache``)."""

    looks: dict[str, Sweep] = field(default_factory=dict)

    def evict(self, uid: str) -> None:
        self.looks.pop(uid, None)


@dataclass(frozen=True)
class NovaOptions:
    """Process-wide inputs of the Nova controller (not per pass)."""

    operator_namespace: str = "nova-system"
    gateway_api: bool = True  # HTTPRoute served by the cluster (see nova.probe_options)
    # Where the compute API of a Nova answers: its in-cluster Service unless the operator runs
    # outside the cluster (--nova-api-url); (name, namespace) -> base URL without a trailing slash.
    nova_api_url: Callable[[str, str], str] = OpenStackSettings().nova_api_url_for
    mariadb_api: bool = True  # MariaDB served: watch it; else the Database step polls (GET, 30 s)
    rabbitmq_api: bool = True  # RabbitmqCluster served: watched in a cluster-wide install, else GET per pass
    # --namespace install: RabbitmqClusters listed fine in every watched namespace at start-up
    # (``nova.probe_namespaces``), so they are watched there too instead of read by GET on each pass
    rabbitmq_in_namespaces: bool = False
    namespaced: bool = False  # a namespace-scoped install (--namespace): no cluster-scoped reads
    # External Secrets' stores served: watch them, so a store turning Ready wakes the Nova at once
    # (else the Secrets step reads the named store on every pass and polls every 15 s)
    secret_stores: bool = False
    cluster_secret_stores: bool = False
    prober: Prober | None = None  # None: a bounded GET (health_check.http_probe, openstack.http)
    secret_refs: SecretRefPolicy | None = None  # --secret-ref-label: None lets a CR name any Secret
    health: HealthCache = field(default_factory=HealthCache)
    trust: TrustMemory = field(default_factory=TrustMemory)  # Keystone certificate verdicts (Secrets step)
    monotonic: Callable[[], float] | None = None
    # The ServiceRecords step deletes the service records of pods that are gone (its memory of the
    # last look per Nova in ``sweeps``); tests of other things, which run no compute API, turn it off.
    stale_services: bool = True
    sweeps: SweepMemory = field(default_factory=SweepMemory)
    carried: apply.Carried = field(default_factory=apply.Carried)  # ``carries`` answers, per version
    taken: ownership.Taken = field(default_factory=ownership.Taken)  # names a create was refused for
    # seconds a progress-only status write is held for the next pass to supersede (0: never held)
    status_hold: float = intervals.STATUS_HOLD
    pass_budget: float | None = DEFAULT_PASS_BUDGET  # --pass-budget (``pipeline.Budget``); None: unlimited


@dataclass
class PassState:
    """Values handed forward within one pass (reconciler.md §2). Empty means unknown: never written.

    Credential fields are left out of ``repr`` so a traceback that shows locals never prints them.
    """

    service_user_password: str = field(default="", repr=False)
    metadata_secret: str = field(default="", repr=False)
    broker_ca: str = field(default="", repr=False)
    https_ca: str = ""  # the spec.tls CA bundle (PEM, public); empty while unset
    broker_client_cert: str = field(default="", repr=False)  # spec.messaging.tls.clientCertSecretRef
    broker_client_key: str = field(default="", repr=False)
    digest_key: bytes = field(default=b"", repr=False)  # HMAC key of the credential digests
    authtoken_digest: str = ""
    metadata_digest: str = ""
    api_db_digest: str = ""
    cell_db_digest: str = ""
    transport_url: str = field(default="", repr=False)
    transport_digest: str = ""
    broker_port: int | None = None
    config_map: str = ""
    policy_map: str = ""  # the {name}-policy-<hash> ConfigMap of spec.policy ("": unset)
    # the Config step's refusals of spec.policy at spec.openStackRelease: an upgrade does not start
    policy_held: tuple[str, ...] = ()
    secret_config_keys: tuple[str, ...] = ()  # section.option keys of {name}-secret-config
    secret_config_digest: str = ""

    def workload_inputs(self, *, checked_copies: bool) -> WorkloadInputs:
        digests = Digests(
            api_db_connection=self.api_db_digest,
            db_connection=self.cell_db_digest,
            authtoken=self.authtoken_digest,
            transport_url=self.transport_digest,
            metadata_secret=self.metadata_digest,
            secret_config=self.secret_config_digest,
            https_ca=sha256_hex(self.https_ca) if self.https_ca else "",
        )
        return WorkloadInputs(
            config_map=self.config_map,
            digests=digests,
            broker_port=self.broker_port or 5672,
            secret_config_keys=self.secret_config_keys,
            checked_copies=checked_copies,
            policy_map=self.policy_map,
        )


class SecretNotText(StepInputError):
    """A referenced Secret's key holds bytes that are not UTF-8 text (names the key, not the value)."""

    reason = "SecretNotText"


class SecretTooLarge(StepInputError):
    """A Secret the pass reads holds more data than ``secret_refs.SECRET_DATA_LIMIT`` (names the
    Secret, its size and the limit; never its content). Looked at again after 60 s, or when it changes."""

    reason = SECRET_TOO_LARGE
    requeue_after = intervals.CHILD_OWNED_POLL


def refuse_if_too_large(namespace: str, name: str, size: int | None) -> None:
    if size is not None and size > SECRET_DATA_LIMIT:
        raise SecretTooLarge(too_large(namespace, name, size))


def secret_value(secret: Mapping[str, Any] | None, key: str) -> str | None:
    """The decoded value of ``key`` (None when the Secret or the key is missing).

    Raises ``SecretNotText`` (reported on the step's condition by the pipeline) when the
    value is not UTF-8: the message names the Secret and the key, never the bytes.
    """
    if secret is None:
        return None
    data = secret.get("data") or {}
    if key in data:
        try:
            return base64.b64decode(data[key]).decode("utf-8")
        except (UnicodeDecodeError, ValueError):
            meta = secret.get("metadata") or {}
            where = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
            raise SecretNotText(f"key {key} of Secret {where} is not valid UTF-8 text") from None
    string_data = secret.get("stringData") or {}
    value = string_data.get(key)
    return None if value is None else str(value)


@dataclass
class PassContext:
    kube: Kube
    obj: Object  # the CR as read this pass; its metadata follows our own annotation patches
    nova: Nova
    status: Object  # the working status, written once at the end of the pass
    now: Callable[[], datetime]
    events: EventSink
    caches: Mapping[ResourceRef, Cache]
    metrics: NovaMetrics
    options: NovaOptions = field(default_factory=NovaOptions)
    state: PassState = field(default_factory=PassState)
    initial: Mapping[str, Any] = field(default_factory=dict)  # the status as the pass found it
    forked: Mapping[str, Any] | None = None  # a fork: the status it started from (``adopt_step``)
    writes: OwnWrites | None = None  # the controller's record of its own writes (``runtime.echoes``)
    budget: Budget = UNLIMITED  # when the pass stops beginning work (``pipeline.Budget``)
    # the caches of the user's objects a spec names, of a kind whose ``caches`` entry holds the
    # children only (the ConfigMaps of spec.policy, ``policy_reads``): read through ``named``
    referenced: Mapping[ResourceRef, Cache] = field(default_factory=dict)

    # -- identity ------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.obj["metadata"].get("namespace") or "default")

    @property
    def uid(self) -> str:
        return str(self.obj["metadata"].get("uid", ""))

    @property
    def generation(self) -> int:
        return int(self.obj["metadata"].get("generation", 0))

    @property
    def checked_copies(self) -> bool:
        """With ``--secret-ref-label`` the pods mount the Nova's label-checked copies of the Secrets
        the spec names for them, never those Secrets (``checked_copies``)."""
        return self.options.secret_refs is not None

    def workload_inputs(self) -> WorkloadInputs:
        return self.state.workload_inputs(checked_copies=self.checked_copies)

    # -- conditions ----------------------------------------------------------------------------

    @property
    def conditions(self) -> list[conditions.Condition]:
        conds: list[conditions.Condition] = self.status.setdefault("conditions", [])
        return conds

    def set(self, cond_type: str, status: bool, reason: str, message: str) -> None:
        conditions.set_condition(
            self.conditions, cond_type, status, reason, message, generation=self.generation, now=self.now()
        )

    def restamp(self, cond_type: str) -> None:
        """Keep the condition as it is but stamp this pass's generation: a step that reuses its last
        result (instead of asking again) re-asserts it, as if it had set it anew."""
        for cond in self.conditions:
            if cond.get("type") == cond_type:
                cond["observedGeneration"] = self.generation

    def refused(self, condition: str, reason: str, message: str) -> None:
        """The API server refused a child of the step owning ``condition`` (see ``pipeline``)."""
        self.set(condition, False, reason, message)

    def condition(self, cond_type: str) -> Mapping[str, Any] | None:
        return conditions.find(self.conditions, cond_type)

    def initial_condition(self, cond_type: str) -> Mapping[str, Any] | None:
        """The condition as the pass found it (before any step of this pass set it)."""
        return conditions.find(self.initial.get("conditions") or [], cond_type)

    async def emit(self, type_: EventType, reason: str, message: str) -> None:
        await self.events.emit(self.obj, type_, reason, message)

    # -- reads ---------------------------------------------------------------------------------

    def cached(self, ref: ResourceRef, name: str, namespace: str | None = None) -> Object | None:
        cache = self.caches.get(ref)
        if cache is None:
            raise KeyError(f"no informer for {ref}")
        return cache.get(name, namespace if namespace is not None else self.namespace)

    async def named(self, ref: ResourceRef, name: str) -> Object | None:
        """A user's object the spec names (not a child): from ``referenced`` as ``live`` reads (no
        request once the cache holds it), else one GET."""
        if ref not in self.referenced:
            return await self._read(ref, name)
        return await self.live(ref, name, cache=self.referenced[ref])

    async def live(
        self, ref: ResourceRef, name: str, namespace: str | None = None, *, cache: Cache | None = None
    ) -> Object | None:
        """From the informer cache when it answers for the object, else one GET (None when absent).

        The cache does not answer for a namespace it has not listed yet, nor for an object it holds
        withheld (a Secret no Nova read when it arrived, ``secret_reads``): that one is read here
        and handed to the cache (``Cache.fill``), so the next pass reads it from there.
        """
        ns = namespace if namespace is not None else self.namespace
        cache = cache if cache is not None else self.caches.get(ref)
        if ref == SECRETS and cache is not None:  # refused for its size when it arrived: not read
            refuse_if_too_large(ns, name, cache.oversize(name, ns))
        if cache is not None and cache.answers(name, ns):
            return cache.get(name, ns)  # a bounded cache holds no Secret over the limit whole
        try:
            obj = await self.kube.get(ref, name, ns)
        except NotFound:
            return None
        if ref == SECRETS:
            refuse_if_too_large(ns, name, secret_data_size(obj))
        if cache is not None:
            cache.fill(obj)
        return obj

    async def peek(self, ref: ResourceRef, name: str) -> Object | Unread | None:
        """The object of ``name`` as far as the pass knows it without a read of its own: ``UNREAD``
        when the covering cache does not hold it (not this CR's child as the cache last saw it, and
        most likely absent, but someone else's object may carry the name: ``ensure_over`` writes
        create-first and reads only when refused), else what ``live`` found."""
        found = await self.live(ref, name)
        cache = self.caches.get(ref)
        if found is None and cache is not None and cache.covers(self.namespace):
            return UNREAD
        return found  # found, or ``live`` already asked the API server

    async def current(self, ref: ResourceRef, name: str) -> Object | None:
        """The object of ``name`` whoever holds it: the cache, or one GET when the cache has none.

        The children's caches keep only objects labelled managed-by nova-operator, so an object
        someone else made under a child's name is not in them; the GET happens only for a child
        the cache does not hold (its first write, or a cache lagging behind it), never in a
        converged pass.
        """
        found = await self.peek(ref, name)
        return await self._read(ref, name) if isinstance(found, Unread) else found

    async def _read(self, ref: ResourceRef, name: str) -> Object | None:
        try:
            return await self.kube.get(ref, name, self.namespace)
        except NotFound:
            return None

    @property
    def marks(self) -> dict[str, str]:
        """The labels every child of this Nova carries: an orphan carrying them all is the Nova's."""
        return naming.common_labels(self.name)

    def owned(self, ref: ResourceRef, labels: Mapping[str, str] | None = None) -> list[Object]:
        """Cached objects of ``ref`` in the CR's namespace controlled by this CR."""
        cache = self.caches[ref]
        return [o for o in cache.list(self.namespace, labels) if controlled_by(o, self.uid)]

    # -- writes --------------------------------------------------------------------------------

    async def ensure(
        self,
        desired: Mapping[str, Any],
        *,
        ref: ResourceRef | None = None,
        retain: Sequence[Sequence[str]] = (),
        digest_key: bytes | None = None,
    ) -> Object:
        """Apply ``desired`` owned by the CR; no request when the current object already carries it.

        Only a write whose basis is known is recorded as this pass's own (``apply``'s ``own``): a
        re-sent apply the server found nothing to do for answers with another writer's version,
        whose echo must wake this CR. An object of that name that is not this CR's
        (``ownership.holder``) is neither changed nor adopted: ``ChildOwnedByAnother`` is raised (the
        pipeline reports it on the step's condition). A Secret's applied digest is keyed with the
        Nova's digest key (``state.digest_key``, which the Secrets step reads first; ``digest_key``
        for the key's own Secret).
        """
        ref = ref or ref_for(desired["apiVersion"], desired["kind"])
        current = await self.peek(ref, desired["metadata"]["name"])
        return await self.ensure_over(current, desired, ref=ref, retain=retain, digest_key=digest_key)

    async def ensure_over(
        self,
        current: Object | Unread | None,
        desired: Mapping[str, Any],
        *,
        ref: ResourceRef,
        retain: Sequence[Sequence[str]] = (),
        digest_key: bytes | None = None,
    ) -> Object:
        """``ensure`` on ``current``: the object of that name as this pass has just read it with
        ``current()`` or ``peek()`` (a caller that read it to decide what to write need not read it
        twice). ``UNREAD`` is written create-first (``apply.create``: one request for an absent
        child); an object found under the name is then read and judged as any other."""
        if desired["kind"] == "Secret" and digest_key is None:
            digest_key = self.state.digest_key or None
        name = (str(ref), self.namespace, str(desired["metadata"]["name"]))
        if isinstance(current, Unread):
            if name not in self.options.taken:
                made = await apply.create(
                    self.kube, desired, owner=self.obj, ref=ref, own=self.wrote, digest_key=digest_key
                )
                if made is not None:
                    return made
                self.options.taken.add(*name)  # held by an object the cache does not show: read it
            current = await self._read(ref, name[2])
        ownership.refuse_unless_ours(current, self.obj, self.marks, kind=str(desired["kind"]))
        self.options.taken.drop(*name)  # this CR's, or free
        return await apply.apply(
            self.kube,
            desired,
            owner=self.obj,
            cached=current,
            ref=ref,
            retain=retain,
            own=self.wrote,
            digest_key=digest_key,
            carried=self.options.carried,
        )

    def wrote(self, obj: Mapping[str, Any]) -> None:
        """``obj`` as this pass's write returned it: its watch echo will not wake this CR again."""
        if self.writes is not None:
            self.writes.wrote(obj, Request(self.namespace, self.name))

    async def remove(self, ref: ResourceRef, name: str, *, only_owned: bool = True) -> bool:
        """Delete ``name`` when it exists (and, by default, only when this CR controls it)."""
        current = await self.live(ref, name)
        if current is None or (only_owned and not controlled_by(current, self.uid)):
            return False
        return await apply.delete_if_present(self.kube, ref, name, self.namespace)

    # -- the concurrent group ------------------------------------------------------------------

    def fork(self) -> PassContext:
        return replace(
            self,
            # Of the CR a member may change only its metadata (the resourceVersion and annotations a
            # claim patch returns, assigned, never changed in place): a copy of that; the rest (spec,
            # the status as read) is shared read-only. Deep copies of the CR were 11 % of a pass's CPU.
            obj={**self.obj, "metadata": dict(self.obj.get("metadata") or {})},
            status=copy_object(self.status),
            state=replace(self.state),
            forked=copy_object(self.status),
        )

    def adopt_step(self, member: PassContext, condition_type: str) -> None:
        """A batched step's fork, committed: its condition and every other status field it changed."""
        self.adopt_condition(member, condition_type)
        before = member.forked if member.forked is not None else {}
        for key in {*before, *member.status} - {"conditions"}:
            if key not in member.status:
                self.status.pop(key, None)
            elif before.get(key) != member.status[key]:
                self.status[key] = copy_object(member.status[key])

    def adopt_condition(self, member: PassContext, condition_type: str) -> None:
        found = conditions.find(member.conditions, condition_type)
        if found is None:
            return
        conds = self.conditions
        index = next((i for i, c in enumerate(conds) if c.get("type") == condition_type), None)
        if index is None:
            conds.append(dict(found))
        else:
            conds[index] = dict(found)  # keep the position: a reordered list would be a status change
        # annotations a member patched onto the CR travel back with its resourceVersion (§3.2)
        meta, theirs = self.obj["metadata"], member.obj["metadata"]
        if theirs.get("resourceVersion") != meta.get("resourceVersion"):
            meta["annotations"] = dict(theirs.get("annotations") or {})
            meta["resourceVersion"] = theirs.get("resourceVersion")


class Unread:
    """``PassContext.peek``'s answer for a name its covering cache does not hold (``UNREAD``)."""

    def __repr__(self) -> str:
        return "UNREAD"


UNREAD: Final = Unread()
