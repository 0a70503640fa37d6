"""The operator's own HTTPS calls: a Keystone and a compute API served with a certificate of a private
CA are trusted with ``Credentials.ca_bundle`` and refused without it, in fixed words that name the
host dialled and the field to set, and nothing of the answer or of the bundle."""

from __future__ import annotations

import pathlib
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from aiohttp import web
from simcluster.platform.controlplane import free_port
from simcluster.realtier.services.pki import PKI, make_pki

from nova_operator.openstack import ComputeAPIError, ComputeClient, Credentials, http
from nova_operator.openstack.client import trust_of
from nova_operator.openstack.trust import TrustMemory, Verdict

TOKEN = "tok-7f3a"
PASSWORD = "pw-private-ca"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    return make_pki(pathlib.Path(tmp_path_factory.mktemp("pki")), dns=("localhost",), ips=("127.0.0.1",))


@dataclass
class Served:
    url: str
    hits: list[str]
    runner: web.AppRunner
    stopped: bool = False

    async def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            await self.runner.cleanup()


@pytest.fixture
async def https_cloud(pki: PKI) -> AsyncIterator[Served]:
    """Keystone's token call and the compute API's service list on one HTTPS port of the test CA."""
    hits: list[str] = []

    async def token(request: web.Request) -> web.Response:
        hits.append("token")
        return web.Response(status=201, headers={"X-Subject-Token": TOKEN})

    async def services(request: web.Request) -> web.Response:
        hits.append("services")
        assert request.headers["X-Auth-Token"] == TOKEN
        return web.json_response({"services": [{"id": "1", "host": "h", "binary": "nova-conductor"}]})

    app = web.Application()
    app.router.add_post("/v3/auth/tokens", token)
    app.router.add_get("/v2.1/os-services", services)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki.server.cert, pki.server.key)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    served = Served(f"https://localhost:{port}", hits, runner)
    try:
        yield served
    finally:
        await served.stop()


def creds(url: str, bundle: str = "") -> Credentials:
    return Credentials(
        auth_url=f"{url}/v3",
        username="nova",
        password=PASSWORD,
        project_name="service",
        user_domain_name="Default",
        project_domain_name="Default",
        ca_bundle=bundle,
    )


async def test_with_the_bundle_the_token_and_the_compute_calls_go_over_https(
    https_cloud: Served, pki: PKI
) -> None:
    client = await ComputeClient.connect(creds(https_cloud.url, pki.ca.cert.read_text()), https_cloud.url)
    records = await client.list_all_services()
    assert [r.binary for r in records] == ["nova-conductor"]
    assert https_cloud.hits == ["token", "services"]


async def test_without_the_bundle_the_certificate_is_not_trusted_in_fixed_words(https_cloud: Served) -> None:
    with pytest.raises(ComputeAPIError) as caught:
        await ComputeClient.connect(creds(https_cloud.url), https_cloud.url)
    message = str(caught.value)
    assert message == (
        "POST /v3/auth/tokens: the certificate of localhost is not trusted "
        "(set spec.tls.caBundleSecretRef of the Nova to a bundle of the CA that issued it)"
    )
    assert caught.value.status == 0
    assert https_cloud.hits == []  # nothing reached the server: the password was never sent


async def test_a_bundle_of_another_ca_is_refused_the_same_way(https_cloud: Served, pki: PKI) -> None:
    other = pki.other_ca.cert.read_text()
    with pytest.raises(ComputeAPIError, match="the certificate of localhost is not trusted"):
        await ComputeClient.connect(creds(https_cloud.url, other), https_cloud.url)
    assert https_cloud.hits == []


async def test_the_compute_api_is_held_to_the_same_bundle(https_cloud: Served, pki: PKI) -> None:
    client = await ComputeClient.connect(creds(https_cloud.url, pki.ca.cert.read_text()), https_cloud.url)
    untrusting = ComputeClient(TOKEN, https_cloud.url)  # the system's CAs only
    with pytest.raises(ComputeAPIError) as caught:
        await untrusting.list_all_services()
    assert str(caught.value).startswith("GET /v2.1/os-services: the certificate of localhost is not trusted")
    assert await client.list_all_services()


async def test_a_name_the_certificate_does_not_carry_is_refused(https_cloud: Served, pki: PKI) -> None:
    by_address = https_cloud.url.replace("localhost", "127.0.0.2")  # not in the certificate
    with pytest.raises(ComputeAPIError):
        await ComputeClient.connect(creds(by_address, pki.ca.cert.read_text()), by_address)


def test_a_bundle_without_a_certificate_is_refused_without_quoting_it(pki: PKI) -> None:
    for bundle in ("", "   \n", "not a certificate at all: s3cr3t-looking text"):
        with pytest.raises(http.BadBundle) as caught:
            http.trusted(bundle)
        assert "s3cr3t" not in str(caught.value)
    broken = creds("https://localhost", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    with pytest.raises(ComputeAPIError, match=r"spec\.tls\.caBundleSecretRef holds no PEM certificate"):
        trust_of(broken)
    context = http.trusted(pki.ca.cert.read_text())
    assert [c["subject"] for c in context.get_ca_certs()] == [((("commonName", "ca"),),)]
    assert context.check_hostname
    assert http.trusted(pki.ca.cert.read_text()) is context  # one context per distinct bundle


def test_the_bundle_is_not_in_the_credentials_repr(pki: PKI) -> None:
    shown = repr(creds("https://localhost", pki.ca.cert.read_text()))
    assert "BEGIN CERTIFICATE" not in shown
    assert PASSWORD not in shown


async def test_the_handshake_check_tells_untrusted_from_unreachable_and_remembers_only_success(
    https_cloud: Served, pki: PKI
) -> None:
    clock = [100.0]
    memory = TrustMemory(monotonic=lambda: clock[0], deadline=5.0)
    bundle = pki.ca.cert.read_text()
    assert await memory.check(https_cloud.url + "/v3") is Verdict.UNTRUSTED
    assert await memory.check(https_cloud.url + "/v3", pki.other_ca.cert.read_text()) is Verdict.UNTRUSTED
    assert not memory.verdicts  # a failure is looked at again on the next pass
    assert await memory.check(https_cloud.url + "/v3", bundle) is Verdict.TRUSTED
    assert https_cloud.hits == []  # a handshake only: no request, no credential
    assert await memory.check("http://localhost:1/v3") is Verdict.TRUSTED  # nothing to verify
    closed = f"https://localhost:{free_port()}/v3"
    assert await memory.check(closed, bundle) is Verdict.UNKNOWN
    await https_cloud.stop()
    assert await memory.check(https_cloud.url + "/v3", bundle) is Verdict.TRUSTED  # remembered
    clock[0] += 601
    assert await memory.check(https_cloud.url + "/v3", bundle) is Verdict.UNKNOWN  # looked again: gone
