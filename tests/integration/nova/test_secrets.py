"""The Secrets step (``reconcile_secrets``) on the real API server: what a CR author can make it read,
the ``spec.secretConfig`` Secret it publishes, credentials it refuses, and its keyed digests.

Each pass runs in ``make_ctx`` over a Nova stored by kube-apiserver; the inputs are stored there and
the Secrets cache holds the server's copies (or, for the size bound, what a bounded informer keeps
of them). Requests are recorded by a wrapper around the real
client (``Recorder``) with the server's answers.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import ssl
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from aiohttp import web
from simcluster.realtier.services.pki import CertificateAuthority, make_pki

from nova_operator import apply, conditions, secret_config
from nova_operator.kube import Kube
from nova_operator.kube.errors import NotFound
from nova_operator.kube.resources import SECRETS
from nova_operator.kube.types import Object
from nova_operator.metrics import WRITE_VERBS
from nova_operator.models.nova import Nova
from nova_operator.pipeline import NullObserver, Step, run_sequence
from nova_operator.reconcilers.nova import secrets
from nova_operator.reconcilers.nova.context import NovaOptions
from nova_operator.reconcilers.nova.controller import SECRET_BOUND
from nova_operator.reconcilers.nova.secret_reads import secret_ref_fields
from nova_operator.reconcilers.nova.steps import NOVA_STEPS
from nova_operator.renderers import workload
from nova_operator.runtime.informer import Informer
from nova_operator.secret_refs import SECRET_DATA_LIMIT, SecretRefPolicy
from tests.integration.nova.passes import ALL_SECRETS, make_ctx, secret, stored, stored_nova
from tests.integration.nova.requests import Recorder

SECRET_CONFIG: dict[str, Any] = {"secretConfig": {"secretRef": {"name": "nova-secrets"}}}


def written(kube: Recorder) -> list[tuple[str, str, str]]:
    """(verb, resource, name) of every write request sent."""
    return [(v, r, n) for v, r, n, _ in kube.calls if v in WRITE_VERBS]


async def on_server(admin: Kube, ns: str) -> list[Object]:
    """Every Secret of ``ns`` as the server holds it (what the Secrets informer then shows; a list's
    items carry no kind, which the informer adds)."""
    return [{"apiVersion": "v1", "kind": "Secret", **s} for s in (await admin.list(SECRETS, ns))["items"]]


async def published(admin: Kube, ns: str) -> dict[str, str]:
    stored_secret = await admin.get(SECRETS, "nova-secret-config", ns)
    return {k: base64.b64decode(v).decode() for k, v in stored_secret["data"].items()}


async def absent(admin: Kube, ns: str, name: str) -> bool:
    try:
        await admin.get(SECRETS, name, ns)
    except NotFound:
        return True
    return False


# -- spec.secretConfig (issue 26 item 6) -----------------------------------------------------------


async def test_secret_config_is_published_in_oslo_form_and_read_by_every_deployment(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await stored_nova(admin, namespace, **SECRET_CONFIG)
    values = {"vault.root_token_id": "s.$tok", "DATABASE.slave_connection": "mysql+pymysql://r"}
    inputs = await stored(admin, namespace, *ALL_SECRETS, secret("nova-secrets", **values))
    ctx = make_ctx(ours, nova, *inputs)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after is None
    assert await published(admin, namespace) == {
        "vault.root_token_id": "s.$$tok",
        "database.slave_connection": "mysql+pymysql://r",
    }
    assert ctx.state.secret_config_keys == ("database.slave_connection", "vault.root_token_id")
    inputs_of = ctx.workload_inputs()
    for component, deployment in workload.deployments(ctx.nova, inputs_of).items():
        template = deployment["spec"]["template"]
        env = {
            e["name"]: e.get("valueFrom") for c in template["spec"]["containers"] for e in c.get("env") or []
        }
        assert env["OS_VAULT__ROOT_TOKEN_ID"] == {
            "secretKeyRef": {"name": "nova-secret-config", "key": "vault.root_token_id"}
        }, component
        assert "OS_DATABASE__SLAVE_CONNECTION" in env, component
        assert template["metadata"]["annotations"]["nova.c5c3.io/secret-config-hash"] == (
            ctx.state.secret_config_digest
        )
    first_digest = ctx.state.secret_config_digest
    assert first_digest == secret_config.values_digest(
        await published(admin, namespace), ctx.state.digest_key
    )
    # a converged pass (its cache shows the pass's writes) writes nothing
    before = len(written(ours))
    await secrets.reconcile_secrets(make_ctx(ours, nova, *await on_server(admin, namespace)))
    assert len(written(ours)) == before
    # a rotated value rolls the pods (the annotation follows the values)
    rotated = {"data": {"vault.root_token_id": base64.b64encode(b"s.other").decode()}}
    await admin.patch(SECRETS, "nova-secrets", rotated, namespace)
    third = make_ctx(ours, nova, *await on_server(admin, namespace))
    await secrets.reconcile_secrets(third)
    assert third.state.secret_config_digest not in ("", first_digest)
    stored_secret = await admin.get(SECRETS, "nova-secret-config", namespace)
    assert stored_secret["metadata"]["annotations"][apply.APPLIED_DIGEST]
    assert (await published(admin, namespace))["vault.root_token_id"] == "s.other"


async def test_bad_keys_are_named_and_no_value_is_echoed(admin: Kube, ours: Recorder, namespace: str) -> None:
    nova = await stored_nova(admin, namespace, **SECRET_CONFIG)
    values = {"vault.no_such": "v1", "database.connection": "v2", "plain": "v3", "neutron.password": "v4"}
    ctx = make_ctx(
        ours, nova, *await stored(admin, namespace, *ALL_SECRETS, secret("nova-secrets", **values))
    )
    assert (await secrets.reconcile_secrets(ctx)).requeue_after == 15.0
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert c["reason"] == "SecretConfigInvalid"
    for part in (
        "key database.connection: the operator sets [database] connection",
        "key neutron.password: the operator sets",
        "key plain is not section.option",
        "key vault.no_such: no such option in the nova 2025.2 option catalog",
    ):
        assert part in c["message"]
    assert not any(v in c["message"] for v in ("v1", "v2", "v3", "v4"))
    assert ctx.state.service_user_password == ""  # a wait hands nothing on
    assert await absent(admin, namespace, "nova-secret-config")


async def test_a_deprecated_name_of_an_owned_option_is_refused_in_the_secret(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await stored_nova(admin, namespace, **SECRET_CONFIG)
    source = secret("nova-secrets", **{"DEFAULT.log_config": "/tmp/evil.ini"})
    ctx = make_ctx(ours, nova, *await stored(admin, namespace, *ALL_SECRETS, source))
    assert (await secrets.reconcile_secrets(ctx)).requeue_after == 15.0
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert c["reason"] == "SecretConfigInvalid"
    assert "key DEFAULT.log_config: the operator sets [DEFAULT] log_config_append" in c["message"]
    assert "/tmp/evil.ini" not in c["message"]
    assert await absent(admin, namespace, "nova-secret-config")


async def test_a_missing_secret_config_secret_is_a_wait(admin: Kube, ours: Recorder, namespace: str) -> None:
    nova = await stored_nova(admin, namespace, secretConfig={"secretRef": {"name": "absent"}})
    ctx = make_ctx(ours, nova, *await stored(admin, namespace, *ALL_SECRETS))
    assert (await secrets.reconcile_secrets(ctx)).requeue_after == 15.0
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert (c["reason"], c["message"]) == (
        "WaitingForSecretConfig",
        f"spec.secretConfig.secretRef: Secret {namespace}/absent not found",
    )


# -- credentials the step refuses, and its keyed digests (issue 13) --------------------------------


def raw(name: str, **data: bytes) -> Object:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }


async def test_a_password_oslo_cannot_carry_is_a_condition_naming_the_secret_not_the_value(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    inputs = await stored(
        admin,
        namespace,
        secret("api-db", username="a", password="p"),
        secret("cell-db", username="c", password="p"),
        secret("service-user", password="Zq9\\$Wv7"),
        secret("metadata-proxy", shared_secret="m$$"),
    )
    ctx = make_ctx(ours, await stored_nova(admin, namespace), *inputs)
    result = await secrets.reconcile_secrets(ctx)
    assert result.requeue_after == 15.0
    cond = ctx.condition(conditions.SECRETS_READY)
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "CredentialNotRepresentable")
    assert "spec.serviceUser.secretRef" in cond["message"]
    assert f"{namespace}/service-user" in cond["message"]
    assert "Zq9" not in cond["message"]
    assert ctx.state.service_user_password == ""


BINARY = b"\xff\xfe\x00Zq9-not-text"


def not_text_inputs(step_name: str) -> list[Object]:
    """The step's inputs with one value that is not UTF-8: api-db's password, or the bus URL."""
    return [
        raw("api-db", username=b"a", password=BINARY if step_name != "TransportURLSecret" else b"p"),
        raw("cell-db", username=b"c", password=b"p"),
        raw("service-user", password=b"p"),
        raw("metadata-proxy", shared_secret=b"m"),
        raw("bus", transport_url=BINARY),
    ]


async def test_a_secret_value_that_is_not_text_is_the_secrets_steps_condition_naming_secret_and_key(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    ctx = make_ctx(
        ours, await stored_nova(admin, namespace), *await stored(admin, namespace, *not_text_inputs(""))
    )
    steps = [s for s in NOVA_STEPS if s.name == "Secrets"]
    assert (await run_sequence(steps, ctx, NullObserver())).requeue_after is None
    cond = ctx.condition(conditions.SECRETS_READY)
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "SecretNotText")
    assert f"key password of Secret {namespace}/api-db" in cond["message"]
    assert "Zq9" not in cond["message"]


async def test_credential_digests_are_keyed_with_the_novas_own_key(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await stored_nova(admin, namespace)
    inputs = await stored(
        admin,
        namespace,
        secret("api-db", username="a", password="p"),
        secret("cell-db", username="c", password="p"),
        secret("service-user", password="hunter2"),
        secret("metadata-proxy", shared_secret="m"),
    )
    ctx = make_ctx(ours, nova, *inputs)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after is None
    created = await admin.get(SECRETS, "nova-digest-key", namespace)
    key = base64.b64decode(created["data"]["key"])
    assert len(key) == 64  # 32 random bytes, hex
    digest = ctx.state.authtoken_digest
    assert digest != hashlib.sha256(b"hunter2").hexdigest()  # no offline guess test from a Deployment
    assert digest == hmac.new(key, b"hunter2", hashlib.sha256).hexdigest()
    # the key is kept: the next pass (key cached) writes nothing and gives the same digest
    again = make_ctx(ours, nova, *inputs, created)
    writes = len(written(ours))
    await secrets.reconcile_secrets(again)
    assert again.state.authtoken_digest == digest
    assert len(written(ours)) == writes
    # a rotation still changes it (and so rolls the pods)
    rotated = await admin.patch(
        SECRETS, "service-user", {"data": {"password": base64.b64encode(b"hunter3").decode()}}, namespace
    )
    third = make_ctx(ours, nova, *inputs[:2], rotated, inputs[3], created)
    await secrets.reconcile_secrets(third)
    assert third.state.authtoken_digest not in ("", digest)


# -- --secret-ref-label (issue 26 item 5) ----------------------------------------------------------

LABEL = "nova.openstack.c5c3.io/usable-by-nova"
NAMED = (*ALL_SECRETS, secret("bus", url="amqp://bus"))
"""Every Secret the sample spec names (the gate asks for each one to exist with the label)."""
TLS = {
    "mode": "verify-full",
    "caBundleSecretRef": {"name": "db-ca"},
    "clientCertSecretRef": {"name": "db-cert"},
}
WITH_LABEL = NovaOptions(secret_refs=SecretRefPolicy(LABEL))


def labelled(body: Object) -> Object:
    return {**body, "metadata": {**body["metadata"], "labels": {LABEL: "true"}}}


def empty(name: str) -> Object:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": {}}


def with_tls(nova: Object) -> dict[str, Any]:
    return {"database": {**nova["spec"]["database"], "tls": TLS}}


async def test_without_the_flag_a_nova_may_name_any_secret_of_its_namespace(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    ctx = make_ctx(ours, await stored_nova(admin, namespace), *await stored(admin, namespace, *ALL_SECRETS))
    assert (await secrets.reconcile_secrets(ctx)).requeue_after is None
    assert ctx.condition(conditions.SECRETS_READY)["reason"] == "SecretsAvailable"  # type: ignore[index]


async def test_with_the_flag_an_unlabelled_secret_stops_the_nova_before_anything_is_read_or_written(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await stored_nova(admin, namespace)
    others = await stored(
        admin, namespace, *[labelled(s) for s in NAMED if s["metadata"]["name"] != "service-user"]
    )
    (unlabelled,) = await stored(admin, namespace, ALL_SECRETS[2])
    ctx = make_ctx(ours, nova, *others, unlabelled, options=WITH_LABEL)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after == 15.0
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert (c["status"], c["reason"]) == ("False", "SecretRefNotLabelled")
    assert c["message"].startswith(
        f"spec.serviceUser.secretRef: Secret {namespace}/service-user does not carry the label {LABEL}"
    )
    assert written(ours) == []  # not even the digest key
    assert ctx.state.service_user_password == ""
    # labelled, the same Nova goes on
    now = await admin.patch(SECRETS, "service-user", {"metadata": {"labels": {LABEL: "true"}}}, namespace)
    ctx = make_ctx(ours, nova, *others, now, options=WITH_LABEL)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after is None


async def test_with_the_flag_a_mounted_tls_secret_is_checked_too(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    plain = await stored_nova(admin, namespace, "plain")
    nova = await stored_nova(admin, namespace, **with_tls(plain))
    inputs = await stored(admin, namespace, *[labelled(s) for s in NAMED], empty("db-ca"))
    ctx = make_ctx(ours, nova, *inputs, options=WITH_LABEL)
    await secrets.reconcile_secrets(ctx)
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert c["reason"] == "SecretRefNotLabelled"
    assert f"spec.database.tls.caBundleSecretRef: Secret {namespace}/db-ca" in c["message"]


async def test_with_the_flag_a_tls_secret_that_does_not_exist_yet_does_not_pass_the_gate(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    """Issue 36 §5: a missing Secret passed the gate and the Deployments mounted it by name, so a
    Secret created later without the label was mounted (the database TLS Secrets are never read)."""
    plain = await stored_nova(admin, namespace, "plain")
    nova = await stored_nova(admin, namespace, **with_tls(plain))
    inputs = await stored(admin, namespace, *[labelled(s) for s in NAMED])
    ctx = make_ctx(ours, nova, *inputs, options=WITH_LABEL)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after == 15.0
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert (c["status"], c["reason"]) == ("False", "SecretRefNotLabelled")
    assert c["message"].startswith(f"spec.database.tls.caBundleSecretRef: Secret {namespace}/db-ca not found")
    assert written(ours) == []  # nothing rendered that would mount it
    tls_secrets = await stored(admin, namespace, *[labelled(empty(n)) for n in ("db-ca", "db-cert")])
    ctx = make_ctx(ours, nova, *inputs, *tls_secrets, options=WITH_LABEL)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after is None  # once both exist, labelled


# -- a Secret over the size bound (issue 36) -------------------------------------------------------


@pytest.mark.parametrize("cached", [True, False], ids=["refused-by-the-cache", "read-with-a-get"])
async def test_the_step_refuses_a_secret_over_the_limit_with_a_clear_condition(
    admin: Kube, ours: Recorder, namespace: str, cached: bool
) -> None:
    marker = "UVVJQ0tCUk9XTkZPWA"  # a recognisable run of base64 in the content, never to be quoted
    raw_bytes = (base64.b64decode(marker + "==") * (SECRET_DATA_LIMIT // 13 + 1))[: SECRET_DATA_LIMIT + 1]
    (oversized,) = await stored(admin, namespace, raw("api-db", username=b"a", password=raw_bytes))
    await stored(admin, namespace, *ALL_SECRETS[1:])
    informer = Informer(cast(Any, None), SECRETS)  # its cache only: the test delivers what it holds
    informer.bound(SECRET_BOUND)
    informer.cache.cover({namespace} if cached else set())  # not covered: not listed yet, read with a GET
    if cached:
        informer.cache.upsert(copy.deepcopy(oversized))
    ctx = make_ctx(ours, await stored_nova(admin, namespace), caches={SECRETS: informer.cache})
    steps = [Step("Secrets", conditions.SECRETS_READY, secrets.reconcile_secrets)]
    await run_sequence(steps, ctx, NullObserver())
    cond = ctx.condition(conditions.SECRETS_READY)
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "SecretTooLarge")
    assert f"Secret {namespace}/api-db" in cond["message"]
    assert f"{SECRET_DATA_LIMIT} bytes" in cond["message"]
    assert oversized["data"]["password"][:12] not in cond["message"]  # no content
    gets = [(n, c) for v, r, n, c in ours.calls if (v, r) == ("get", "secrets")]
    assert gets == ([] if cached else [("api-db", "200")])  # refused by the cache: not even read
    assert not informer.cache.answers("api-db", namespace)  # never held with its data


# -- spec.tls: the HTTPS CA bundle (issue 38 item 1) -----------------------------------------------

HTTPS_TLS: dict[str, Any] = {"tls": {"caBundleSecretRef": {"name": "internal-ca"}}}


@pytest.fixture(scope="module")
def ca_pems(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """Two CAs' certificates (PEM): the bundle, and the CA a rotation adds."""
    directory = tmp_path_factory.mktemp("ca")
    first, second = (CertificateAuthority.create(directory, n).cert.read_text() for n in ("ca-1", "ca-2"))
    return first, second


def https_ca_hash(inputs: workload.WorkloadInputs, nova: Nova) -> set[str]:
    return {
        d["spec"]["template"]["metadata"]["annotations"]["nova.c5c3.io/https-ca-hash"]
        for d in workload.deployments(nova, inputs).values()
    }


async def test_the_https_ca_bundle_waits_for_its_secret_and_refuses_one_without_a_certificate(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await stored_nova(admin, namespace, **HTTPS_TLS)
    inputs = await stored(admin, namespace, *ALL_SECRETS)
    ctx = make_ctx(ours, nova, *inputs)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after == 15.0
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert (c["status"], c["reason"]) == ("False", "WaitingForHTTPSCABundle")
    assert c["message"] == f"spec.tls.caBundleSecretRef: Secret {namespace}/internal-ca not found"

    (bad,) = await stored(admin, namespace, secret("internal-ca", **{"ca.crt": "not PEM: s3cr3t"}))
    ctx = make_ctx(ours, nova, *inputs, bad)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after == 15.0
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert (c["status"], c["reason"]) == ("False", "HTTPSCABundleInvalid")
    assert c["message"].startswith(
        f"spec.tls.caBundleSecretRef: key ca.crt of Secret {namespace}/internal-ca "
    )
    assert "s3cr3t" not in c["message"]
    assert ctx.state.https_ca == ""

    keyed = await stored_nova(
        admin, namespace, "keyed", tls={"caBundleSecretRef": {"name": "internal-ca", "key": "b.pem"}}
    )
    ctx = make_ctx(ours, keyed, *inputs, bad)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after == 15.0
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert c["message"] == f"spec.tls.caBundleSecretRef: Secret {namespace}/internal-ca has no key b.pem"


async def test_the_https_ca_bundle_is_read_and_its_digest_follows_a_rotation(
    admin: Kube, ours: Recorder, namespace: str, ca_pems: tuple[str, str]
) -> None:
    first, added = ca_pems
    nova = await stored_nova(admin, namespace, **HTTPS_TLS)
    inputs = await stored(admin, namespace, *ALL_SECRETS, secret("internal-ca", **{"ca.crt": first}))
    ctx = make_ctx(ours, nova, *inputs)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after is None
    assert ctx.state.https_ca == first
    before = ctx.workload_inputs()
    assert https_ca_hash(before, ctx.nova) == {hashlib.sha256(first.encode()).hexdigest()}

    rotated = {"data": {"ca.crt": base64.b64encode((first + added).encode()).decode()}}
    await admin.patch(SECRETS, "internal-ca", rotated, namespace)
    again = make_ctx(ours, nova, *await on_server(admin, namespace))
    assert (await secrets.reconcile_secrets(again)).requeue_after is None
    after = again.workload_inputs()
    assert https_ca_hash(after, again.nova) == {hashlib.sha256((first + added).encode()).hexdigest()}
    old, new = workload.deployments(ctx.nova, before), workload.deployments(again.nova, after)
    for role in old:  # the pod templates differ by that annotation alone: one roll, nothing else moves
        o, n = old[role]["spec"]["template"], new[role]["spec"]["template"]
        assert o["spec"] == n["spec"], role
        assert {
            k: v for k, v in o["metadata"]["annotations"].items() if k != "nova.c5c3.io/https-ca-hash"
        } == {k: v for k, v in n["metadata"]["annotations"].items() if k != "nova.c5c3.io/https-ca-hash"}, (
            role
        )


async def test_the_bundles_secret_is_one_the_nova_names_and_the_label_gate_checks(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await stored_nova(admin, namespace, **HTTPS_TLS)
    assert ("spec.tls.caBundleSecretRef", "internal-ca") in secret_ref_fields(nova)
    inputs = await stored(
        admin, namespace, *[labelled(s) for s in NAMED], secret("internal-ca", **{"ca.crt": "x"})
    )
    ctx = make_ctx(ours, nova, *inputs, options=WITH_LABEL)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after == 15.0
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert c["reason"] == "SecretRefNotLabelled"
    assert c["message"].startswith(f"spec.tls.caBundleSecretRef: Secret {namespace}/internal-ca")


@pytest.fixture
async def https_keystone(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[str, str]]:
    """(URL, CA PEM): an HTTPS listener whose certificate, for localhost, a CA made here issued."""
    pki = make_pki(tmp_path_factory.mktemp("pki"), dns=("localhost",), ips=("127.0.0.1",))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki.server.cert, pki.server.key)
    runner = web.AppRunner(web.Application(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"https://localhost:{port}/v3", pki.ca.cert.read_text()
    finally:
        await runner.cleanup()


async def test_an_untrusted_keystone_certificate_stops_the_pass_in_words_until_the_bundle_names_its_ca(
    admin: Kube, ours: Recorder, namespace: str, https_keystone: tuple[str, str]
) -> None:
    url, ca = https_keystone
    nova = await stored_nova(admin, namespace, keystoneEndpoint=url)
    inputs = await stored(admin, namespace, *ALL_SECRETS, secret("internal-ca", **{"ca.crt": ca}))
    ctx = make_ctx(ours, nova, *inputs)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after == 15.0
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert (c["status"], c["reason"]) == ("False", "KeystoneCertificateNotTrusted")
    assert c["message"] == (
        "spec.keystoneEndpoint: the certificate of localhost is not trusted: set spec.tls.caBundleSecretRef "
        "to a bundle of the CA that issued it"
    )
    assert written(ours) == []  # stopped before the digest key and every derived Secret

    trusted = await stored_nova(admin, namespace, "trusted", keystoneEndpoint=url, **HTTPS_TLS)
    ctx = make_ctx(ours, trusted, *inputs)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after is None
    assert ctx.state.https_ca == ca

    by_hand = {"keystone_authtoken": {"cafile": "/etc/own/ca.pem"}}
    legacy = await stored_nova(admin, namespace, "legacy", keystoneEndpoint=url, extraConfig=by_hand)
    ctx = make_ctx(ours, legacy, *inputs)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after is None  # trust set up by hand: not checked
