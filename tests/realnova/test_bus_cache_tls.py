"""Mutual TLS to the bus and TLS to the cache on the real Nova (issue 38 item 5).

A RabbitMQ of this module's own whose TLS listener requires a client certificate of the test CA
(``fail_if_no_peer_cert``), and a Debian memcached that listens with TLS only and requires a client
certificate too (``-Z``, ``ssl_verify_mode=2``), both on the pod bridge's gateway behind Services of
their own. A Nova of its own names them with ``spec.messaging.tls.clientCertSecretRef`` and
``spec.cache.tls`` (CA and client certificate); its pool (on ``compute-2``) reads the client
certificate from the compute contract. The Nova and the pool reach Ready, a server boots ACTIVE,
nova's connections to the broker present the client certificate, nova's cache traffic reached
memcached (its only listener is TLS), and so did Keystone's token cache: the token of an API call
is cached there by the API's keystonemiddleware (through python-binary-memcached, of the image
contract). Without the fields (before them) nothing here can connect: the broker and memcached
refuse a client without a certificate, which the module checks first.
"""

from __future__ import annotations

import base64
import hashlib
import os
import pathlib
import secrets
import socket
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
import yaml
from simcluster import SimHandle
from simcluster.client.kube import KubeError
from simcluster.platform.controlplane import REPO, free_port
from simcluster.realtier.services.memcached import MemcachedServer
from simcluster.realtier.services.pki import PKI, make_pki
from simcluster.realtier.services.rabbitmq import RabbitMQServer, amqp_answers

from tests.realnova.cloud import request, upload_image
from tests.realnova.own_nova import NOVAS, POOLS, OwnNova, secret, wait_ready
from tests.realnova.own_nova import _gone as gone
from tests.realnova.realcluster import (
    JSON,
    NAMESPACE,
    SAMPLES,
    OpenStackClient,
    compute_url,
    tier_extra_config,
    wait_for,
)

pytestmark = pytest.mark.realnova

OWN = OwnNova("nova-mtls", "mtls")
RELEASE = "2026.1"
BUS_SERVICE, CACHE_SERVICE = "rabbitmq-mtls", "memcached-tls"
CACHE_HOST = f"{CACHE_SERVICE}.{NAMESPACE}.svc"
FLAVOR = {"name": "mtls.tiny", "ram": 128, "vcpus": 1, "disk": 1}


@dataclass
class Site:
    handle: SimHandle
    pki: PKI
    broker: RabbitMQServer
    cache: MemcachedServer
    bus_user: str
    client: OpenStackClient | None = None
    server: JSON = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


def _pem_secret(name: str, files: dict[str, pathlib.Path]) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "data": {k: base64.b64encode(p.read_bytes()).decode() for k, p in files.items()},
    }


def _nova() -> JSON:
    nova = OWN.nova(RELEASE)
    spec = nova["spec"]
    spec["messaging"] = {
        "secretRef": {"name": f"{OWN.name}-bus"},
        "tls": {
            "caBundleSecretRef": {"name": f"{OWN.name}-ca"},
            "clientCertSecretRef": {"name": f"{OWN.name}-client-cert"},
        },
    }
    spec["cache"] = {
        "servers": [f"{CACHE_HOST}:11211"],
        "tls": {
            "caBundleSecretRef": {"name": f"{OWN.name}-ca"},
            "clientCertSecretRef": {"name": f"{OWN.name}-client-cert"},
        },
    }
    spec["extraConfig"] = tier_extra_config()
    return nova


@pytest.fixture(scope="module")
def site(cluster: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    handle = cluster
    real = handle.real
    assert real is not None
    kube = handle.cluster.kube
    work = pathlib.Path(tmp_path_factory.mktemp("mtls"))
    pki = make_pki(work / "pki", dns=(f"{BUS_SERVICE}.{NAMESPACE}.svc", CACHE_HOST), ips=(real.gateway,))
    broker = RabbitMQServer(
        work / "rabbitmq",
        address=real.gateway,
        port=free_port(),
        node="rabbit-mtls@localhost",
        dist_port=free_port(),
        epmd_port=free_port(),
        tls=pki.server_files(),
        tls_port=free_port(),
        client=pki.client,
    )
    cache = MemcachedServer(
        work / "memcached", address=real.gateway, port=free_port(), tls=pki.server_files(), client=pki.client
    )
    bus_user, bus_password = OWN.prefix, secrets.token_urlsafe(18)
    s = Site(handle, pki, broker, cache, bus_user)
    try:
        broker.start()
        cache.start()
        broker.ensure_user(bus_user, bus_password)
        real.expose(NAMESPACE, BUS_SERVICE, 5671, broker.tls_port)
        real.expose(NAMESPACE, CACHE_SERVICE, 11211, cache.port)
        # the backing services' objects, and the samples' shared Secrets (service user, metadata
        # proxy) where no module made them yet: a module before this one may have rotated them
        handle.apply(REPO / "tools" / "simcluster" / "samples" / "dependencies.yaml", namespace=NAMESPACE)
        _sample_secrets_once(handle)
        url = f"rabbit://{bus_user}:{bus_password}@{BUS_SERVICE}.{NAMESPACE}.svc:5671/"
        for doc in (
            secret(
                f"{OWN.name}-api-db", {"username": f"{OWN.prefix}_api", "password": secrets.token_urlsafe(18)}
            ),
            secret(f"{OWN.name}-cell-db", {"username": OWN.prefix, "password": secrets.token_urlsafe(18)}),
            secret(f"{OWN.name}-bus", {"transport_url": url}),
            _pem_secret(f"{OWN.name}-ca", {"ca.crt": pki.ca.cert}),
            _pem_secret(f"{OWN.name}-client-cert", {"tls.crt": pki.client.cert, "tls.key": pki.client.key}),
        ):
            kube.apply(doc, NAMESPACE)
        t0 = time.monotonic()
        kube.apply(_nova(), NAMESPACE)
        kube.apply(OWN.pool_body(work), NAMESPACE)
        wait_ready(handle, "novas", OWN.name, 480, "the mutual-TLS Nova Ready")
        s.seconds["Nova Ready"] = time.monotonic() - t0
        wait_ready(handle, "novacomputes", OWN.pool, 300, "the mutual-TLS pool Ready")
        s.seconds["pool Ready"] = time.monotonic() - t0
        s.client = OpenStackClient(handle, compute_url(handle, OWN.name))
        s.server = _boot(s)
        s.seconds["server ACTIVE"] = time.monotonic() - t0
        yield s
    finally:
        print(f"bus and cache TLS: seconds {s.seconds}")
        _tear_down(s)


def _sample_secrets_once(handle: SimHandle) -> None:
    """Each Secret of the samples' ``secrets.yaml`` that does not exist yet (one that does stays)."""
    kube = handle.cluster.kube
    for doc in yaml.safe_load_all((SAMPLES / "secrets.yaml").read_text()):
        try:
            kube.get(f"/api/v1/namespaces/{NAMESPACE}/secrets/{doc['metadata']['name']}")
        except KubeError as exc:
            if exc.status != 404:
                raise
            kube.apply(doc, NAMESPACE)


def _boot(s: Site) -> JSON:
    """A server boots ACTIVE (networks none) on the pool; the server as shown once ACTIVE."""
    real = s.handle.real
    assert real is not None
    assert s.client is not None
    client = s.client
    image = upload_image(real.openstack.glance_url, client.token(), "mtls", os.urandom(64 * 1024))
    flavor = client.call("POST", "/flavors", {"flavor": FLAVOR})["flavor"]["id"]
    body = {"server": {"name": "mtls-1", "imageRef": image, "flavorRef": flavor, "networks": "none"}}
    sid = client.call("POST", "/servers", body, microversion="2.37")["server"]["id"]

    def active() -> JSON | None:
        server = client.server(sid) or {}
        if server.get("status") == "ERROR":
            raise AssertionError(f"server in ERROR: {client.fault(sid)}")
        return (
            server if server.get("status") == "ACTIVE" and not server.get("OS-EXT-STS:task_state") else None
        )

    server = wait_for(active, within=240, what="the server ACTIVE", handle=s.handle)
    server["_flavor"], server["_image"] = flavor, image
    return server


def _tear_down(s: Site) -> None:
    """The server, flavor and image; the pool, then the Nova, with their pods; the servers last."""
    handle = s.handle
    real = handle.real
    assert real is not None
    try:
        if s.client is not None and s.server:
            client = s.client
            client.call("DELETE", f"/servers/{s.server['id']}")
            wait_for(lambda: client.server(s.server["id"]) is None or None, within=120, what="server deleted")
            client.call("DELETE", f"/flavors/{s.server['_flavor']}")
            request(
                "DELETE",
                f"{real.openstack.glance_url}/v2/images/{s.server['_image']}",
                headers={"X-Auth-Token": client.token()},
            )
        for path, instance in ((f"{POOLS}/{OWN.pool}", OWN.pool), (f"{NOVAS}/{OWN.name}", OWN.name)):
            try:
                handle.cluster.kube.delete(path)
            except KubeError as exc:
                if exc.status != 404:
                    raise
            wait_for(
                lambda: gone(handle, path, instance) or None,  # noqa: B023 (called in this iteration)
                within=240,
                what=f"{instance} and its pods gone",
                handle=handle,
            )
    finally:
        s.cache.stop()
        s.broker.stop()


def _memcached_ask(cache: MemcachedServer, command: str) -> bytes:
    """memcached's answer to one text-protocol command ending in ``END``, over TLS with the client
    certificate."""
    context = cache.client_context()
    raw = socket.create_connection((cache.address, cache.port), timeout=5)
    with context.wrap_socket(raw, server_hostname=cache.address) as s:
        s.sendall(command.encode() + b"\r\n")
        text = b""
        while not text.endswith(b"END\r\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            text += chunk
    return text


def _memcached_stats(cache: MemcachedServer) -> dict[str, int]:
    """memcached's ``stats`` (integer values)."""
    text = _memcached_ask(cache, "stats")
    stats = {}
    for line in text.decode().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "STAT" and parts[2].isdigit():
            stats[parts[1]] = int(parts[2])
    return stats


def test_the_broker_and_memcached_refuse_a_client_without_a_certificate(site: Site) -> None:
    """What the Nova's pods would meet without the client certificate fields (the state before them)."""
    broker, cache, ca = site.broker, site.cache, str(site.pki.ca.cert)
    without = ssl.create_default_context(cafile=ca)
    assert not amqp_answers(broker.address, broker.tls_port, tls=without)
    assert amqp_answers(broker.address, broker.tls_port, tls=broker.client_context())
    assert not cache.answers(None)  # TLS only: a plaintext client gets no answer
    assert not cache.answers(cache.client_context(present=False))
    assert cache.answers(cache.client_context())


def test_the_nova_and_its_pool_are_ready_and_a_server_boots(site: Site) -> None:
    assert site.server["status"] == "ACTIVE"
    assert site.server["OS-EXT-SRV-ATTR:host"], site.server
    kube = site.handle.cluster.kube
    contract = kube.get(f"/api/v1/namespaces/{NAMESPACE}/secrets/{OWN.name}-compute-config")
    fragment = base64.b64decode(contract["data"]["nova-compute.conf"]).decode()
    assert "ssl_cert_file = /etc/nova/compute-config/tls.crt" in fragment
    assert base64.b64decode(contract["data"]["tls.crt"]) == site.pki.client.cert.read_bytes()


def test_novas_bus_connections_present_the_client_certificate(site: Site) -> None:
    """Every connection of the Nova's bus user (API, scheduler, conductor, compute) is TLS and shows
    the client certificate's subject."""
    listing = site.broker.ctl("list_connections", "--no-table-headers", "user", "ssl", "peer_cert_subject")
    rows = [line.split("\t") for line in listing.splitlines() if line.strip()]
    ours = [r for r in rows if r and r[0] == site.bus_user]
    assert len(ours) >= 3, listing  # at least the scheduler, the conductor and nova-compute
    assert all(r[1] == "true" and "CN=client" in r[2] for r in ours), listing


def test_novas_cache_traffic_reaches_the_tls_only_memcached(site: Site) -> None:
    """nova's [cache] region (the availability zone of a server's host, read when a server is shown)
    got and set keys on the TLS-only memcached."""
    assert site.client is not None
    site.client.call("GET", f"/servers/{site.server['id']}")
    stats = _memcached_stats(site.cache)
    assert stats.get("cmd_get", 0) > 0, stats
    assert stats.get("cmd_set", 0) > 0, stats


def test_keystones_token_cache_reaches_the_tls_only_memcached(site: Site) -> None:
    """The API's keystonemiddleware cached the token of an API call in memcached, under its key
    ``tokens/<sha256 of the token>`` (``memcache_security_strategy`` unset): its TLS client
    (python-binary-memcached) reached the TLS-only listener with the client certificate. Before,
    under ``spec.cache.tls`` the token cache stayed in each API process and memcached held no such key."""
    assert site.client is not None
    site.client.call("GET", f"/servers/{site.server['id']}")
    key = "tokens/" + hashlib.sha256(site.client.token().encode()).hexdigest()
    answer = _memcached_ask(site.cache, f"get {key}")
    header = answer.split(b"\r\n", 1)[0].decode()
    assert header.startswith(f"VALUE {key} "), answer[:200]
    assert int(header.split()[3]) > 0, header  # the cached token data's length
