"""What the Nova controller's caches keep of each kind (reconcilers/cache_fields.py): its readers still work.

Every reader of a pruned kind runs here on the object as the cache keeps it; the kinds the
operator applies, and the Nova itself, are kept whole (``apply.carries`` compares them field by
field with the desired object, so a pruned field would be a write on every pass). The
TransportURLSecret step, which reads the kept RabbitmqCluster, runs on the real API server
(``tests/integration/nova/test_transport_url_secret.py``).
"""

from __future__ import annotations

from typing import Any, cast

from nova_operator.decisions.readiness import custom_resource_ready
from nova_operator.kube.client import Kube
from nova_operator.kube.resources import (
    CLUSTER_SECRET_STORES,
    CONFIGMAPS,
    MARIADBS,
    NOVAS,
    RABBITMQ_CLUSTERS,
    SECRET_STORES,
    SECRETS,
    ResourceRef,
)
from nova_operator.metrics import Metrics
from nova_operator.reconcilers.nova import cache_fields
from nova_operator.reconcilers.nova.context import NovaOptions
from nova_operator.reconcilers.nova.controller import (
    MARIADB_CHILDREN,
    OWNED,
    _mariadb_mapper,
    make_controller_factory,
)
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.manager import Manager
from nova_operator.runtime.request import Request
from nova_operator.runtime.transform import ALL, Transform

NS = "ns"


def stored(ref: ResourceRef, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as the Nova controller's cache of ``ref`` keeps it."""
    t = Transform()
    t.keep(cache_fields.kept(ref))
    return t(obj)


def cr(kind: str, api_version: str, ready: str | None, **extra: Any) -> dict[str, Any]:
    conds = [] if ready is None else [{"type": "Ready", "status": ready, "reason": "r", "message": "m"}]
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": "db", "namespace": NS, "resourceVersion": "7", "managedFields": [{}]},
        "spec": {"rootPasswordSecretKeyRef": {"name": "root"}, "storage": {"size": "1Gi"}, "provider": {}},
        "status": {"conditions": conds, "currentPrimary": "db-0", **extra},
    }


def test_the_ready_gates_read_the_same_from_the_kept_mariadb_and_stores() -> None:
    for ref in (MARIADBS, SECRET_STORES, CLUSTER_SECRET_STORES):
        for ready in ("True", "False", None):
            whole = cr(ref.kind, ref.api_version, ready)
            kept = stored(ref, cr(ref.kind, ref.api_version, ready))
            assert custom_resource_ready(kept) == custom_resource_ready(whole) == (ready == "True")
            assert "spec" not in kept  # what nobody reads is gone
            assert kept["status"] == {"conditions": whole["status"]["conditions"]}
            assert kept["metadata"]["resourceVersion"] == "7"


def test_the_mariadb_mapper_finds_the_novas_from_the_kept_cluster() -> None:
    novas = Cache("novas")
    novas.upsert(
        {"metadata": {"name": "n", "namespace": NS}, "spec": {"apiDatabase": {"clusterRef": {"name": "db"}}}}
    )
    kept = stored(MARIADBS, cr("MariaDB", MARIADBS.api_version, "True"))
    assert _mariadb_mapper(novas)(kept) == [Request(NS, "n")]


class NoKube:
    """What a Manager needs of the client to register informers (no request is sent)."""

    def __init__(self) -> None:
        self.metrics = Metrics()


def test_the_nova_and_every_kind_the_operator_applies_are_kept_whole() -> None:
    for ref in (NOVAS, SECRETS, *OWNED, *MARIADB_CHILDREN):
        assert cache_fields.kept(ref) is ALL, ref
    manager = Manager(cast(Kube, NoKube()))
    options = NovaOptions(secret_stores=True, cluster_secret_stores=True, rabbitmq_api=True, mariadb_api=True)
    make_controller_factory(options)(manager)
    scoped = {inf.ref: inf.transform.kept for inf in manager._scoped.values()}
    kept = {inf.ref: inf.transform.kept for inf in manager._informers.values()}
    kept[SECRETS] = scoped.pop(SECRETS)
    # the user's ConfigMaps where a Nova names one (issue 38 item 3: a policy ConfigMap's edit wakes
    # its Nova): whole while a Nova names it (``policy_reads``), else a reference, beside the
    # operator's own ConfigMaps, kept whole
    assert scoped == {CONFIGMAPS: ALL}
    policy_maps = next(inf for inf in manager._scoped.values() if inf.ref == CONFIGMAPS)
    unnamed = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "ns"}}
    assert policy_maps.transform.apply({**unnamed, "data": {"k": "v"}}) == (unnamed, False)
    assert kept[NOVAS] is ALL
    assert kept[SECRETS] is ALL
    for ref in (*OWNED, *MARIADB_CHILDREN):
        assert kept[ref] is ALL, ref
    for ref in (MARIADBS, SECRET_STORES, CLUSTER_SECRET_STORES, RABBITMQ_CLUSTERS):
        assert kept[ref] is not ALL, ref
        assert set(kept[ref]) == {"apiVersion", "kind", "metadata", "status"}, ref  # type: ignore[arg-type]
