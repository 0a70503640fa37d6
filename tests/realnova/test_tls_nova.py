"""A Nova over TLS on the real processes (issue 38, items 1 and 5), one bring-up for both
(``tls_nova.py`` says what serves it):

1. without ``spec.tls`` the operator's handshake with the HTTPS Keystone fails, and ``SecretsReady``
   (and so ``Ready``) says in words that the certificate of ``keystone-https.openstack.svc`` is not
   trusted;
2. without the client certificate fields (the state before them) nothing could reach the bus or the
   cache: the broker and memcached refuse a client without a certificate;
3. with ``spec.tls.caBundleSecretRef`` the Nova is Ready with every look healthy, its pool (on
   ``compute-2``, trusting the bundle and presenting the client certificate through the compute
   contract) is Ready, and a server boots ACTIVE;
4. nova's connections to the broker present the client certificate, nova's cache traffic reached
   memcached (its only listener is TLS), and so did Keystone's token cache: the token of an API call
   is cached there by the API's keystonemiddleware (through python-binary-memcached, of the image
   contract);
5. the bundle rotated in its Secret (the CA plus another) rolls each Deployment once (one new
   ReplicaSet each) and the pool once (one new ControllerRevision), and nothing rolls after.
"""

from __future__ import annotations

import base64
import hashlib
import os
import pathlib
import ssl
import time
from collections.abc import Iterator

import pytest
from simcluster import SimHandle
from simcluster.realtier.services.rabbitmq import amqp_answers

from tests.realnova.cloud import upload_image
from tests.realnova.own_nova import NOVAS, wait_ready
from tests.realnova.realcluster import JSON, NAMESPACE, OpenStackClient, compute_url, conditions, wait_for
from tests.realnova.tls_nova import (
    CA_SECRET,
    DEPLOYMENTS,
    OWN,
    SERVICE,
    Site,
    ca_secret,
    memcached_ask,
    memcached_stats,
    replica_sets,
    revisions,
    rolled_out,
    tls_site,
)

pytestmark = pytest.mark.realnova

APPS = f"/apis/apps/v1/namespaces/{NAMESPACE}"
FLAVOR = {"name": "tls.small", "ram": 128, "vcpus": 1, "disk": 1}


@pytest.fixture(scope="module")
def site(cluster: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with tls_site(cluster, pathlib.Path(tmp_path_factory.mktemp("tls-nova"))) as s:
        yield s


def test_without_the_bundle_the_condition_says_the_certificate_is_not_trusted(site: Site) -> None:
    message = str(site.untrusted["message"])
    assert site.untrusted["reason"] == "KeystoneCertificateNotTrusted"
    assert message == (
        f"spec.keystoneEndpoint: the certificate of {SERVICE}.{NAMESPACE}.svc is not trusted: set "
        "spec.tls.caBundleSecretRef to a bundle of the CA that issued it"
    )
    ready = conditions(site.handle, "novas", OWN.name)["Ready"]
    assert ready["status"] == "False"
    assert "SecretsReady" in str(ready.get("message"))


def test_the_broker_and_memcached_refuse_a_client_without_a_certificate(site: Site) -> None:
    """What the Nova's pods would meet without the client certificate fields (the state before them)."""
    broker, cache, ca = site.broker, site.cache, str(site.bus_pki.ca.cert)
    without = ssl.create_default_context(cafile=ca)
    assert not amqp_answers(broker.address, broker.tls_port, tls=without)
    assert amqp_answers(broker.address, broker.tls_port, tls=broker.client_context())
    assert not cache.answers(None)  # TLS only: a plaintext client gets no answer
    assert not cache.answers(cache.client_context(present=False))
    assert cache.answers(cache.client_context())


def test_with_the_bundle_the_nova_and_its_pool_are_ready_and_a_server_boots(site: Site) -> None:
    handle = site.handle
    real = handle.real
    assert real is not None
    t0 = time.monotonic()
    site.kube.apply(ca_secret(site.https_pki.ca.cert.read_text()), NAMESPACE)
    site.kube.patch(f"{NOVAS}/{OWN.name}", {"spec": {"tls": {"caBundleSecretRef": {"name": CA_SECRET}}}})

    def trusted() -> bool:
        conds = conditions(handle, "novas", OWN.name)
        return all(conds.get(t, {}).get("status") == "True" for t in ("Ready", "ServiceRecordsHealthy"))

    wait_for(
        trusted,
        within=600,
        what="the Nova Ready with its service records looked at over HTTPS",
        handle=handle,
        detail=lambda: repr(
            {t: (c["status"], c.get("message")) for t, c in conditions(handle, "novas", OWN.name).items()}
        ),
    )
    site.seconds["trusted"] = time.monotonic() - t0
    contract = site.kube.get(f"/api/v1/namespaces/{NAMESPACE}/secrets/{OWN.name}-compute-config")
    assert "https-ca.crt" in contract["data"]
    t0 = time.monotonic()
    site.kube.apply(OWN.pool_body(site.workdir), NAMESPACE)
    wait_ready(handle, "novacomputes", OWN.pool, 420, "the pool Ready through the contract's bundle")
    site.seconds["pool"] = time.monotonic() - t0

    site.client = client = OpenStackClient(handle, compute_url(handle, OWN.name))
    site.image = upload_image(real.openstack.glance_url, client.token(), "tls", os.urandom(64 * 1024))
    site.flavor = client.call("POST", "/flavors", {"flavor": FLAVOR})["flavor"]["id"]
    body = {"server": {"name": "tls-1", "imageRef": site.image, "flavorRef": site.flavor, "networks": "none"}}
    t0 = time.monotonic()
    server = str(client.call("POST", "/servers", body, microversion="2.37")["server"]["id"])
    site.server = {"id": server}

    def settled() -> JSON | None:
        shown = client.server(server) or {}
        if shown.get("status") == "ERROR":
            return shown
        return shown if shown.get("status") == "ACTIVE" and not shown.get("OS-EXT-STS:task_state") else None

    shown = wait_for(settled, within=240, what="the server ACTIVE or ERROR", handle=handle)
    assert shown["status"] == "ACTIVE", client.fault(server)
    assert shown["OS-EXT-SRV-ATTR:host"] == "compute-2"
    site.server = shown
    site.seconds["boot"] = time.monotonic() - t0


def test_the_compute_contract_carries_the_client_certificate(site: Site) -> None:
    assert site.server.get("status") == "ACTIVE", "the previous test booted no server"
    contract = site.kube.get(f"/api/v1/namespaces/{NAMESPACE}/secrets/{OWN.name}-compute-config")
    fragment = base64.b64decode(contract["data"]["nova-compute.conf"]).decode()
    assert "ssl_cert_file = /etc/nova/compute-config/tls.crt" in fragment
    assert base64.b64decode(contract["data"]["tls.crt"]) == site.bus_pki.client.cert.read_bytes()


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
    stats = memcached_stats(site.cache)
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
    answer = memcached_ask(site.cache, f"get {key}")
    header = answer.split(b"\r\n", 1)[0].decode()
    assert header.startswith(f"VALUE {key} "), answer[:200]
    assert int(header.split()[3]) > 0, header  # the cached token data's length


def test_a_rotated_bundle_rolls_every_deployment_and_the_pool_once(site: Site) -> None:
    handle = site.handle
    assert site.server.get("status") == "ACTIVE", "the previous test booted no server"
    before_rs, before_rev = replica_sets(site), revisions(site)
    assert all(before_rs.values()), before_rs
    assert before_rev
    bundle = site.https_pki.ca.cert.read_text() + site.https_pki.other_ca.cert.read_text()
    t0 = time.monotonic()
    site.kube.apply(ca_secret(bundle), NAMESPACE)

    def rolled() -> bool:
        after = replica_sets(site)
        return (
            all(len(after[n] - before_rs[n]) == 1 for n in DEPLOYMENTS)
            and len(revisions(site) - before_rev) == 1
            and rolled_out(site)
        )

    wait_for(rolled, within=600, what="each Deployment and the pool rolled", handle=handle)
    wait_ready(handle, "novacomputes", OWN.pool, 300, "the pool Ready after the rotation")
    wait_ready(handle, "novas", OWN.name, 300, "the Nova Ready after the rotation")
    site.seconds["rotation"] = time.monotonic() - t0
    time.sleep(30)  # a second roll would have started by now: the operator acts within seconds
    after_rs, after_rev = replica_sets(site), revisions(site)
    assert {n: len(after_rs[n] - before_rs[n]) for n in DEPLOYMENTS} == dict.fromkeys(DEPLOYMENTS, 1)
    assert len(after_rev - before_rev) == 1
    digest = hashlib.sha256(bundle.encode()).hexdigest()
    for name in DEPLOYMENTS:
        template = site.kube.get(f"{APPS}/deployments/{name}")["spec"]["template"]
        assert template["metadata"]["annotations"]["nova.c5c3.io/https-ca-hash"] == digest, name
    client = site.client
    assert client is not None
    assert (client.server(site.server["id"]) or {}).get("status") == "ACTIVE"
