"""``config/samples/nova_full.yaml`` through the real Nova, with its Secrets.

What the sample names outside the cluster is provided as a site would: a brownfield MariaDB at
``db.example.org:3307`` speaking TLS whose users must present a client certificate (``REQUIRE
X509``), a brownfield RabbitMQ at ``rabbitmq.example.org:5671`` with TLS, memcached at the pod names
of a headless Service, the ClusterSecretStore the sample names (Ready, as External Secrets would
report it), the Gateway ``gateways/public-gateway``, and the nodes its API pods select. The sample's
Secrets are applied as they are, but for the CA bundles and the client certificate, which a site
fills with real ones (the test PKI's). Then the sample is Ready: every role runs, over TLS, with
the uWSGI options it sets (``httpKeepAliveTimeout: 30``, which once crash-looped the API).
"""

from __future__ import annotations

import base64
import pathlib
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from simcluster import SimHandle
from simcluster.controlplane import REPO, free_port
from simcluster.realservices.mariadb import MariaDBServer
from simcluster.realservices.pki import PKI, make_pki
from simcluster.realservices.rabbitmq import RabbitMQServer

from tests.realnova.realcluster import (
    NAMESPACE,
    SAMPLES,
    OpenStackClient,
    compute_url,
    is_ready,
    not_ready_summary,
    pods,
    sample_secret,
    wait_for,
)

pytestmark = pytest.mark.realnova
FULL = "nova-full"
STORE_CRDS = REPO / "tests" / "integration" / "nova" / "crds" / "external-secrets-stores.yaml"
EXTERNAL = ("db.example.org", "rabbitmq.example.org", "rabbitmq-external.example.org")


def _site_secrets(pki: PKI) -> list[dict[str, object]]:
    """The sample's CA bundles and client certificate, filled with the site's (the test PKI's)."""

    def secret(name: str, data: dict[str, pathlib.Path]) -> dict[str, object]:
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "data": {k: base64.b64encode(p.read_bytes()).decode() for k, p in data.items()},
        }

    return [
        secret("db-ca", {"ca.crt": pki.ca.cert}),
        secret("rabbitmq-ca", {"ca.crt": pki.ca.cert}),
        secret("nova-db-client-cert", {"tls.crt": pki.client.cert, "tls.key": pki.client.key}),
    ]


@dataclass
class Site:
    """The full sample's cluster and the site's servers outside it."""

    handle: SimHandle
    db: MariaDBServer
    broker: RabbitMQServer


@pytest.fixture(scope="module")
def full(minimal: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """The full sample and everything it names outside the cluster; Ready."""
    handle = minimal  # the same cluster; the minimal sample keeps running beside it
    real = handle.real
    assert real is not None
    kube = handle.cluster.kube
    work = pathlib.Path(tmp_path_factory.mktemp("full"))
    pki = make_pki(work / "pki", dns=EXTERNAL, ips=(real.gateway,))
    db = MariaDBServer(work / "mariadb", address=real.gateway, port=free_port(), tls=pki.server_files())
    broker = RabbitMQServer(
        work / "rabbitmq",
        address=real.gateway,
        port=free_port(),
        dist_port=free_port(),
        epmd_port=free_port(),
        tls=pki.server_files(),
        tls_port=free_port(),
    )
    try:
        db.start()
        broker.start()
        # the site's databases and users, as the sample's Secrets name them
        for schema in ("nova_api", "nova", "nova_cell0"):
            db.create_database(schema, charset="utf8mb3", collation="utf8mb3_general_ci")
        users = {
            "nova-api-db-credentials": ("nova_api",),
            "nova-cell-db-credentials": ("nova", "nova_cell0"),
        }
        for secret, schemas in users.items():
            user = sample_secret(secret, "username")
            db.ensure_user(user, sample_secret(secret, "password"), require="X509")
            for schema in schemas:
                db.grant(["ALL PRIVILEGES"], schema, "*", user, grant_option=False)
        transport = sample_secret("rabbitmq-transport-url", "transport_url")
        bus_user, bus_password = transport.split("://", 1)[1].split("@", 1)[0].split(":", 1)
        broker.ensure_user(bus_user, bus_password)
        real.expose(NAMESPACE, "external-db", 3307, db.port)
        real.expose(NAMESPACE, "external-rabbitmq", 5671, broker.tls_port)
        real.alias("db.example.org", NAMESPACE, "external-db")
        real.alias("rabbitmq.example.org", NAMESPACE, "external-rabbitmq")
        for i in (0, 1):
            real.alias(f"memcached-{i}.memcached.{NAMESPACE}.svc", NAMESPACE, "memcached")
        # the ClusterSecretStore the sample names, Ready as External Secrets reports it
        handle.apply(STORE_CRDS)
        store = {
            "apiVersion": "external-secrets.io/v1",
            "kind": "ClusterSecretStore",
            "metadata": {"name": "openbao-cluster-store"},
            "spec": {"provider": {"fake": {"data": []}}},
        }
        kube.apply(store)
        kube.patch(
            "/apis/external-secrets.io/v1/clustersecretstores/openbao-cluster-store/status",
            {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Valid"}]}},
        )
        kube.apply(
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "Gateway",
                "metadata": {"name": "public-gateway", "namespace": "gateways"},
                "spec": {
                    "gatewayClassName": _gateway_class(),
                    "listeners": [
                        {"name": "http", "port": 80, "protocol": "HTTP", "allowedRoutes": _all()},
                        {"name": "https", "port": 8080, "protocol": "HTTP", "allowedRoutes": _all()},
                    ],
                },
            },
            "gateways",
        )
        for doc in _site_secrets(pki):
            kube.apply(doc, NAMESPACE)
        handle.apply(SAMPLES / "nova_full.yaml", namespace=NAMESPACE)
        wait_for(
            lambda: is_ready(handle, "novas", FULL) or None,
            within=420,
            what="the full sample Ready",
            handle=handle,
            detail=lambda: not_ready_summary(handle, "novas", FULL),
        )
        yield Site(handle, db, broker)
        # the Nova goes before the site's servers do, so no pod of it is left without them
        kube.delete(f"/apis/nova.openstack.c5c3.io/v1alpha1/namespaces/{NAMESPACE}/novas/{FULL}")
        wait_for(
            lambda: not pods(handle, selector=f"app.kubernetes.io/instance={FULL}") or None,
            within=300,  # the conductor's grace period is 240 s
            what="the full sample's pods gone after its deletion",
            handle=handle,
        )
    finally:
        broker.stop()
        db.stop()


def _all() -> dict[str, object]:
    return {"namespaces": {"from": "All"}}


def _gateway_class() -> str:
    from simcluster.standins import GATEWAY_CLASS

    return GATEWAY_CLASS


def test_the_full_sample_runs_every_role_with_its_replicas(full: Site) -> None:
    kube = full.handle.cluster.kube
    for role, want in (("", 3), ("-metadata", 2), ("-scheduler", 2), ("-conductor", 2), ("-novncproxy", 2)):
        dep = kube.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{FULL}{role}")
        assert dep["status"].get("availableReplicas") == want, (role, dep["status"])
    api_pods = _pods(full, "api")
    assert {p["spec"]["nodeName"] for p in api_pods} <= {"control-0", "control-1"}  # its nodeSelector
    container = api_pods[0]["spec"]["containers"][0]
    argv = [*container.get("command", []), *container.get("args", [])]
    assert "--http-keepalive=30" in argv, argv  # httpKeepAliveTimeout: 30, in the form uWSGI 2.0 takes
    assert all(cs["restartCount"] == 0 for p in api_pods for cs in p["status"]["containerStatuses"])


def test_the_full_samples_service_list_has_a_row_per_scheduler_and_conductor_pod(full: Site) -> None:
    client = OpenStackClient(full.handle, compute_url(full.handle, FULL))
    services = client.services()
    for binary, role in (("nova-scheduler", "scheduler"), ("nova-conductor", "conductor")):
        names = {p["metadata"]["name"] for p in _pods(full, role)}
        rows = [s for s in services if s["binary"] == binary]
        assert {s["host"] for s in rows} == names, rows
        assert all(s["state"] == "up" for s in rows), rows


def test_the_full_sample_talks_to_the_sites_database_and_broker_over_tls(full: Site) -> None:
    """Both users must present the sample's client certificate (REQUIRE X509): any connection they
    hold is TLS with it; nova's connections to the broker arrive on its TLS listener only."""
    for secret in ("nova-api-db-credentials", "nova-cell-db-credentials"):
        assert full.db.connections_of(sample_secret(secret, "username")) > 0, secret
    listing = full.broker.ctl("list_connections", "--no-table-headers", "user", "port", "ssl")
    rows = [line.split() for line in listing.splitlines() if line.strip()]
    nova = [r for r in rows if r and r[0] == "nova"]
    assert nova, listing
    assert all(r[1] == str(full.broker.tls_port) and r[2] == "true" for r in nova), listing


def _pods(full: Site, role: str) -> list[dict[str, object]]:
    selector = f"app.kubernetes.io/instance={FULL},app.kubernetes.io/component={role}"
    return [p for p in pods(full.handle, selector=selector) if not p["metadata"].get("deletionTimestamp")]
