"""Which Secrets the Nova controller reads: the Secrets cache keeps the data of these only.

The Secrets informer covers every Secret of a namespace that holds a Nova (``runtime.scoped``);
a tenant may keep hundreds of large Secrets there (Helm releases, certificates) that no Nova
names. The informer keeps the content of a Secret only when ``reads`` admits it
(``runtime.transform``, a conditional declaration); the rest are kept as references (name,
version, owners), so the memory the cache takes is bounded by the Secrets the Novas name, not by
what the namespace stores. A Secret is read, and admitted, when it is

- named by a Nova's spec (``secret_refs``: the database, service-user, metadata, messaging,
  remote-compute, secretConfig and ``spec.tls`` references, the TLS bundles and client certificates);
- one of a Nova's derived Secrets (``DERIVED_SUFFIXES``: ``{name}-transport-url`` ...), which
  the steps compare with what they would apply;
- the default-user Secret a RabbitmqCluster publishes, when a Nova's ``spec.messaging.clusterRef``
  names that cluster (known only where the RabbitmqClusters are cached).

A Secret that became one of these after it was stored (a spec edited to name it) is read once
from the API server by the pass that needs it and handed to the cache (``Cache.fill``); one that
is no longer read (a reference removed, a Nova deleted) is narrowed again (``reconsider``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from nova_operator.kube.types import Object
from nova_operator.naming import CHECKED_COPIES
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.informer import Informer
from nova_operator.runtime.request import Request

SECRET_INDEX: Final = "nova.spec.secretRefs.name"
"""Novas by ``<namespace>/<name>`` of every Secret their spec names (``secret_refs``)."""
CLUSTER_INDEX: Final = "nova.spec.messaging.clusterRef.name"
"""Novas by ``<namespace>/<name>`` of the RabbitmqCluster their ``spec.messaging.clusterRef`` names."""
DEFAULT_USER_INDEX: Final = "rabbitmq.status.defaultUser.secretReference"
"""RabbitmqClusters by ``<namespace>/<name>`` of the default-user Secret they publish (own namespace only)."""

DERIVED_SUFFIXES: Final[tuple[str, ...]] = (
    "-api-db-connection",
    "-db-connection",
    "-transport-url",
    "-digest-key",
    "-oslo-credentials",
    "-compute-config",
    "-remote-compute-config",
    "-secret-config",
    *(f"-checked-{which}" for which in CHECKED_COPIES),
)
"""The Secrets a Nova derives are ``{name}{suffix}`` (``renderers.secrets``)."""


def secret_ref_fields(nova: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(field, name)`` of every Secret a Nova's spec names, sorted (the Secrets it may make us read).

    The same list drives the Secrets watch's index and the ``--secret-ref-label`` gate.
    """
    spec = nova.get("spec") or {}
    found: list[tuple[str, str]] = []

    def add(field: str, ref: Any) -> None:
        if isinstance(ref, Mapping) and ref.get("name"):
            found.append((f"spec.{field}", str(ref["name"])))

    for block_name in ("apiDatabase", "database"):
        block = spec.get(block_name) or {}
        add(f"{block_name}.secretRef", block.get("secretRef"))
        tls = block.get("tls") or {}
        if tls.get("mode") not in (None, "disabled"):
            add(f"{block_name}.tls.caBundleSecretRef", tls.get("caBundleSecretRef"))
            add(f"{block_name}.tls.clientCertSecretRef", tls.get("clientCertSecretRef"))
    add("serviceUser.secretRef", (spec.get("serviceUser") or {}).get("secretRef"))
    add("metadata.sharedSecretRef", (spec.get("metadata") or {}).get("sharedSecretRef"))
    messaging = spec.get("messaging") or {}
    add("messaging.secretRef", messaging.get("secretRef"))
    add("messaging.tls.caBundleSecretRef", (messaging.get("tls") or {}).get("caBundleSecretRef"))
    add("messaging.tls.clientCertSecretRef", (messaging.get("tls") or {}).get("clientCertSecretRef"))
    cache_tls = (spec.get("cache") or {}).get("tls") or {}
    add("cache.tls.caBundleSecretRef", cache_tls.get("caBundleSecretRef"))
    add("cache.tls.clientCertSecretRef", cache_tls.get("clientCertSecretRef"))
    add("remoteCompute.transportURLSecretRef", (spec.get("remoteCompute") or {}).get("transportURLSecretRef"))
    add("secretConfig.secretRef", (spec.get("secretConfig") or {}).get("secretRef"))
    add("tls.caBundleSecretRef", (spec.get("tls") or {}).get("caBundleSecretRef"))
    return sorted(set(found))


def secret_refs(nova: Mapping[str, Any]) -> list[str]:
    """The Secret-name index values of a Nova: ``<namespace>/<name>`` of every Secret its spec names
    (``secret_ref_fields``, the list the ``--secret-ref-label`` gate checks too)."""
    namespace = (nova.get("metadata") or {}).get("namespace") or ""
    return sorted({f"{namespace}/{name}" for _field, name in secret_ref_fields(nova)})


def messaging_cluster(nova: Mapping[str, Any]) -> list[str]:
    """The ``CLUSTER_INDEX`` value of a Nova (none without ``spec.messaging.clusterRef``)."""
    namespace = (nova.get("metadata") or {}).get("namespace") or ""
    ref = ((nova.get("spec") or {}).get("messaging") or {}).get("clusterRef") or {}
    return [f"{namespace}/{ref['name']}"] if isinstance(ref, Mapping) and ref.get("name") else []


def default_user(cluster: Mapping[str, Any]) -> list[str]:
    """The ``DEFAULT_USER_INDEX`` value of a RabbitmqCluster (a Secret of another namespace: none)."""
    meta = cluster.get("metadata") or {}
    namespace = meta.get("namespace") or ""
    ref = ((cluster.get("status") or {}).get("defaultUser") or {}).get("secretReference") or {}
    if (
        not isinstance(ref, Mapping)
        or not ref.get("name")
        or (ref.get("namespace") or namespace) != namespace
    ):
        return []
    return [f"{namespace}/{ref['name']}"]


def read_keys(nova: Mapping[str, Any], clusters: Cache | None = None) -> set[Request]:
    """The Secrets a Nova names or derives, and the default user of the cluster it names (when the
    clusters are cached), as cache keys."""
    meta = nova.get("metadata") or {}
    namespace, name = meta.get("namespace") or "", meta.get("name") or ""
    keys = {Request(*ref.split("/", 1)) for ref in secret_refs(nova)}
    keys |= {Request(namespace, f"{name}{suffix}") for suffix in DERIVED_SUFFIXES}
    for ref in messaging_cluster(nova):
        cluster = clusters.get(ref.split("/", 1)[1], namespace) if clusters is not None else None
        if cluster is not None:
            keys |= {Request(*user.split("/", 1)) for user in default_user(cluster)}
    return keys


def reads(novas: Cache, clusters: Cache | None) -> Callable[[Object], bool]:
    """Whether the Nova controller reads a Secret (see the module docstring); index lookups only."""

    def admits(secret: Object) -> bool:
        meta = secret.get("metadata") or {}
        namespace, name = meta.get("namespace") or "", meta.get("name") or ""
        if novas.indexed(SECRET_INDEX, f"{namespace}/{name}"):
            return True
        for suffix in DERIVED_SUFFIXES:
            if name.endswith(suffix) and Request(namespace, name[: -len(suffix)]) in novas:
                return True
        if clusters is not None:
            for cluster in clusters.keys_by_index(DEFAULT_USER_INDEX, f"{namespace}/{name}"):
                if novas.indexed(CLUSTER_INDEX, f"{namespace}/{cluster.name}"):
                    return True
        return False

    return admits


class Narrower:
    """A Nova handler: the Secrets a Nova stopped reading (a reference edited away, the Nova gone)
    are narrowed in the Secrets cache at once (``Informer.reconsider``). ``keys``: what a Nova reads
    of another cache kept the same way (the policy ConfigMaps, ``policy_reads.read_keys``)."""

    def __init__(
        self,
        secrets: Informer,
        clusters: Cache | None = None,
        *,
        keys: Callable[[Object], set[Request]] | None = None,
    ) -> None:
        self._secrets = secrets
        self._keys = keys if keys is not None else (lambda nova: read_keys(nova, clusters))

    def on_add(self, obj: Object) -> None:
        return None

    def on_update(self, old: Object, new: Object) -> None:
        self._reconsider(self._keys(old) - self._keys(new))

    def on_delete(self, obj: Object) -> None:
        self._reconsider(self._keys(obj))

    def _reconsider(self, keys: Iterable[Request]) -> None:
        self._secrets.reconsider(sorted(keys))
