"""The Nova over TLS of ``test_tls_nova.py`` and what it is served by (issue 38, items 1 and 5).

One Nova of its own (``nova-tls``, 2026.1), one bring-up, for both items:

- a second real Keystone (same database and fernet keys as the tier's), served by uWSGI over HTTPS
  behind the Service ``keystone-https`` with a certificate of a CA made here (``https_pki``); its
  region ``RegionTLS`` lists the identity endpoint as that https URL (so keystonemiddleware
  validates tokens over HTTPS too) beside the tier's Placement, Glance and network endpoints. The
  Nova names it as ``keystoneEndpoint`` and ``region``, first without ``spec.tls``;
- a RabbitMQ of its own whose TLS listener requires a client certificate of another test CA
  (``bus_pki``; ``fail_if_no_peer_cert``), and a Debian memcached that listens with TLS only and
  requires a client certificate too (``-Z``, ``ssl_verify_mode=2``), both on the host's loopback
  behind Services of their own (``RealTier.expose``). The Nova names them with
  ``spec.messaging.tls.clientCertSecretRef`` and ``spec.cache.tls`` (CA and client certificate);
  its pool (on ``compute-2``) reads the client certificate from the compute contract.
"""

from __future__ import annotations

import base64
import pathlib
import secrets
import socket
import time
import urllib.error
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import yaml
from simcluster import SimHandle
from simcluster.client.kube import KubeError
from simcluster.platform.controlplane import REPO, free_port
from simcluster.realtier.services.memcached import MemcachedServer
from simcluster.realtier.services.pki import PKI, make_pki
from simcluster.realtier.services.rabbitmq import RabbitMQServer

from tests.realnova.cloud import request
from tests.realnova.own_nova import NOVAS, POOLS, OwnNova, delete_to_the_end, secret
from tests.realnova.realcluster import (
    JSON,
    NAMESPACE,
    QUICK_SHUTDOWN,
    SAMPLES,
    OpenStackClient,
    conditions,
    wait_for,
)

OWN = OwnNova("nova-tls", "tls")
RELEASE = "2026.1"
SERVICE = "keystone-https"
HTTPS_URL = f"https://{SERVICE}.{NAMESPACE}.svc:5000/v3"
REGION = "RegionTLS"
CA_SECRET = "nova-tls-ca"  # spec.tls.caBundleSecretRef: the bundle trusting Keystone's certificate
BUS_CA_SECRET = "nova-tls-bus-ca"  # the bus's and the cache's CA
CLIENT_CERT_SECRET = "nova-tls-client-cert"
BUS_SERVICE, CACHE_SERVICE = "rabbitmq-mtls", "memcached-tls"
CACHE_HOST = f"{CACHE_SERVICE}.{NAMESPACE}.svc"
APPS = f"/apis/apps/v1/namespaces/{NAMESPACE}"
DEPLOYMENTS = tuple(f"{OWN.name}{suffix}" for suffix in ("", "-metadata", "-scheduler", "-conductor"))


@dataclass
class Site:
    handle: SimHandle
    https_pki: PKI
    bus_pki: PKI
    broker: RabbitMQServer
    cache: MemcachedServer
    bus_user: str
    workdir: pathlib.Path
    untrusted: JSON = field(default_factory=dict)  # SecretsReady without spec.tls
    client: OpenStackClient | None = None
    image: str = ""
    flavor: str = ""
    server: JSON = field(default_factory=dict)  # as shown once ACTIVE
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def kube(self) -> Any:
        return self.handle.cluster.kube


def pem_secret(name: str, files: dict[str, pathlib.Path]) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "data": {k: base64.b64encode(p.read_bytes()).decode() for k, p in files.items()},
    }


def ca_secret(bundle: str) -> JSON:
    return secret(CA_SECRET, {"ca.crt": bundle})


def nova_body() -> JSON:
    """The Nova: Keystone over HTTPS (no ``spec.tls`` yet), mutual TLS to the bus and the cache."""
    nova = OWN.nova(RELEASE)
    spec = nova["spec"]
    spec["keystoneEndpoint"] = HTTPS_URL
    spec["region"] = REGION
    bus_tls = {
        "caBundleSecretRef": {"name": BUS_CA_SECRET},
        "clientCertSecretRef": {"name": CLIENT_CERT_SECRET},
    }
    spec["messaging"] = {"secretRef": {"name": f"{OWN.name}-bus"}, "tls": dict(bus_tls)}
    spec["cache"] = {"servers": [f"{CACHE_HOST}:11211"], "tls": dict(bus_tls)}
    spec["extraConfig"] = {s: dict(o) for s, o in QUICK_SHUTDOWN.items()}
    return nova


@contextmanager
def tls_site(handle: SimHandle, workdir: pathlib.Path) -> Iterator[Site]:
    """The servers up, the Nova applied without ``spec.tls`` and its ``SecretsReady`` False on the
    untrusted certificate (``Site.untrusted``); at the end, all of it gone."""
    real = handle.real
    assert real is not None
    osv = real.openstack
    kube = handle.cluster.kube
    names = (f"{SERVICE}.{NAMESPACE}.svc", f"{SERVICE}.{NAMESPACE}.svc.cluster.local")
    https_pki = make_pki(workdir / "https-pki", dns=names, ips=real.server_ips)
    bus_pki = make_pki(
        workdir / "bus-pki", dns=(f"{BUS_SERVICE}.{NAMESPACE}.svc", CACHE_HOST), ips=real.server_ips
    )
    broker = RabbitMQServer(
        workdir / "rabbitmq",
        address=real.host_address,
        port=free_port(),
        node="rabbit-mtls@localhost",
        dist_port=free_port(),
        epmd_port=free_port(),
        tls=bus_pki.server_files(),
        tls_port=free_port(),
        client=bus_pki.client,
    )
    cache = MemcachedServer(
        workdir / "memcached",
        address=real.host_address,
        port=free_port(),
        tls=bus_pki.server_files(),
        client=bus_pki.client,
    )
    s = Site(handle, https_pki, bus_pki, broker, cache, OWN.prefix, workdir)
    keystone_https = region = False
    try:
        broker.start()
        cache.start()
        bus_password = secrets.token_urlsafe(18)
        broker.ensure_user(s.bus_user, bus_password)
        real.expose(NAMESPACE, BUS_SERVICE, 5671, broker.tls_port)
        real.expose(NAMESPACE, CACHE_SERVICE, 11211, cache.port)
        port = osv.serve_keystone_https(https_pki.server.cert, https_pki.server.key, https_pki.ca.cert)
        keystone_https = True
        real.expose(NAMESPACE, SERVICE, 5000, port)
        assert osv.network is not None
        # where the pods reach them: on real nodes the in-cluster names (the catalog's internal URLs
        # of RegionOne), not the host's loopback the public URLs name
        inside = osv.internal_urls
        region = True
        osv.add_region(
            REGION,
            {
                "identity": HTTPS_URL,
                "placement": inside.get("placement", osv.placement_url),
                "image": inside.get("image", osv.glance_url),
                "network": inside.get("network", osv.network.url),
            },
        )
        # the backing services' objects, and the samples' shared Secrets (service user, metadata
        # proxy) where no module made them yet: a module before this one may have rotated them
        handle.apply(REPO / "tools" / "simcluster" / "samples" / "dependencies.yaml", namespace=NAMESPACE)
        _sample_secrets_once(handle)
        url = f"rabbit://{s.bus_user}:{bus_password}@{BUS_SERVICE}.{NAMESPACE}.svc:5671/"
        for doc in (
            secret(
                f"{OWN.name}-api-db", {"username": f"{OWN.prefix}_api", "password": secrets.token_urlsafe(18)}
            ),
            secret(f"{OWN.name}-cell-db", {"username": OWN.prefix, "password": secrets.token_urlsafe(18)}),
            secret(f"{OWN.name}-bus", {"transport_url": url}),
            pem_secret(BUS_CA_SECRET, {"ca.crt": bus_pki.ca.cert}),
            pem_secret(CLIENT_CERT_SECRET, {"tls.crt": bus_pki.client.cert, "tls.key": bus_pki.client.key}),
        ):
            kube.apply(doc, NAMESPACE)
        t0 = time.monotonic()
        kube.apply(nova_body(), NAMESPACE)
        s.untrusted = wait_for(
            lambda: _untrusted(handle),
            within=300,
            what="SecretsReady False on the untrusted certificate",
            handle=handle,
            detail=lambda: repr(conditions(handle, "novas", OWN.name).get("SecretsReady")),
        )
        s.seconds["untrusted"] = time.monotonic() - t0
        yield s
    finally:
        print(f"tls nova: seconds {s.seconds}")
        try:
            _tear_down(s)
        finally:
            cache.stop()
            broker.stop()
            if keystone_https:
                osv.stop_service("keystone-https")
            if region:  # a Nova without ``region`` may be given any region's endpoints: none of it stays
                osv.remove_region(REGION)


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


def _untrusted(handle: SimHandle) -> JSON | None:
    cond = conditions(handle, "novas", OWN.name).get("SecretsReady") or {}
    return cond if cond.get("status") == "False" and "not trusted" in str(cond.get("message")) else None


def _tear_down(s: Site) -> None:
    """The server, flavor and image; the pool, then the Nova, with their pods; the CA Secret."""
    real = s.handle.real
    assert real is not None
    if s.client is not None:
        client = s.client
        if s.server:
            try:
                client.call("DELETE", f"/servers/{s.server['id']}")
            except urllib.error.HTTPError as exc:
                if exc.code != 404:
                    raise
            wait_for(lambda: client.server(s.server["id"]) is None or None, within=120, what="server deleted")
        if s.flavor:
            client.call("DELETE", f"/flavors/{s.flavor}")
        if s.image:
            request(
                "DELETE",
                f"{real.openstack.glance_url}/v2/images/{s.image}",
                headers={"X-Auth-Token": client.token()},
            )
    delete_to_the_end(s.handle, f"{POOLS}/{OWN.pool}", OWN.pool)
    delete_to_the_end(s.handle, f"{NOVAS}/{OWN.name}", OWN.name)
    try:
        s.kube.delete(f"/api/v1/namespaces/{NAMESPACE}/secrets/{CA_SECRET}")
    except KubeError as exc:
        if exc.status != 404:
            raise


# -- what the tests read ---------------------------------------------------------------------------


def replica_sets(s: Site) -> dict[str, set[str]]:
    """The ReplicaSets of each of the Nova's Deployments, by Deployment."""
    items = s.kube.get(f"{APPS}/replicasets?labelSelector=app.kubernetes.io/instance={OWN.name}")["items"]
    out: dict[str, set[str]] = {name: set() for name in DEPLOYMENTS}
    for rs in items:
        for ref in rs["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "Deployment" and ref.get("name") in out:
                out[ref["name"]].add(rs["metadata"]["name"])
    return out


def revisions(s: Site) -> set[str]:
    """The ControllerRevisions of the pool's DaemonSet."""
    items = s.kube.get(f"{APPS}/controllerrevisions")["items"]
    return {
        r["metadata"]["name"]
        for r in items
        if any(
            ref.get("kind") == "DaemonSet" and str(ref.get("name")).startswith(f"{OWN.pool}-")
            for ref in r["metadata"].get("ownerReferences") or []
        )
    }


def rolled_out(s: Site) -> bool:
    for name in DEPLOYMENTS:
        dep = s.kube.get(f"{APPS}/deployments/{name}")
        st, want = dep.get("status") or {}, dep["spec"].get("replicas", 1)
        if st.get("observedGeneration") != dep["metadata"]["generation"]:
            return False
        if (st.get("updatedReplicas"), st.get("readyReplicas"), st.get("replicas")) != (want, want, want):
            return False
    return True


def memcached_ask(cache: MemcachedServer, command: str) -> bytes:
    """memcached's answer to one text-protocol command ending in ``END``, over TLS with the client
    certificate."""
    context = cache.client_context()
    raw = socket.create_connection((cache.address, cache.port), timeout=5)
    with context.wrap_socket(raw, server_hostname=cache.address) as conn:
        conn.sendall(command.encode() + b"\r\n")
        text = b""
        while not text.endswith(b"END\r\n"):
            chunk = conn.recv(4096)
            if not chunk:
                break
            text += chunk
    return text


def memcached_stats(cache: MemcachedServer) -> dict[str, int]:
    """memcached's ``stats`` (integer values)."""
    text = memcached_ask(cache, "stats")
    stats = {}
    for line in text.decode().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "STAT" and parts[2].isdigit():
            stats[parts[1]] = int(parts[2])
    return stats
