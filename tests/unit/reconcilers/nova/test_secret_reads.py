"""Issue 26 item 2: the Secrets cache keeps the data of the Secrets a Nova or a pool reads, no more.

``secret_reads.reads`` (the Nova controller) and ``compute.controller.pool_reads`` (the NovaCompute
controller) decide which Secrets of a covered namespace are kept whole; the others are held as
references. A pass that needs a withheld Secret reads it once and hands it to the cache; a Nova
that stops naming a Secret has it narrowed again. A pass's read of a withheld Secret runs on the
real API server (``tests/integration/nova/test_secret_cache.py``).
"""

from __future__ import annotations

import copy
from typing import Any, cast

from nova_operator.kube import Kube
from nova_operator.kube.resources import NOVACOMPUTES, NOVAS, RABBITMQ_CLUSTERS, SECRETS
from nova_operator.metrics import Metrics
from nova_operator.models.nova import Nova
from nova_operator.reconcilers.compute.context import NOVA_REF_INDEX, ComputeSettings
from nova_operator.reconcilers.compute.controller import (
    COMPUTE_READS_INDEX,
    POOL_SECRETS_INDEX,
    _by_nova_ref,
    _compute_reads,
    _pool_secrets,
    make_controller,
    pool_reads,
)
from nova_operator.reconcilers.nova.context import NovaOptions
from nova_operator.reconcilers.nova.controller import make_controller_factory
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
from nova_operator.renderers import secrets as derived
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.informer import Informer
from nova_operator.runtime.manager import Manager
from nova_operator.runtime.request import Request
from nova_operator.runtime.transform import ALL
from tests.novas import nova_object

NS = "ns"


BIG = "QUJD" * 1024


def secret(name: str, rv: str = "1", ns: str = NS) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": ns, "resourceVersion": rv, "uid": f"u-{name}"},
        "data": {"password": BIG},
    }


def rabbit(name: str, user_secret: str, namespace: str | None = None) -> dict[str, Any]:
    ref: dict[str, str] = {"name": user_secret}
    if namespace is not None:
        ref["namespace"] = namespace
    return {
        "apiVersion": RABBITMQ_CLUSTERS.api_version,
        "kind": "RabbitmqCluster",
        "metadata": {"name": name, "namespace": NS, "resourceVersion": "1"},
        "status": {"defaultUser": {"secretReference": ref}},
    }


def novas_cache(*novas: dict[str, Any]) -> Cache:
    cache = Cache(str(NOVAS))
    cache.add_index(SECRET_INDEX, secret_refs)
    cache.add_index(CLUSTER_INDEX, messaging_cluster)
    for nova in novas:
        cache.upsert(copy.deepcopy(nova))
    return cache


def clusters_cache(*clusters: dict[str, Any]) -> Cache:
    cache = Cache(str(RABBITMQ_CLUSTERS))
    cache.add_index(DEFAULT_USER_INDEX, default_user)
    for cluster in clusters:
        cache.upsert(cluster)
    return cache


def test_a_nova_reads_what_its_spec_names_and_what_it_derives_and_nothing_else() -> None:
    admits = reads(novas_cache(nova_object(NS)), None)
    for name in ("api-db", "cell-db", "bus", "service-user", "metadata-proxy"):
        assert admits(secret(name)), name
    for name in ("nova-transport-url", "nova-digest-key", "nova-db-connection", "nova-compute-config"):
        assert admits(secret(name)), name
    for name in ("sh.helm.release.v1.web.v1", "other-transport-url", "api-db-x", "nova"):
        assert not admits(secret(name)), name
    assert not admits(secret("api-db", ns="elsewhere"))  # names are read in the Nova's own namespace


def test_every_secret_the_renderers_derive_is_read() -> None:
    nova = Nova.model_validate(nova_object(NS))
    admits = reads(novas_cache(nova_object(NS)), None)
    rendered = [
        derived.dsn_secret(nova, "api", "mysql+pymysql://u:p@h:3306/nova_api"),
        derived.dsn_secret(nova, "cell", "mysql+pymysql://u:p@h:3306/nova"),
        derived.transport_url_secret(nova, "rabbit://u:p@h:5672/"),
        derived.digest_key_secret(nova, "k"),
        derived.oslo_credentials_secret(nova, password="p", metadata_secret="m"),
        derived.compute_config_secret(
            nova, fragment="", transport_url="rabbit://u:p@h:5672/", password="p", metadata_secret="m"
        ),
        derived.compute_config_secret(
            nova,
            fragment="",
            transport_url="rabbit://u:p@h:5672/",
            password="p",
            metadata_secret="m",
            remote=True,
        ),
    ]
    for obj in rendered:
        assert admits(obj), obj["metadata"]["name"]


def test_the_default_user_of_a_cluster_is_read_only_while_a_nova_names_the_cluster() -> None:
    on_cluster = copy.deepcopy(nova_object(NS))
    on_cluster["spec"]["messaging"] = {"clusterRef": {"name": "bus"}}
    clusters = clusters_cache(rabbit("bus", "bus-default-user"), rabbit("other", "other-default-user"))
    admits = reads(novas_cache(on_cluster), clusters)
    assert admits(secret("bus-default-user"))
    assert not admits(secret("other-default-user"))  # no Nova uses that cluster
    elsewhere = clusters_cache(rabbit("bus", "bus-default-user", namespace="other-ns"))
    assert not reads(novas_cache(on_cluster), elsewhere)(secret("bus-default-user"))


def informer(ref: Any) -> Informer:
    """An informer whose events the test delivers (``_apply``); it never lists nor watches."""
    return Informer(cast(Any, None), ref)


def test_a_secret_a_nova_stops_naming_is_narrowed_at_once() -> None:
    nova = nova_object(NS)
    novas = informer(NOVAS)
    novas.cache.add_index(SECRET_INDEX, secret_refs)
    novas.cache.add_index(CLUSTER_INDEX, messaging_cluster)
    secrets = informer(SECRETS)
    secrets.keep(ALL, when=reads(novas.cache, None))
    novas.add_handler(Narrower(secrets))
    novas._apply("ADDED", copy.deepcopy(nova))
    for name in ("bus", "nova-transport-url", "helm"):
        secrets._apply("ADDED", secret(name))
    assert [k.name for k in secrets.cache.list_keys() if secrets.cache.withheld(k)] == ["helm"]
    edited = copy.deepcopy(nova)
    edited["metadata"]["resourceVersion"] = "2"
    edited["spec"]["messaging"] = {"secretRef": {"name": "bus-v2"}}
    novas._apply("MODIFIED", edited)
    assert secrets.cache.withheld(Request(NS, "bus"))
    assert not secrets.cache.withheld(Request(NS, "nova-transport-url"))  # still derived
    novas._apply("DELETED", edited)
    assert [k.name for k in secrets.cache.list_keys() if not secrets.cache.withheld(k)] == []


class NoKube:
    def __init__(self) -> None:
        self.metrics = Metrics()


def test_the_operator_keeps_the_data_of_read_secrets_only() -> None:
    manager = Manager(cast(Kube, NoKube()))
    make_controller_factory(NovaOptions(rabbitmq_api=True))(manager)
    make_controller(manager, ComputeSettings())
    secrets = next(inf for inf in manager.informers if inf.ref == SECRETS)  # declaring nothing more
    assert not secrets.transform.apply(secret("api-db"))[1]  # no Nova yet
    manager.informer(NOVAS).cache.upsert(nova_object(NS))
    kept, whole = secrets.transform.apply(secret("api-db"))
    assert whole
    assert kept["data"] == {"password": BIG}
    kept, whole = secrets.transform.apply(secret("sh.helm.release.v1.web.v1"))
    assert not whole
    assert "data" not in kept


def pool(name: str, nova: str) -> dict[str, Any]:
    return {
        "apiVersion": NOVACOMPUTES.api_version,
        "kind": "NovaCompute",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"novaRef": {"name": nova}},
    }


def test_a_pool_reads_its_novas_service_user_and_contract_only() -> None:
    pools = Cache(str(NOVACOMPUTES))
    pools.add_index(NOVA_REF_INDEX, _by_nova_ref)
    pools.add_index(POOL_SECRETS_INDEX, _pool_secrets)
    novas = Cache(str(NOVAS))
    novas.add_index(COMPUTE_READS_INDEX, _compute_reads)
    nova = nova_object(NS)
    nova["status"] = {"computeConfigSecretRef": {"name": "published-contract"}}
    novas.upsert(nova)
    admits = pool_reads(pools, novas)
    assert not admits(secret("service-user"))  # no pool of that Nova yet
    pools.upsert(pool("pool-a", "nova"))
    assert admits(secret("service-user"))
    assert admits(secret("published-contract"))
    assert admits(secret("nova-compute-config"))  # the contract (or its mirror), by name
    assert not admits(secret("api-db"))  # the Nova reads it, not a pool
    assert not admits(secret("other-compute-config"))


def test_a_nova_that_leaves_its_cluster_has_the_default_user_narrowed() -> None:
    on_cluster = nova_object(NS)
    on_cluster["spec"]["messaging"] = {"clusterRef": {"name": "bus"}}
    clusters = clusters_cache(rabbit("bus", "bus-default-user"))
    novas = informer(NOVAS)
    novas.cache.add_index(SECRET_INDEX, secret_refs)
    novas.cache.add_index(CLUSTER_INDEX, messaging_cluster)
    secrets = informer(SECRETS)
    secrets.keep(ALL, when=reads(novas.cache, clusters))
    novas.add_handler(Narrower(secrets, clusters))
    novas._apply("ADDED", copy.deepcopy(on_cluster))
    secrets._apply("ADDED", secret("bus-default-user"))
    assert not secrets.cache.withheld(Request(NS, "bus-default-user"))
    edited = copy.deepcopy(on_cluster)
    edited["spec"]["messaging"] = {"secretRef": {"name": "bus"}}
    novas._apply("MODIFIED", edited)
    assert secrets.cache.withheld(Request(NS, "bus-default-user"))


def test_the_https_ca_bundles_are_read_the_novas_and_a_pools_own() -> None:
    """Issue 38 item 1: ``spec.tls.caBundleSecretRef`` of a Nova and of a pool is kept whole (its
    rotation must reach the pass that digests it), and nothing else is admitted with it."""
    with_tls = nova_object(NS, tls={"caBundleSecretRef": {"name": "internal-ca"}})
    assert reads(novas_cache(with_tls), None)(secret("internal-ca"))
    assert not reads(novas_cache(nova_object(NS)), None)(secret("internal-ca"))
    pools = Cache(str(NOVACOMPUTES))
    pools.add_index(NOVA_REF_INDEX, _by_nova_ref)
    pools.add_index(POOL_SECRETS_INDEX, _pool_secrets)
    novas = Cache(str(NOVAS))
    novas.add_index(COMPUTE_READS_INDEX, _compute_reads)
    novas.upsert(nova_object(NS))
    admits = pool_reads(pools, novas)
    own = pool("pool-a", "nova")
    own["spec"]["tls"] = {"caBundleSecretRef": {"name": "rack-ca", "key": "bundle.pem"}}
    assert not admits(secret("rack-ca"))
    pools.upsert(own)
    assert admits(secret("rack-ca"))
    assert pools.by_index(POOL_SECRETS_INDEX, f"{NS}/rack-ca")  # its rotation wakes that pool
    assert not admits(secret("other-ca"))


def test_a_pools_copy_of_its_bundle_is_read_whole() -> None:
    """Issue 36 §5: the pool's ``--secret-ref-label`` copy of its ``spec.tls`` bundle is kept with its
    data, so a converged pass compares it from the cache and sends nothing (another pool's is not)."""
    pools = Cache(str(NOVACOMPUTES))
    pools.add_index(NOVA_REF_INDEX, _by_nova_ref)
    pools.add_index(POOL_SECRETS_INDEX, _pool_secrets)
    novas = Cache(str(NOVAS))
    novas.add_index(COMPUTE_READS_INDEX, _compute_reads)
    admits = pool_reads(pools, novas)
    copy = compute_pool.checked_ca_name("pool-a")
    assert copy == "pool-a-nova-compute-checked-https-ca"
    assert not admits(secret(copy))
    pools.upsert(pool("pool-a", "nova"))
    assert admits(secret(copy))
    assert not admits(secret(compute_pool.checked_ca_name("pool-b")))
