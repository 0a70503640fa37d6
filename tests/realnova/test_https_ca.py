"""Keystone served over HTTPS with a certificate of a CA the test makes (issue 38, item 1).

A second real Keystone (same database and fernet keys as the tier's) is served by uWSGI over HTTPS
behind the Service ``keystone-https``; its certificate names that Service, from a CA made here. Its
region ``RegionTLS`` lists the identity endpoint as that https URL (so keystonemiddleware validates
tokens over HTTPS too) beside the tier's Placement, Glance and network endpoints. A Nova of its own
(``nova-tls``, 2026.1) names it as ``keystoneEndpoint`` and ``region``:

1. without ``spec.tls`` the operator's handshake with that Keystone fails, and ``SecretsReady`` (and
   so ``Ready``) says in words that the certificate of ``keystone-https.openstack.svc`` is not trusted;
2. with ``spec.tls.caBundleSecretRef`` the Nova is Ready with every look healthy, its pool (on
   ``compute-2``, trusting the bundle through the compute contract) is Ready, and a server boots;
3. the bundle rotated in its Secret (the CA plus another) rolls each Deployment once (one new
   ReplicaSet each) and the pool once (one new ControllerRevision), and nothing rolls after.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import time
import urllib.error
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from simcluster import SimHandle
from simcluster.client.kube import KubeError
from simcluster.platform.controlplane import REPO
from simcluster.realtier.services.pki import PKI, make_pki

from tests.realnova.cloud import request, upload_image
from tests.realnova.own_nova import NOVAS, OwnNova, secret, wait_ready
from tests.realnova.realcluster import (
    JSON,
    NAMESPACE,
    RELEASE_UNDER_TEST,
    SAMPLES,
    OpenStackClient,
    compute_url,
    conditions,
    tier_extra_config,
    wait_for,
)

pytestmark = [pytest.mark.realnova]

OWN = OwnNova("nova-tls", "tls")
SERVICE = "keystone-https"
HTTPS_URL = f"https://{SERVICE}.{NAMESPACE}.svc:5000/v3"
REGION = "RegionTLS"
CA_SECRET = "nova-tls-ca"
APPS = f"/apis/apps/v1/namespaces/{NAMESPACE}"
DEPLOYMENTS = tuple(f"{OWN.name}{suffix}" for suffix in ("", "-metadata", "-scheduler", "-conductor"))
FLAVOR: dict[str, Any] = {"name": "tls.small", "ram": 128, "vcpus": 1, "disk": 1}


@dataclass
class Site:
    handle: SimHandle
    pki: PKI
    workdir: pathlib.Path
    untrusted: JSON = field(default_factory=dict)  # SecretsReady without spec.tls
    client: OpenStackClient | None = None
    image: str = ""
    flavor: str = ""
    servers: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def kube(self) -> Any:
        return self.handle.cluster.kube


def _nova_body() -> JSON:
    nova = OWN.nova(RELEASE_UNDER_TEST)
    nova["spec"]["keystoneEndpoint"] = HTTPS_URL
    nova["spec"]["region"] = REGION
    if extra := tier_extra_config():
        nova["spec"]["extraConfig"] = extra
    return nova


def _ca_secret(bundle: str) -> JSON:
    return secret(CA_SECRET, {"ca.crt": bundle})


@pytest.fixture(scope="module")
def site(cluster: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    handle = cluster
    real = handle.real
    assert real is not None
    osv = real.openstack
    workdir = pathlib.Path(tmp_path_factory.mktemp("https-ca"))
    # what OwnNova names: the samples' Secrets and the managed MariaDB and memcached
    handle.apply(
        SAMPLES / "secrets.yaml",
        REPO / "tools" / "simcluster" / "samples" / "dependencies.yaml",
        namespace=NAMESPACE,
    )
    names = (f"{SERVICE}.{NAMESPACE}.svc", f"{SERVICE}.{NAMESPACE}.svc.cluster.local")
    pki = make_pki(workdir / "pki", dns=names, ips=(real.gateway,))
    port = osv.serve_keystone_https(pki.server.cert, pki.server.key, pki.ca.cert)
    real.expose(NAMESPACE, SERVICE, 5000, port)
    assert osv.network is not None
    osv.add_region(
        REGION,
        {
            "identity": HTTPS_URL,
            "placement": osv.placement_url,
            "image": osv.glance_url,
            "network": osv.network.url,
        },
    )
    s = Site(handle, pki, workdir)
    OWN.provision(handle)
    try:
        t0 = time.monotonic()
        s.kube.apply(_nova_body(), NAMESPACE)
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
        print(f"https-ca: seconds {s.seconds}")
        _tear_down(s)
        osv.stop_service("keystone-https")


def _untrusted(handle: SimHandle) -> JSON | None:
    cond = conditions(handle, "novas", OWN.name).get("SecretsReady") or {}
    return cond if cond.get("status") == "False" and "not trusted" in str(cond.get("message")) else None


def _tear_down(s: Site) -> None:
    if s.client is not None:
        for server in s.servers:
            try:
                s.client.call("DELETE", f"/servers/{server}")
            except urllib.error.HTTPError as exc:
                if exc.code != 404:
                    raise
        if s.flavor:
            s.client.call("DELETE", f"/flavors/{s.flavor}")
        if s.image:
            real = s.handle.real
            assert real is not None
            request(
                "DELETE",
                f"{real.openstack.glance_url}/v2/images/{s.image}",
                headers={"X-Auth-Token": s.client.token()},
            )
    OWN.tear_down(s.handle)
    try:
        s.kube.delete(f"/api/v1/namespaces/{NAMESPACE}/secrets/{CA_SECRET}")
    except KubeError as exc:
        if exc.status != 404:
            raise


def _replica_sets(s: Site) -> dict[str, set[str]]:
    """The ReplicaSets of each of the Nova's Deployments, by Deployment."""
    items = s.kube.get(f"{APPS}/replicasets?labelSelector=app.kubernetes.io/instance={OWN.name}")["items"]
    out: dict[str, set[str]] = {name: set() for name in DEPLOYMENTS}
    for rs in items:
        for ref in rs["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "Deployment" and ref.get("name") in out:
                out[ref["name"]].add(rs["metadata"]["name"])
    return out


def _revisions(s: Site) -> set[str]:
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


def _rolled_out(s: Site) -> bool:
    for name in DEPLOYMENTS:
        dep = s.kube.get(f"{APPS}/deployments/{name}")
        st, want = dep.get("status") or {}, dep["spec"].get("replicas", 1)
        if st.get("observedGeneration") != dep["metadata"]["generation"]:
            return False
        if (st.get("updatedReplicas"), st.get("readyReplicas"), st.get("replicas")) != (want, want, want):
            return False
    return True


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


def test_with_the_bundle_the_nova_and_its_pool_are_ready_and_a_server_boots(site: Site) -> None:
    handle = site.handle
    real = handle.real
    assert real is not None
    t0 = time.monotonic()
    site.kube.apply(_ca_secret(site.pki.ca.cert.read_text()), NAMESPACE)
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
    site.servers.append(server)
    shown = wait_for(
        lambda: (client.server(server) or {}).get("status") in ("ACTIVE", "ERROR") and client.server(server),
        within=240,
        what="the server ACTIVE or ERROR",
    )
    assert shown["status"] == "ACTIVE", client.fault(server)
    assert shown["OS-EXT-SRV-ATTR:host"] == "compute-2"
    site.seconds["boot"] = time.monotonic() - t0


def test_a_rotated_bundle_rolls_every_deployment_and_the_pool_once(site: Site) -> None:
    handle = site.handle
    assert site.servers, "the previous test booted no server"
    before_rs, before_rev = _replica_sets(site), _revisions(site)
    assert all(before_rs.values()), before_rs
    assert before_rev
    bundle = site.pki.ca.cert.read_text() + site.pki.other_ca.cert.read_text()
    t0 = time.monotonic()
    site.kube.apply(_ca_secret(bundle), NAMESPACE)

    def rolled() -> bool:
        after = _replica_sets(site)
        return (
            all(len(after[n] - before_rs[n]) == 1 for n in DEPLOYMENTS)
            and len(_revisions(site) - before_rev) == 1
            and _rolled_out(site)
        )

    wait_for(rolled, within=600, what="each Deployment and the pool rolled", handle=handle)
    wait_ready(handle, "novacomputes", OWN.pool, 300, "the pool Ready after the rotation")
    wait_ready(handle, "novas", OWN.name, 300, "the Nova Ready after the rotation")
    site.seconds["rotation"] = time.monotonic() - t0
    time.sleep(30)  # a second roll would have started by now: the operator acts within seconds
    after_rs, after_rev = _replica_sets(site), _revisions(site)
    assert {n: len(after_rs[n] - before_rs[n]) for n in DEPLOYMENTS} == dict.fromkeys(DEPLOYMENTS, 1)
    assert len(after_rev - before_rev) == 1
    digest = hashlib.sha256(bundle.encode()).hexdigest()
    for name in DEPLOYMENTS:
        template = site.kube.get(f"{APPS}/deployments/{name}")["spec"]["template"]
        assert template["metadata"]["annotations"]["nova.c5c3.io/https-ca-hash"] == digest, name
    client = site.client
    assert client is not None
    assert (client.server(site.servers[0]) or {}).get("status") == "ACTIVE"
