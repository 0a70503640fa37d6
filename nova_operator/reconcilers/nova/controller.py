"""The Nova controller's wiring (reconciler.md §10): informers, indexes, mappers and watches.

Everything that decides which events wake which Nova lives here, so ``reconciler.py`` holds only the
pass. Register with ``controller_factory(manager)``, or, to adapt to a cluster without the Gateway
API or the MariaDB kinds, ``make_controller_factory(await probe_options(kube))``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any, Final

import structlog

from nova_operator import intervals, naming
from nova_operator.decisions import readiness
from nova_operator.kube.client import Kube
from nova_operator.kube.errors import KubeError, NotFound
from nova_operator.kube.resources import (
    CLUSTER_SECRET_STORES,
    CONFIGMAPS,
    CRONJOBS,
    DATABASES,
    DEPLOYMENTS,
    EVENTS,
    GRANTS,
    HPAS,
    HTTPROUTES,
    JOBS,
    MARIADBS,
    NETWORK_POLICIES,
    NOVAS,
    OPERATOR_NAMESPACE,
    PDBS,
    PODS,
    PRIORITY_CLASSES,
    RABBITMQ_CLUSTERS,
    SECRET_STORES,
    SECRETS,
    SERVICES,
    USERS,
    ResourceRef,
)
from nova_operator.reconcilers import stuck_pods
from nova_operator.reconcilers.nova import cache_fields, policy_reads
from nova_operator.reconcilers.nova.context import NovaOptions
from nova_operator.reconcilers.nova.reconciler import NovaReconciler
from nova_operator.reconcilers.nova.secret_reads import (
    CLUSTER_INDEX,
    DEFAULT_USER_INDEX,
    SECRET_INDEX,
    Narrower,
    default_user,
    messaging_cluster,
    reads,
    secret_refs,
)
from nova_operator.renderers import compute_pool
from nova_operator.runtime.cache import Bound, Cache
from nova_operator.runtime.controller import Controller
from nova_operator.runtime.held import HeldWrites
from nova_operator.runtime.informer import Informer
from nova_operator.runtime.manager import ControllerFactory, Manager
from nova_operator.runtime.predicates import Predicate, ignore_status_only, status_view_changed
from nova_operator.runtime.request import Request
from nova_operator.runtime.transform import ALL
from nova_operator.secret_refs import NAMESPACE_SECRET_DATA_LIMIT, SECRET_DATA_LIMIT, secret_data_size

log = structlog.get_logger("nova_operator.nova")

CONTROLLER_NAME: Final = "nova"
SECRET_BOUND: Final = Bound(secret_data_size, SECRET_DATA_LIMIT, NAMESPACE_SECRET_DATA_LIMIT)
"""What the shared Secrets cache holds with data (``secret_refs``; both controllers set the same)."""


OWNED: Final[tuple[ResourceRef, ...]] = (
    DEPLOYMENTS,
    SERVICES,
    CONFIGMAPS,
    JOBS,
    CRONJOBS,
    PDBS,
    HPAS,
    NETWORK_POLICIES,
)


MARIADB_CHILDREN: Final[tuple[ResourceRef, ...]] = (DATABASES, USERS, GRANTS)


CHILD_EVENTS: Final[dict[ResourceRef, Predicate]] = {
    DEPLOYMENTS: status_view_changed(readiness.deployment_view),
    JOBS: status_view_changed(readiness.conditions_view),
    CRONJOBS: status_view_changed(readiness.cronjob_view),
    HTTPROUTES: status_view_changed(readiness.route_view),
    SERVICES: status_view_changed(readiness.no_status),
    PDBS: status_view_changed(readiness.no_status),
    HPAS: status_view_changed(readiness.no_status),
    **{ref: status_view_changed(readiness.conditions_view) for ref in (DATABASES, USERS, GRANTS)},
}


"""Which updates of an owned child wake its Nova: any change but a status write that leaves what the
pipeline reads as it was (kcm writes a Deployment's status 5 to 8 times per rollout). Kinds not
listed (ConfigMaps, Secrets, NetworkPolicies: no status) wake it on every update."""


def _child_events(ref: ResourceRef) -> tuple[Predicate, ...]:
    found = CHILD_EVENTS.get(ref)
    return () if found is None else (found,)


CHILD_SELECTOR: Final = f"{naming.MANAGED_BY_LABEL}={naming.MANAGED_BY}"


_WATCH = ("list", "watch")


# server-side apply may create; a child the label-filtered cache lacks is read first (ownership)
_APPLY = ("get", "create", "patch")


RBAC_NEEDS: Final[dict[str, tuple[str, ...]]] = {
    str(NOVAS): ("get", *_WATCH, "patch"),
    f"{NOVAS}/status": ("patch",),
    # blockOwnerDeletion on the children's owner references needs this where the
    # OwnerReferencesPermissionEnforcement admission plugin is on.
    f"{NOVAS}/finalizers": ("update",),
    str(SECRETS): (*_WATCH, *_APPLY, "delete"),
    str(CONFIGMAPS): (*_WATCH, *_APPLY, "delete"),
    str(DEPLOYMENTS): (*_WATCH, *_APPLY, "delete"),
    str(SERVICES): (*_WATCH, *_APPLY, "delete"),
    str(JOBS): (*_WATCH, *_APPLY, "delete"),
    str(CRONJOBS): (*_WATCH, *_APPLY),
    str(PDBS): (*_WATCH, *_APPLY),
    str(HPAS): (*_WATCH, *_APPLY, "delete"),
    str(NETWORK_POLICIES): (*_WATCH, *_APPLY, "delete"),
    str(HTTPROUTES): (*_WATCH, *_APPLY, "delete"),
    str(DATABASES): (*_WATCH, *_APPLY, "delete"),
    str(USERS): (*_WATCH, *_APPLY, "delete"),
    str(GRANTS): (*_WATCH, *_APPLY, "delete"),
    str(MARIADBS): ("get", *_WATCH),
    # watched in a cluster-wide install (no GET on a pass); a --namespace install GETs the named one
    str(RABBITMQ_CLUSTERS): ("get", *_WATCH),
    str(SECRET_STORES): ("get", *_WATCH),
    str(CLUSTER_SECRET_STORES): ("get", *_WATCH),
    # listed uncached by the service-record and cells reads; watched (label-selected, status reasons
    # only) so a step names a pod of its Job or Deployment that cannot start (``stuck_pods``)
    str(PODS): _WATCH,
    str(PRIORITY_CLASSES): ("get",),
    str(EVENTS): ("create", "patch"),
}


"""The verbs the Nova controller sends, per resource (what ``config/rbac`` must grant it, and no more)."""


def _secret_mapper(novas: Cache) -> Callable[[dict[str, Any]], Iterable[Request]]:
    def mapper(secret: dict[str, Any]) -> list[Request]:
        meta = secret.get("metadata") or {}
        namespace = meta.get("namespace") or ""
        keys = set(novas.keys_by_index(SECRET_INDEX, f"{namespace}/{meta.get('name', '')}"))
        for ref in meta.get("ownerReferences") or []:
            group = str(ref.get("apiVersion", "")).rpartition("/")[0]
            if ref.get("kind") == "Nova" and group == NOVAS.group:
                key = Request(namespace, str(ref.get("name")))
                if key in novas:
                    keys.add(key)
        return sorted(keys)

    return mapper


def _mariadb_mapper(novas: Cache) -> Callable[[dict[str, Any]], Iterable[Request]]:
    def mapper(server: dict[str, Any]) -> list[Request]:
        meta = server.get("metadata") or {}
        namespace, name = meta.get("namespace") or "", meta.get("name")
        keys = []
        for nova in novas.list(namespace):
            spec = nova.get("spec") or {}
            refs = {
                ((spec.get(b) or {}).get("clusterRef") or {}).get("name") for b in ("apiDatabase", "database")
            }
            if name in refs:
                keys.append(Request(namespace, nova["metadata"]["name"]))
        return keys

    return mapper


def _archive_job_mapper(novas: Cache) -> Callable[[dict[str, Any]], Iterable[Request]]:
    """A db-archive run (a Job the CronJob owns, not the Nova) wakes its Nova when it changes.

    Without this the Nova learns of a finished run only from the CronJob's status write, which
    arrives on another watch and may be handled before the Job cache holds the run's outcome."""

    def mapper(job: dict[str, Any]) -> list[Request]:
        meta = job.get("metadata") or {}
        namespace = meta.get("namespace") or ""
        owners = {
            str(ref.get("name"))
            for ref in meta.get("ownerReferences") or []
            if ref.get("kind") == "CronJob" and str(ref.get("apiVersion", "")).startswith("batch/")
        }
        if not owners:
            return []
        return [
            Request(namespace, nova["metadata"]["name"])
            for nova in novas.list(namespace)
            if naming.db_archive_name(nova["metadata"]["name"]) in owners
        ]

    return mapper


async def served(kube: Kube, ref: ResourceRef) -> bool:
    """Whether the cluster serves ``ref`` (probed at start-up: an informer on a missing kind never syncs)."""
    try:
        await kube.list(ref)
    except NotFound:
        return False
    except KubeError:
        return True  # served, but this read failed: let the informer retry
    return True


async def probe_options(kube: Kube, *, operator_namespace: str = OPERATOR_NAMESPACE) -> NovaOptions:
    """Options for this cluster: without the Gateway API the route members report
    ``GatewayAPINotInstalled`` for a set block; without the MariaDB kinds the Database step polls."""
    return NovaOptions(
        operator_namespace=operator_namespace,
        gateway_api=await served(kube, HTTPROUTES),
        mariadb_api=await served(kube, MARIADBS),
        secret_stores=await served(kube, SECRET_STORES),
        cluster_secret_stores=await served(kube, CLUSTER_SECRET_STORES),
        rabbitmq_api=await served(kube, RABBITMQ_CLUSTERS),
    )


def watches_rabbitmq(opts: NovaOptions) -> bool:
    """Whether RabbitmqClusters are read from an informer: served, and watchable where the Novas are.

    In a cluster-wide install the probe of ``probe_options`` decides. With ``--namespace`` that
    cluster-wide probe cannot tell whether the kind is served (it is refused either way), and an
    informer on a missing kind never syncs: there ``probe_namespaces`` lists the kind in every
    watched namespace first, and only when each list succeeded is it watched; otherwise the
    transport step GETs the named cluster on each pass and polls it.
    """
    return opts.rabbitmq_api and (not opts.namespaced or opts.rabbitmq_in_namespaces)


async def served_in(kube: Kube, ref: ResourceRef, namespaces: Sequence[str]) -> bool:
    """Whether ``ref`` is served and may be listed in each of ``namespaces`` (one LIST each).

    Any refusal or failure answers False: an informer that cannot list a namespace never syncs,
    and the operator would never start its controllers; the per-pass GET works (or reports) anyway.
    """
    for namespace in namespaces:
        try:
            await kube.list(ref, namespace, limit=1)
        except KubeError as exc:
            log.info(
                "not watched in this namespace, read per pass",
                resource=str(ref),
                namespace=namespace,
                error=str(exc),
            )
            return False
    return bool(namespaces)


async def probe_namespaces(kube: Kube, options: NovaOptions, namespaces: Sequence[str]) -> NovaOptions:
    """``options`` for a ``--namespace`` install over ``namespaces``: can RabbitmqClusters be watched?"""
    if not namespaces:
        return options
    return replace(options, rabbitmq_in_namespaces=await served_in(kube, RABBITMQ_CLUSTERS, namespaces))


def _rabbitmq_mapper(novas: Cache) -> Callable[[dict[str, Any]], Iterable[Request]]:
    """A RabbitmqCluster -> the Novas of its namespace whose ``spec.messaging.clusterRef`` names it."""

    def mapper(cluster: dict[str, Any]) -> list[Request]:
        meta = cluster.get("metadata") or {}
        namespace, name = meta.get("namespace") or "", meta.get("name")
        return [
            Request(namespace, nova["metadata"]["name"])
            for nova in novas.list(namespace)
            if (((nova.get("spec") or {}).get("messaging") or {}).get("clusterRef") or {}).get("name") == name
        ]

    return mapper


def store_kinds(opts: NovaOptions) -> list[ResourceRef]:
    """The secret-store kinds to watch: those served, and only in a cluster-wide install.

    In ``--namespace`` mode the cluster-wide probe of ``probe_options`` is refused (403) whether or not
    External Secrets is installed, so "served" is unknown there and an informer on a kind the cluster
    lacks would never sync: the gate keeps its GET and 15 s poll instead.
    """
    if opts.namespaced:
        return []
    return [
        ref
        for ref, on in (
            (SECRET_STORES, opts.secret_stores),
            (CLUSTER_SECRET_STORES, opts.cluster_secret_stores),
        )
        if on
    ]


def _store_mapper(novas: Cache, kind: str) -> Callable[[dict[str, Any]], Iterable[Request]]:
    """A store -> the Novas whose ``spec.secretStoreRef`` names it (a SecretStore: in its namespace)."""

    def mapper(store: dict[str, Any]) -> list[Request]:
        meta = store.get("metadata") or {}
        namespace = meta.get("namespace") if kind == "SecretStore" else None
        keys = []
        for nova in novas.list(namespace):
            ref = (nova.get("spec") or {}).get("secretStoreRef") or {}
            if ref.get("kind") == kind and ref.get("name") == meta.get("name"):
                keys.append(Request(nova["metadata"].get("namespace") or "", nova["metadata"]["name"]))
        return keys

    return mapper


def make_controller_factory(options: NovaOptions | None = None) -> ControllerFactory:
    """A factory for the manager; ``options`` set the operator namespace, Gateway API capability, prober."""
    opts = options if options is not None else NovaOptions(operator_namespace=OPERATOR_NAMESPACE)

    def factory(manager: Manager) -> Controller:
        watched = [NOVAS, *OWNED]
        if opts.gateway_api:
            watched.append(HTTPROUTES)
        if opts.mariadb_api:
            # The cluster by name; its Database/User/Grant children by owner, so a managed database
            # turning Ready wakes the Nova at once instead of on the 30 s database poll.
            watched += [MARIADBS, *MARIADB_CHILDREN]
        # Children carry managed-by=nova-operator: cache only those. The Nova itself and the MariaDB
        # clusters are read whatever their labels. Secrets (the user's own that the CR names, and the
        # derived ones) are cached only in namespaces that hold a Nova or a NovaCompute: never listed
        # or watched across the cluster (see README, "RBAC and what is cached").
        if watches_rabbitmq(opts):  # the user's cluster: its default-user Secret reference, by name
            watched.append(RABBITMQ_CLUSTERS)
        unfiltered = (NOVAS, MARIADBS, RABBITMQ_CLUSTERS)
        informers: dict[ResourceRef, Informer] = {
            ref: manager.informer(
                ref, label_selector=None if ref in unfiltered else CHILD_SELECTOR, keep=cache_fields.kept(ref)
            )
            for ref in watched
        }
        novas = informers[NOVAS].cache
        for index, func in (
            (SECRET_INDEX, secret_refs),
            (CLUSTER_INDEX, messaging_cluster),
            (policy_reads.POLICY_INDEX, policy_reads.policy_config_map),
        ):
            if index not in novas._index_funcs:  # the NOVAS informer may be shared with another controller
                novas.add_index(index, func)
        clusters = informers[RABBITMQ_CLUSTERS].cache if RABBITMQ_CLUSTERS in informers else None
        if clusters is not None and DEFAULT_USER_INDEX not in clusters._index_funcs:
            clusters.add_index(DEFAULT_USER_INDEX, default_user)
        # The data of the Secrets a Nova reads only; the others as references (``secret_reads``).
        secrets = manager.scoped_informer(SECRETS, keep=ALL, when=reads(novas, clusters))
        secrets.bound(SECRET_BOUND)  # no Secret over 256 KiB, 4 MiB per namespace (``secret_refs``)
        secrets.follow(informers[NOVAS])
        informers[NOVAS].add_handler(Narrower(secrets, clusters))
        informers[SECRETS] = secrets
        # the operator's own pods, their waiting reasons only: a step names one that cannot start
        informers[PODS] = manager.informer(PODS, label_selector=stuck_pods.SELECTOR, keep=stuck_pods.KEPT)
        # The user's ConfigMaps, in the namespaces where a Nova names one: the data of those a spec.policy
        # names, the others as references (``policy_reads``); a change of a named one wakes its Nova.
        policy_maps = manager.scoped_informer(CONFIGMAPS, keep=ALL, when=policy_reads.reads(novas))
        policy_maps.bound(policy_reads.POLICY_MAP_BOUND)
        policy_maps.follow(informers[NOVAS], when=policy_reads.names_one)  # no list where none is named
        informers[NOVAS].add_handler(Narrower(policy_maps, keys=policy_reads.read_keys))
        for ref in store_kinds(opts):  # the user's own stores: no label filter
            informers[ref] = manager.informer(ref, keep=cache_fields.kept(ref))
        reconciler = NovaReconciler(
            manager.kube,
            {ref: inf.cache for ref, inf in informers.items()},
            options=opts,
            referenced={CONFIGMAPS: policy_maps.cache},
        )
        informers[NOVAS].add_handler(reconciler.reads)  # learns when the cache shows our own writes
        ctl = manager.controller(CONTROLLER_NAME, reconciler)
        reconciler.writes = ctl.own_writes  # the echoes of its own writes wake no pass of the writer
        if opts.status_hold > 0:
            reconciler.held = HeldWrites(
                hold=opts.status_hold,
                longest=intervals.STATUS_HOLD_LONGEST,
                due=ctl.queue.due,
                expedite=ctl.queue.expedite,
                failed=ctl.enqueue,
            )
            ctl.on_stop(reconciler.held.close)  # no report of a controller that stopped (or lost the lease)
        ctl.watch_primary(informers[NOVAS], ignore_status_only)
        owned = [*OWNED, HTTPROUTES] if opts.gateway_api else list(OWNED)
        for ref in owned:
            ctl.watch_owned(
                informers[ref], owner_group=NOVAS.group, owner_kind=NOVAS.kind, predicates=_child_events(ref)
            )
        ctl.watch_mapped(informers[SECRETS], _secret_mapper(novas))
        ctl.watch_mapped(policy_maps, policy_reads.wakes(novas))
        ctl.watch_mapped(informers[JOBS], _archive_job_mapper(novas), *_child_events(JOBS))
        # a pod that starts or stops being stuck (the discover-hosts Job's are the pools' concern)
        skip = compute_pool.DISCOVER_HOSTS
        mapper = stuck_pods.by_instance(novas, naming.MANAGED_BY, skip_component=skip)
        ctl.watch_mapped(informers[PODS], mapper, stuck_pods.EVENTS)
        for ref in store_kinds(opts):
            ctl.watch_mapped(informers[ref], _store_mapper(novas, ref.kind))
        if watches_rabbitmq(opts):
            ctl.watch_mapped(informers[RABBITMQ_CLUSTERS], _rabbitmq_mapper(novas))
        if opts.mariadb_api:
            ctl.watch_mapped(informers[MARIADBS], _mariadb_mapper(novas))
            for ref in MARIADB_CHILDREN:
                ctl.watch_owned(
                    informers[ref],
                    owner_group=NOVAS.group,
                    owner_kind=NOVAS.kind,
                    predicates=_child_events(ref),
                )
        return ctl

    return factory


def controller_factory(manager: Manager) -> Controller:
    """The Nova controller with production defaults (operator namespace ``nova-system``, Gateway API on)."""
    return make_controller_factory()(manager)
