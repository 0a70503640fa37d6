"""The NovaCompute controller: its informers, watches and reconciler (novacompute-crd.md §20).

Watches: the NovaCompute itself (status-only updates ignored); its DaemonSet and ConfigMaps
(by owner); Nova updates that matter to a pool (generation, installedRelease,
computeConfigSecretRef, and the status of its Ready condition) mapped to the Nova's pools
through the ``spec.novaRef.name`` index; other pools of the same Nova when one is created or
deleted, changes generation, starts deleting, or changes which nodes it holds (only the siblings
that change concerns: ``concerned_siblings``); the ``<nova>-compute-config``
contract Secrets; Node label changes, mapped to the pools that select or hold the node; and the
Nova's discover-hosts Job turning Complete or Failed, mapped to the Nova's pools with a Pending node;
a pool's pod turning Ready on a node it holds Pending or Active with its service seen down, or gone
from one it holds Releasing (``pool_pods``).

Nodes (issue 41): an optional, cluster-wide Node informer keeping metadata only. While it has not
synced (before its first list, or always where the install's RBAC does not let it list and watch
Nodes) the Nodes step reads the API server as before and a relabel is noticed by the poll (60 s at
most); once synced, a converged pass reads no Node from the API server and a relabel wakes the pools
it concerns at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from nova_operator import naming
from nova_operator.decisions import readiness
from nova_operator.kube.resources import (
    CONFIGMAPS,
    DAEMONSETS,
    DEPLOYMENTS,
    EVENTS,
    JOBS,
    NODES,
    NOVACOMPUTES,
    NOVAS,
    PODS,
    SECRETS,
    ResourceRef,
)
from nova_operator.kube.types import Object
from nova_operator.reconcilers import stuck_pods
from nova_operator.reconcilers.compute import pool_pods
from nova_operator.reconcilers.compute.context import (
    COMPONENT,
    NOVA_REF_INDEX,
    ComputeSettings,
    PoolLister,
)
from nova_operator.reconcilers.compute.reconciler import NovaComputeReconciler
from nova_operator.reconcilers.compute.steps import STEP_CONDITIONS
from nova_operator.reconcilers.metrics import NovaMetrics, StepMetrics
from nova_operator.renderers import compute_pool
from nova_operator.runtime.cache import Bound, Cache
from nova_operator.runtime.controller import Controller
from nova_operator.runtime.events import EventRecorder
from nova_operator.runtime.manager import ControllerFactory, Manager
from nova_operator.runtime.predicates import Predicate, ignore_status_only
from nova_operator.runtime.request import Request
from nova_operator.runtime.transform import ALL, Fields
from nova_operator.secret_refs import NAMESPACE_SECRET_DATA_LIMIT, SECRET_DATA_LIMIT, secret_data_size

NAME = "novacompute"
SECRET_BOUND: Final = Bound(secret_data_size, SECRET_DATA_LIMIT, NAMESPACE_SECRET_DATA_LIMIT)
"""What the shared Secrets cache holds with data (``secret_refs``; both controllers set the same)."""
MANAGED_BY_SELECTOR = "app.kubernetes.io/managed-by=novacompute-operator"
CONTRACT_SELECTOR = "app.kubernetes.io/component=compute-config"
CONTRACT_SUFFIX = "-compute-config"
COMPUTE_READS_INDEX = "nova.compute-reads.secrets"
"""Novas by ``<namespace>/<name>`` of the Secrets their pools read (``_compute_reads``)."""

RBAC_NEEDS: Final[dict[str, tuple[str, ...]]] = {
    str(NOVACOMPUTES): ("get", "list", "watch", "patch"),  # read, informer, finalizer
    f"{NOVACOMPUTES}/status": ("patch",),
    # blockOwnerDeletion on the children's owner references needs this where the
    # OwnerReferencesPermissionEnforcement admission plugin is on.
    f"{NOVACOMPUTES}/finalizers": ("update",),
    str(NOVAS): ("get", "list", "watch"),
    str(NODES): ("get", "list", "watch"),  # the optional informer; uncached reads until it synced
    # listed uncached by the Services step; watched (label-selected, waiting reasons only) so the
    # DaemonSet and discovery steps name a pod that cannot start (``stuck_pods``)
    str(PODS): ("list", "watch"),
    str(DAEMONSETS): ("get", "list", "watch", "create", "patch", "delete"),
    str(CONFIGMAPS): ("get", "list", "watch", "create", "delete"),
    # the contract and spec.secretConfig read; mirrors reaped; {cr}-nova-compute-secret-config and
    # the --secret-ref-label copy {cr}-nova-compute-checked-https-ca applied
    str(SECRETS): ("get", "list", "watch", "create", "patch", "delete"),
    str(JOBS): ("get", "list", "watch", "create", "delete"),  # the host-discovery Job (and its watch)
    str(DEPLOYMENTS): ("get",),
    str(EVENTS): ("create", "patch"),
}
"""The verbs the NovaCompute controller sends, per resource (config/rbac must grant them, and no more)."""


def nova_ref(obj: Mapping[str, Any]) -> str:
    return str(((obj.get("spec") or {}).get("novaRef") or {}).get("name") or "")


SECRET_CONFIG_INDEX: Final = "spec.secretConfig.secretRef.name"
POOL_SECRETS_INDEX: Final = "nova.compute.pool-secrets"
"""Pools by ``<namespace>/<name>`` of the Secrets they read themselves: ``spec.secretConfig``,
``spec.tls`` and the derived ``{pool}-nova-compute-secret-config`` and ``-checked-https-ca``
(``_pool_secrets``)."""


def _by_secret_config(obj: Object) -> list[str]:
    ref = ((obj.get("spec") or {}).get("secretConfig") or {}).get("secretRef") or {}
    return [_index_key(obj["metadata"].get("namespace") or "", str(ref["name"]))] if ref.get("name") else []


def _pool_secrets(obj: Object) -> list[str]:
    """The ``POOL_SECRETS_INDEX`` values of a pool: its ``spec.secretConfig`` Secret and the derived one,
    its ``spec.tls`` bundle and its copy (``--secret-ref-label``)."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or ""
    spec = obj.get("spec") or {}
    ref = (spec.get("secretConfig") or {}).get("secretRef") or {}
    tls = (spec.get("tls") or {}).get("caBundleSecretRef") or {}
    pool = str(meta.get("name") or "")
    names = {compute_pool.secret_config_name(pool), compute_pool.checked_ca_name(pool)}
    for named in (ref, tls):
        if isinstance(named, Mapping) and named.get("name"):
            names.add(str(named["name"]))
    return sorted(_index_key(namespace, name) for name in names)


def _index_key(namespace: str, nova: str) -> str:
    return f"{namespace}/{nova}"


def _by_nova_ref(obj: Object) -> list[str]:
    nova = nova_ref(obj)
    return [_index_key(obj["metadata"].get("namespace") or "", nova)] if nova else []


def _compute_reads(nova: Object) -> list[str]:
    """The ``COMPUTE_READS_INDEX`` values of a Nova: the Secrets a pool of it reads (``novaref``:
    the service user; ``pool_config``: the contract ``status.computeConfigSecretRef`` names)."""
    namespace = nova["metadata"].get("namespace") or ""
    user = ((nova.get("spec") or {}).get("serviceUser") or {}).get("secretRef") or {}
    contract = (nova.get("status") or {}).get("computeConfigSecretRef") or {}
    names = {str(ref["name"]) for ref in (user, contract) if isinstance(ref, Mapping) and ref.get("name")}
    return sorted(f"{namespace}/{name}" for name in names)


def pool_reads(pools: Cache, novas: Cache) -> Callable[[Object], bool]:
    """Whether a pool reads a Secret: the Secrets cache keeps the data of these (and of what the
    Nova controller reads), the others as references (``reconcilers.secret_reads``).

    Asked of every Secret the informer receives, so it looks up indexes only (``Cache.indexed``):
    the work per Secret does not grow with the pools of the namespace (issue 36: decoding every
    pool for every Secret took 17 to 23 CPU-s for one list of 3,000 Secrets beside 300 pools).
    The one loop is over the Novas whose pools read the Secret by name (the service user, the
    contract), usually one.
    """

    def admits(secret: Object) -> bool:
        meta = secret.get("metadata") or {}
        namespace, name = meta.get("namespace") or "", meta.get("name") or ""
        if name.endswith(CONTRACT_SUFFIX) and pools.indexed(
            NOVA_REF_INDEX, _index_key(namespace, name[: -len(CONTRACT_SUFFIX)])
        ):
            return True
        if pools.indexed(POOL_SECRETS_INDEX, _index_key(namespace, name)):  # spec.secretConfig, derived
            return True
        return any(
            pools.indexed(NOVA_REF_INDEX, _index_key(namespace, nova.name))
            for nova in novas.keys_by_index(COMPUTE_READS_INDEX, f"{namespace}/{name}")
        )

    return admits


def pool_lister(cache: Cache) -> Callable[[str, str], list[Object]]:
    return lambda namespace, nova: cache.by_index(NOVA_REF_INDEX, _index_key(namespace, nova))


def _held(obj: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """What a pool holds, as its siblings see it: (name, phase, zone) of every entry."""
    nodes = (obj.get("status") or {}).get("nodes") or []
    return sorted((n.get("name", ""), n.get("phase", ""), n.get("zone", "")) for n in nodes)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


sibling_changed = Predicate(
    update=lambda old, new: (
        _meta(old).get("generation") != _meta(new).get("generation")
        or ("deletionTimestamp" in _meta(new)) != ("deletionTimestamp" in _meta(old))
        or _held(old) != _held(new)
    )
)

NodeLabels = Callable[[str], Mapping[str, str] | None]
"""A node's labels from the Node informer's synced cache; None: not known."""


def _selects(pool: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    selector = (pool.get("spec") or {}).get("nodeSelector") or {}
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def concerned_siblings(
    old: Object, new: Object, siblings: Iterable[Object], node_labels: NodeLabels
) -> list[Object]:
    """The siblings a pool's update concerns (issue 41, item 3: not every sibling on every ledger change).

    All of them when its generation changed, it started deleting, or the set of zones it holds
    changed (their Aggregates steps keep or delete the zone aggregates by it). Otherwise, when the
    entries it holds changed (name, phase or zone), only the siblings that hold one of the changed
    nodes (a rival's entry, ``Conflict`` included: a handover waits on this pool) or, as far as the
    Node cache knows, select one. None for any other change.
    """
    if not sibling_changed.update(old, new):
        return []
    siblings = list(siblings)
    if (
        _meta(old).get("generation") != _meta(new).get("generation")
        or ("deletionTimestamp" in _meta(new)) != ("deletionTimestamp" in _meta(old))
        or {z for _, _, z in _held(old) if z} != {z for _, _, z in _held(new) if z}
    ):
        return siblings
    changed = {name for name, _, _ in set(_held(old)) ^ set(_held(new))}
    labels = [found for name in changed if (found := node_labels(name)) is not None]
    return [
        s
        for s in siblings
        if any(n in changed for n, _, _ in _held(s)) or any(_selects(s, lab) for lab in labels)
    ]


class SiblingWakes:
    """Enqueue a pool's siblings: all when one is created or deleted, the concerned ones on an update."""

    def __init__(
        self, enqueue: Callable[[Request], None], lister: PoolLister, node_labels: NodeLabels
    ) -> None:
        self._enqueue, self._lister, self._labels = enqueue, lister, node_labels

    def _siblings(self, obj: Object) -> list[Object]:
        meta = _meta(obj)
        return [
            s
            for s in self._lister(meta.get("namespace") or "", nova_ref(obj))
            if _meta(s).get("name") != meta.get("name")
        ]

    def _wake(self, pools: Iterable[Object]) -> None:
        for pool in pools:
            self._enqueue(Request(_meta(pool).get("namespace") or "", _meta(pool).get("name") or ""))

    def on_add(self, obj: Object) -> None:
        self._wake(self._siblings(obj))

    def on_update(self, old: Object, new: Object) -> None:
        if nova_ref(old) == nova_ref(new) and not sibling_changed.update(old, new):
            return  # most updates (status counters, conditions): no sibling is read
        found = {_meta(s).get("name"): s for s in self._siblings(new)}
        if nova_ref(old) != nova_ref(new):
            found.update({_meta(s).get("name"): s for s in self._siblings(old)})
            self._wake(found.values())
            return
        self._wake(concerned_siblings(old, new, found.values(), self._labels))

    def on_delete(self, obj: Object) -> None:
        self._wake(self._siblings(obj))


def _nova_fields(obj: Mapping[str, Any]) -> tuple[Any, ...]:
    status = obj.get("status") or {}
    ready = next((c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    return (
        _meta(obj).get("generation"),
        status.get("installedRelease"),
        status.get("computeConfigSecretRef"),
        # An addition to the spec's three: the Nova turning Ready (or not) wakes its pools, whose
        # Aggregates and Services steps wait on the compute API it serves (their ComputeAPIError
        # poll is 30 s, which a new pool would otherwise wait out after the Nova came up).
        ready,
    )


nova_changed = Predicate(update=lambda old, new: _nova_fields(old) != _nova_fields(new))

JOB_FIELDS: Final[Fields] = {"status": {"conditions": ALL}}
"""What the Job watch reads (the Nova controller, sharing the informer, declares its own)."""

node_relabelled = Predicate(update=lambda old, new: _meta(old).get("labels") != _meta(new).get("labels"))

NODE_FIELDS: Final[Fields] = {"metadata": {"name": ALL, "labels": ALL, "deletionTimestamp": ALL}}
"""What the Node informer keeps (the transform keeps ``metadata`` whole anyway: ``IDENTITY``)."""


def discovery_finished(old: Object, new: Object) -> bool:
    """The discover-hosts Job turned Complete or Failed (a Job's other changes wake nobody)."""
    labels = _meta(new).get("labels") or {}
    if labels.get(naming.COMPONENT_LABEL) != compute_pool.DISCOVER_HOSTS:
        return False
    finished = (readiness.JobState.COMPLETE, readiness.JobState.FAILED)
    return readiness.job_state(new) in finished and readiness.job_state(old) not in finished


discovery_changed = Predicate(create=lambda _: False, update=discovery_finished, delete=lambda _: False)


def waiting_pools(lister: PoolLister) -> Callable[[Object], Iterable[Request]]:
    """The pools of a discover-hosts Job's Nova that hold a Pending node (the ones the Job maps)."""

    def mapper(job: Object) -> Iterable[Request]:
        meta = _meta(job)
        namespace, nova = meta.get("namespace") or "", (meta.get("labels") or {}).get(naming.INSTANCE_LABEL)
        if not nova:
            return []
        return [
            Request(namespace, _meta(pool).get("name") or "")
            for pool in lister(namespace, nova)
            if any(e.get("phase") == "Pending" for e in (pool.get("status") or {}).get("nodes") or [])
        ]

    return mapper


def pod_pools(pools: Cache, lister: PoolLister) -> Callable[[Object], Iterable[Request]]:
    """A pod that starts or stops being stuck: its pool (a DaemonSet pod), or the pools waiting on the
    Nova's discover-hosts Job (one of that Job's pods)."""
    own = stuck_pods.by_instance(pools, compute_pool.labels("")[naming.MANAGED_BY_LABEL])
    discovery = waiting_pools(lister)

    def mapper(pod: Object) -> Iterable[Request]:
        if (_meta(pod).get("labels") or {}).get(naming.COMPONENT_LABEL) == compute_pool.DISCOVER_HOSTS:
            return discovery(pod)
        return own(pod)

    return mapper


def pools_of_node(pools: Cache) -> Callable[[Object], Iterable[Request]]:
    """The pools a Node's event concerns: those whose nodeSelector its labels match, or that hold it."""

    def mapper(node: Object) -> Iterable[Request]:
        meta = _meta(node)
        name, labels = meta.get("name") or "", meta.get("labels") or {}
        found = []
        for pool in pools.list():
            selector = (pool.get("spec") or {}).get("nodeSelector") or {}
            held = any(e.get("name") == name for e in (pool.get("status") or {}).get("nodes") or [])
            if held or (selector and all(labels.get(k) == v for k, v in selector.items())):
                found.append(Request(pool["metadata"].get("namespace") or "", pool["metadata"]["name"]))
        return found

    return mapper


def controller_factory(manager: Manager) -> Controller:
    """The NovaCompute controller with production settings (register in ``nova_operator.controllers``)."""
    return make_controller(manager, ComputeSettings())


def factory_with(settings: ComputeSettings) -> ControllerFactory:
    """A factory with non-default settings (tests: a fake Nova API URL, short timeouts)."""
    return lambda manager: make_controller(manager, settings)


def make_controller(manager: Manager, settings: ComputeSettings) -> Controller:
    pools = manager.informer(NOVACOMPUTES)
    pools.cache.add_index(NOVA_REF_INDEX, _by_nova_ref)
    pools.cache.add_index(SECRET_CONFIG_INDEX, _by_secret_config)
    pools.cache.add_index(POOL_SECRETS_INDEX, _pool_secrets)
    daemonsets = manager.informer(DAEMONSETS, label_selector=MANAGED_BY_SELECTOR)
    nodes = manager.informer(NODES, keep=NODE_FIELDS, optional=True)
    jobs = manager.informer(
        JOBS, label_selector=f"{naming.MANAGED_BY_LABEL}={naming.MANAGED_BY}", keep=JOB_FIELDS
    )
    config_maps = manager.informer(CONFIGMAPS, label_selector=MANAGED_BY_SELECTOR)
    # the operator's own pods (shared with the Nova controller), their waiting reasons only
    pods = manager.informer(PODS, label_selector=stuck_pods.SELECTOR, keep=stuck_pods.KEPT)
    # and of the pools' pods their node and Ready: a join's and a release's hints (``pool_pods``)
    pods.keep(pool_pods.KEPT, when=pool_pods.is_pool_pod)
    novas = manager.informer(NOVAS)
    if COMPUTE_READS_INDEX not in novas.cache._index_funcs:
        novas.cache.add_index(COMPUTE_READS_INDEX, _compute_reads)
    # Secrets only in the namespaces that hold a Nova or a NovaCompute (shared with the Nova
    # controller), the data of those a pool reads only; a namespace not listed yet, or a Secret
    # held without its data, is read with a GET (and handed to the cache: ``fill``).
    contracts = manager.scoped_informer(SECRETS, keep=ALL, when=pool_reads(pools.cache, novas.cache))
    contracts.bound(SECRET_BOUND)  # no Secret over 256 KiB, 4 MiB per namespace (``secret_refs``)
    contracts.follow(pools)
    caches: dict[ResourceRef, Cache] = {
        DAEMONSETS: daemonsets.cache,
        CONFIGMAPS: config_maps.cache,
        NOVAS: novas.cache,
        SECRETS: contracts.cache,
        PODS: pods.cache,
    }

    def cached(ref: ResourceRef, namespace: str, name: str) -> Object | None:
        cache = caches.get(ref)
        return cache.get(name, namespace) if cache is not None and cache.answers(name, namespace) else None

    def fill(ref: ResourceRef, obj: Object) -> None:
        cache = caches.get(ref)
        if cache is not None:
            cache.fill(obj)

    def listed(ref: ResourceRef, namespace: str, labels: Mapping[str, str]) -> list[Object] | None:
        cache = caches.get(ref)
        return cache.list(namespace, labels) if cache is not None and cache.covers(namespace) else None

    lister = pool_lister(pools.cache)
    reconciler = NovaComputeReconciler(
        manager.kube,
        EventRecorder(manager.kube, COMPONENT),
        pools=lister,
        observer=StepMetrics(NovaMetrics.of(manager.metrics), STEP_CONDITIONS.items()),
        cached=cached,
        listed=listed,
        fill=fill,
        settings=settings,
        own=pools.cache,
        nodes=nodes.cache,
    )
    pools.add_handler(reconciler.reads)  # learns when the cache shows our own writes
    ctl = manager.controller(NAME, reconciler)

    def pools_of(namespace: str, nova: str, *, skip: str = "") -> Iterable[Request]:
        return [
            Request(namespace, p["metadata"]["name"])
            for p in lister(namespace, nova)
            if p["metadata"]["name"] != skip
        ]

    def nova_pools(obj: Object) -> Iterable[Request]:
        return pools_of(obj["metadata"].get("namespace") or "", obj["metadata"]["name"])

    def contract_pools(obj: Object) -> Iterable[Request]:
        name = obj["metadata"]["name"]
        namespace = obj["metadata"].get("namespace") or ""
        # the pools whose spec.secretConfig or spec.tls names it, and the pool whose derived Secret it is
        found = {
            Request(namespace, p["metadata"]["name"])
            for p in pools.cache.by_index(POOL_SECRETS_INDEX, _index_key(namespace, name))
        }
        for ref in obj["metadata"].get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == NOVACOMPUTES.kind:
                found.add(Request(namespace, str(ref.get("name"))))
        labels = obj["metadata"].get("labels") or {}
        key, _, value = CONTRACT_SELECTOR.partition("=")
        if labels.get(key) == value and name.endswith(CONTRACT_SUFFIX):
            found.update(pools_of(namespace, name[: -len(CONTRACT_SUFFIX)]))
        return sorted(found)

    ctl.watch_primary(pools, ignore_status_only)

    def node_labels(name: str) -> Mapping[str, str] | None:
        if not nodes.cache.has_synced:
            return None
        node = nodes.cache.get(name)
        return dict(_meta(node).get("labels") or {}) if node is not None else None

    pools.add_handler(SiblingWakes(ctl.enqueue_together, lister, node_labels))
    for owned in (daemonsets, config_maps):
        ctl.watch_owned(owned, owner_group=NOVACOMPUTES.group, owner_kind=NOVACOMPUTES.kind)
    ctl.watch_mapped(novas, nova_pools, nova_changed)
    ctl.watch_mapped(contracts, contract_pools)
    ctl.watch_mapped(nodes, pools_of_node(pools.cache), node_relabelled)
    # the Nova's discover-hosts Job (shared with the Nova controller's informer of its children)
    ctl.watch_mapped(jobs, waiting_pools(lister), discovery_changed)
    ctl.watch_mapped(pods, pod_pools(pools.cache, lister), stuck_pods.EVENTS)
    ctl.watch_mapped(pods, pool_pods.waking(pools.cache), pool_pods.EVENTS)
    return ctl
