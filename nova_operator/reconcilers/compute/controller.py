"""The NovaCompute controller: its informers, watches and reconciler (novacompute-crd.md §20).

Watches: the NovaCompute itself (status-only updates ignored); its DaemonSet and ConfigMaps
(by owner); Nova updates that matter to a pool (generation, installedRelease,
computeConfigSecretRef, and the status of its Ready condition) mapped to the Nova's pools
through the ``spec.novaRef.name`` index; other pools of the same Nova when one changes
generation, starts deleting, or changes which nodes it holds; the ``<nova>-compute-config``
contract Secrets. Local pools have no Node watch: a relabel is noticed by the poll (60 s at most).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

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
from nova_operator.reconcilers.compute.context import COMPONENT, NOVA_REF_INDEX, ComputeSettings
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
from nova_operator.runtime.transform import ALL
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
    str(NODES): ("get", "list"),  # uncached, as the spec asks
    str(PODS): ("list",),
    str(DAEMONSETS): ("get", "list", "watch", "create", "patch", "delete"),
    str(CONFIGMAPS): ("get", "list", "watch", "create", "delete"),
    # the contract and spec.secretConfig read; mirrors reaped; {cr}-nova-compute-secret-config applied
    str(SECRETS): ("get", "list", "watch", "create", "patch", "delete"),
    str(JOBS): ("get", "create", "delete"),  # the host-discovery Job
    str(DEPLOYMENTS): ("get",),
    str(EVENTS): ("create", "patch"),
}
"""The verbs the NovaCompute controller sends, per resource (config/rbac must grant them, and no more)."""


def nova_ref(obj: Mapping[str, Any]) -> str:
    return str(((obj.get("spec") or {}).get("novaRef") or {}).get("name") or "")


SECRET_CONFIG_INDEX: Final = "spec.secretConfig.secretRef.name"
POOL_SECRETS_INDEX: Final = "nova.compute.pool-secrets"
"""Pools by ``<namespace>/<name>`` of the Secrets they read themselves: ``spec.secretConfig`` and
the derived ``{pool}-nova-compute-secret-config`` (``_pool_secrets``)."""


def _by_secret_config(obj: Object) -> list[str]:
    ref = ((obj.get("spec") or {}).get("secretConfig") or {}).get("secretRef") or {}
    return [_index_key(obj["metadata"].get("namespace") or "", str(ref["name"]))] if ref.get("name") else []


def _pool_secrets(obj: Object) -> list[str]:
    """The ``POOL_SECRETS_INDEX`` values of a pool: its ``spec.secretConfig`` Secret and the derived one."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or ""
    ref = ((obj.get("spec") or {}).get("secretConfig") or {}).get("secretRef") or {}
    names = {compute_pool.secret_config_name(str(meta.get("name") or ""))}
    if isinstance(ref, Mapping) and ref.get("name"):
        names.add(str(ref["name"]))
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
    config_maps = manager.informer(CONFIGMAPS, label_selector=MANAGED_BY_SELECTOR)
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
    )
    pools.add_handler(reconciler.reads)  # learns when the cache shows our own writes
    ctl = manager.controller(NAME, reconciler)

    def pools_of(namespace: str, nova: str, *, skip: str = "") -> Iterable[Request]:
        return [
            Request(namespace, p["metadata"]["name"])
            for p in lister(namespace, nova)
            if p["metadata"]["name"] != skip
        ]

    def siblings(obj: Object) -> Iterable[Request]:
        meta = obj["metadata"]
        return pools_of(meta.get("namespace") or "", nova_ref(obj), skip=meta["name"])

    def nova_pools(obj: Object) -> Iterable[Request]:
        return pools_of(obj["metadata"].get("namespace") or "", obj["metadata"]["name"])

    def contract_pools(obj: Object) -> Iterable[Request]:
        name = obj["metadata"]["name"]
        namespace = obj["metadata"].get("namespace") or ""
        # the pools whose spec.secretConfig names it, and the pool whose derived Secret it is
        found = {
            Request(namespace, p["metadata"]["name"])
            for p in pools.cache.by_index(SECRET_CONFIG_INDEX, _index_key(namespace, name))
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
    ctl.watch_mapped(pools, siblings, sibling_changed)
    for owned in (daemonsets, config_maps):
        ctl.watch_owned(owned, owner_group=NOVACOMPUTES.group, owner_kind=NOVACOMPUTES.kind)
    ctl.watch_mapped(novas, nova_pools, nova_changed)
    ctl.watch_mapped(contracts, contract_pools)
    return ctl
