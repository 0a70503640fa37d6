"""The Nova controller's watch mappings (reconciler.md §10.1): Secret-name index, owner leg, MariaDB."""

from __future__ import annotations

from typing import Any

from nova_operator.decisions import readiness as r
from nova_operator.kube.resources import (
    CONFIGMAPS,
    CRONJOBS,
    DATABASES,
    DEPLOYMENTS,
    GRANTS,
    HPAS,
    HTTPROUTES,
    JOBS,
    NETWORK_POLICIES,
    PDBS,
    SERVICES,
    USERS,
)
from nova_operator.reconcilers.nova.controller import (
    CHILD_EVENTS,
    MARIADB_CHILDREN,
    OWNED,
    _archive_job_mapper,
    _mariadb_mapper,
    _secret_mapper,
)
from nova_operator.reconcilers.nova.secret_reads import SECRET_INDEX, secret_refs
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.request import Request


def nova(name: str = "nova", **spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "apiDatabase": {"clusterRef": {"name": "db"}, "secretRef": {"name": "api-db"}},
        "database": {
            "host": "h",
            "secretRef": {"name": "cell-db"},
            "tls": {
                "mode": "disabled",
                "caBundleSecretRef": {"name": "ca"},
                "clientCertSecretRef": {"name": "cc"},
            },
        },
        "serviceUser": {"secretRef": {"name": "svc"}},
        "metadata": {"sharedSecretRef": {"name": "meta"}},
        "messaging": {"secretRef": {"name": "bus"}},
    }
    base.update(spec)
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": base}


def test_the_index_names_every_referenced_secret_but_tls_secrets_only_while_tls_is_on() -> None:
    assert secret_refs(nova()) == ["ns/api-db", "ns/bus", "ns/cell-db", "ns/meta", "ns/svc"]
    tls = {"mode": "require", "caBundleSecretRef": {"name": "ca"}, "clientCertSecretRef": {"name": "cc"}}
    with_tls = nova(database={"host": "h", "secretRef": {"name": "cell-db"}, "tls": tls})
    remote = {"transportURLSecretRef": {"name": "remote"}}
    assert {"ns/ca", "ns/cc"} <= set(secret_refs(with_tls))
    assert "ns/remote" in secret_refs(nova(remoteCompute=remote))


def _cache(*novas: dict[str, Any]) -> Cache:
    cache = Cache("novas")
    cache.add_index(SECRET_INDEX, secret_refs)
    for n in novas:
        cache.upsert(n)
    return cache


def test_a_secret_wakes_the_novas_naming_it_and_its_nova_owner_if_that_still_exists() -> None:
    mapper = _secret_mapper(_cache(nova("a"), nova("b")))
    referenced = {"metadata": {"name": "svc", "namespace": "ns"}}
    assert mapper(referenced) == [Request("ns", "a"), Request("ns", "b")]
    derived = {
        "metadata": {
            "name": "a-transport-url",
            "namespace": "ns",
            "ownerReferences": [
                {"apiVersion": "nova.openstack.c5c3.io/v1alpha1", "kind": "Nova", "name": "a"}
            ],
        }
    }
    assert mapper(derived) == [Request("ns", "a")]
    orphan = {
        "metadata": {
            **derived["metadata"],
            "ownerReferences": [{**derived["metadata"]["ownerReferences"][0], "name": "gone"}],
        }
    }
    assert list(mapper(orphan)) == []
    elsewhere = {"metadata": {"name": "svc", "namespace": "other"}}
    assert list(mapper(elsewhere)) == []


def test_a_mariadb_wakes_each_nova_that_names_it_once() -> None:
    both = nova("both", database={"clusterRef": {"name": "db"}, "secretRef": {"name": "x"}})
    mapper = _mariadb_mapper(_cache(both, nova("api-only"), nova("none", apiDatabase={"host": "h"})))
    assert mapper({"metadata": {"name": "db", "namespace": "ns"}}) == [
        Request("ns", "api-only"),
        Request("ns", "both"),
    ]


def test_a_store_maps_to_the_novas_that_name_it_and_stores_are_watched_only_cluster_wide() -> None:
    from nova_operator.kube.resources import CLUSTER_SECRET_STORES, SECRET_STORES
    from nova_operator.reconcilers.nova.context import NovaOptions
    from nova_operator.reconcilers.nova.controller import _store_mapper, store_kinds

    novas = Cache("novas")
    for ns, name, ref in (
        ("a", "n1", {"kind": "SecretStore", "name": "vault"}),
        ("b", "n2", {"kind": "SecretStore", "name": "vault"}),
        ("a", "n3", {"kind": "ClusterSecretStore", "name": "vault"}),
        ("b", "n4", {"kind": "ClusterSecretStore", "name": "vault"}),
        ("a", "n5", {"kind": "SecretStore", "name": "other"}),
    ):
        obj = nova(name, secretStoreRef=ref)
        obj["metadata"]["namespace"] = ns
        novas.upsert(obj)
    local = {"kind": "SecretStore", "metadata": {"name": "vault", "namespace": "a"}}
    assert list(_store_mapper(novas, "SecretStore")(local)) == [Request("a", "n1")]
    cluster = {"kind": "ClusterSecretStore", "metadata": {"name": "vault"}}
    assert sorted(_store_mapper(novas, "ClusterSecretStore")(cluster)) == [
        Request("a", "n3"),
        Request("b", "n4"),
    ]

    both = NovaOptions(secret_stores=True, cluster_secret_stores=True)
    assert store_kinds(both) == [SECRET_STORES, CLUSTER_SECRET_STORES]
    # --namespace: the cluster-wide probe cannot tell whether the kinds are served, so nothing is watched
    assert store_kinds(NovaOptions(secret_stores=True, cluster_secret_stores=True, namespaced=True)) == []
    assert store_kinds(NovaOptions(secret_stores=True)) == [SECRET_STORES]
    assert store_kinds(NovaOptions()) == []


def test_a_rabbitmq_cluster_wakes_the_novas_of_its_namespace_naming_it_and_is_watched_only_cluster_wide() -> (
    None
):
    from nova_operator.reconcilers.nova.context import NovaOptions
    from nova_operator.reconcilers.nova.controller import _rabbitmq_mapper, watches_rabbitmq

    managed = nova("managed", messaging={"clusterRef": {"name": "rabbitmq"}})
    other = nova("other", messaging={"clusterRef": {"name": "another"}})
    elsewhere = nova("elsewhere", messaging={"clusterRef": {"name": "rabbitmq"}})
    elsewhere["metadata"]["namespace"] = "ns2"
    mapper = _rabbitmq_mapper(_cache(managed, other, nova("brownfield"), elsewhere))
    assert mapper({"metadata": {"name": "rabbitmq", "namespace": "ns"}}) == [Request("ns", "managed")]
    assert mapper({"metadata": {"name": "unknown", "namespace": "ns"}}) == []
    assert watches_rabbitmq(NovaOptions())
    assert not watches_rabbitmq(NovaOptions(namespaced=True))  # the probe cannot tell there
    assert not watches_rabbitmq(NovaOptions(rabbitmq_api=False))


def test_a_db_archive_run_wakes_the_nova_whose_cronjob_owns_it() -> None:
    long_name = "n" * 50  # its CronJob name is shortened: the mapper must not invert the name
    mapper = _archive_job_mapper(_cache(nova("nova"), nova("other"), nova(long_name)))

    def run(owner: str, kind: str = "CronJob", api: str = "batch/v1") -> dict[str, Any]:
        ref = {"apiVersion": api, "kind": kind, "name": owner, "uid": "u"}
        return {"metadata": {"name": f"{owner}-123", "namespace": "ns", "ownerReferences": [ref]}}

    assert mapper(run("nova-db-archive")) == [Request("ns", "nova")]
    from nova_operator import naming

    assert mapper(run(naming.db_archive_name(long_name))) == [Request("ns", long_name)]
    assert mapper(run("gone-db-archive")) == []
    assert mapper(run("nova-db-archive", kind="Deployment", api="apps/v1")) == []
    assert mapper({"metadata": {"name": "nova-db-sync", "namespace": "ns"}}) == []


class _Lister:
    """Answers a namespaced LIST per namespace: an exception class to raise, or nothing (a list)."""

    def __init__(self, answers: dict[str, type[Exception] | None]) -> None:
        self.answers, self.asked = answers, []  # type: list[str]

    async def list(self, ref: Any, namespace: str | None = None, **kw: Any) -> dict[str, Any]:
        assert namespace is not None  # never cluster-wide: that is refused in a --namespace install
        self.asked.append(namespace)
        error = self.answers[namespace]
        if error is not None:
            raise error(f"{error.__name__} in {namespace}")
        return {"metadata": {"resourceVersion": "1"}, "items": []}


async def test_a_namespaced_install_watches_rabbitmq_clusters_only_when_every_namespace_lists_them() -> None:
    from dataclasses import replace
    from typing import cast

    from nova_operator.kube.client import Kube
    from nova_operator.kube.errors import Forbidden, NotFound, Unreachable
    from nova_operator.reconcilers.nova.context import NovaOptions
    from nova_operator.reconcilers.nova.controller import probe_namespaces, watches_rabbitmq

    namespaced = NovaOptions(namespaced=True)
    ok = _Lister({"a": None, "b": None})
    probed = await probe_namespaces(cast(Kube, ok), namespaced, ["a", "b"])
    assert watches_rabbitmq(probed)
    assert ok.asked == ["a", "b"]
    for error in (NotFound, Forbidden, Unreachable):  # not served, not granted, or failing: GET per pass
        lister = _Lister({"a": None, "b": error})
        assert not watches_rabbitmq(await probe_namespaces(cast(Kube, lister), namespaced, ["a", "b"]))
    assert not watches_rabbitmq(
        await probe_namespaces(cast(Kube, ok), replace(namespaced, rabbitmq_api=False), ["a"])
    )
    cluster_wide = NovaOptions()
    assert await probe_namespaces(cast(Kube, _Lister({})), cluster_wide, []) is cluster_wide  # nothing asked


def _deployment(rv: str, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "nova-api", "namespace": "ns", "generation": 1, "resourceVersion": rv},
        "spec": {"replicas": 1},
        "status": {"observedGeneration": 1, "replicas": 1, **status},
    }


def test_an_owned_deployment_wakes_its_nova_on_readiness_moves_not_on_every_status_write() -> None:
    p = CHILD_EVENTS[DEPLOYMENTS]
    starting = _deployment("1", unavailableReplicas=1, conditions=[{"type": "Progressing", "status": "True"}])
    progressing = _deployment(
        "2",
        unavailableReplicas=1,
        conditions=[{"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated", "message": "m"}],
    )
    available = _deployment(
        "3",
        readyReplicas=1,
        availableReplicas=1,
        conditions=[{"type": "Progressing", "status": "True"}, {"type": "Available", "status": "True"}],
    )
    assert not p.update(starting, progressing)
    assert p.update(progressing, available)
    assert r.deployment_available(available)
    assert not r.deployment_available(progressing)


def test_every_owned_kind_with_a_status_filters_its_status_writes() -> None:
    """Kinds another controller writes the status of are filtered; the rest wake on every update."""
    with_status = {DEPLOYMENTS, JOBS, CRONJOBS, HTTPROUTES, SERVICES, PDBS, HPAS, DATABASES, USERS, GRANTS}
    assert set(CHILD_EVENTS) == with_status
    assert {*OWNED, HTTPROUTES, *MARIADB_CHILDREN} - with_status == {CONFIGMAPS, NETWORK_POLICIES}
    job = {"metadata": {"name": "j", "namespace": "ns", "resourceVersion": "1"}, "status": {"active": 1}}
    done = {
        "metadata": {"name": "j", "namespace": "ns", "resourceVersion": "2"},
        "status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]},
    }
    assert not CHILD_EVENTS[JOBS].update(
        job, {**job, "metadata": {**job["metadata"], "resourceVersion": "3"}, "status": {"ready": 1}}
    )
    assert CHILD_EVENTS[JOBS].update(job, done)
    pdb = {
        "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "1"},
        "status": {"currentHealthy": 0},
    }
    moved = {
        "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "2"},
        "status": {"currentHealthy": 1},
    }
    assert not CHILD_EVENTS[PDBS].update(pdb, moved)
    assert CHILD_EVENTS[PDBS].update(pdb, {**moved, "metadata": {**moved["metadata"], "labels": {"x": "y"}}})
