"""Step 1, ``Secrets`` (``SecretsReady``): the secret-store and credential gates (reconciler.md §4.1).

Each gate is a wait (``SecretsReady=False`` with its reason, requeue 15 s, every value left
empty). Messages name the Secret, the key and the spec field, never a value. The store gate
runs only when ``spec.secretStoreRef`` is set (a cluster without External Secrets must work).
The ``spec.tls`` bundle is read (and must hold a PEM certificate), and an https
``spec.keystoneEndpoint`` must present a certificate it (or, unset, the system's CAs) verifies
(``openstack.trust``: one TLS handshake, remembered). The last gate is ``spec.secretConfig``
(``publish_secret_config``), which publishes ``{name}-secret-config``.
With ``--secret-ref-label`` the step also writes the label-checked copies of the Secrets the pods
mount by name (``checked_copies``), past the label gate only.
"""

from __future__ import annotations

from secrets import token_hex
from typing import Final
from urllib.parse import urlsplit

from nova_operator import apply, catalog, conditions, intervals, naming, ownership, secret_config
from nova_operator.decisions import releases
from nova_operator.decisions.readiness import custom_resource_ready
from nova_operator.digests import credential_digest
from nova_operator.kube.resources import CLUSTER_SECRET_STORES, SECRET_STORES, SECRETS
from nova_operator.openstack import http
from nova_operator.openstack.trust import Verdict
from nova_operator.reconcilers.nova.checked_copies import publish_checked_copies
from nova_operator.reconcilers.nova.context import PassContext, Unread, secret_value
from nova_operator.reconcilers.nova.secret_reads import secret_ref_fields
from nova_operator.renderers import novaconf
from nova_operator.renderers import secrets as derived
from nova_operator.renderers.secrets import CredentialNotRepresentable, oslo_value
from nova_operator.runtime.request import Result
from nova_operator.secret_refs import SECRET_REF_NOT_LABELLED

CONDITION: Final = conditions.SECRETS_READY

SECRET_STORE_NOT_READY: Final = "SecretStoreNotReady"
CLUSTER_SECRET_STORE_UNSUPPORTED: Final = "ClusterSecretStoreUnsupported"
WAITING_FOR_DB_CREDENTIALS: Final = "WaitingForDBCredentials"
WAITING_FOR_SERVICE_USER: Final = "WaitingForServiceUserCredentials"
WAITING_FOR_METADATA_SECRET: Final = "WaitingForMetadataSharedSecret"
METADATA_SECRET_EMPTY: Final = "MetadataSharedSecretEmpty"
WAITING_FOR_MESSAGING_CA: Final = "WaitingForMessagingCA"
WAITING_FOR_MESSAGING_CLIENT_CERT: Final = "WaitingForMessagingClientCert"
WAITING_FOR_CACHE_TLS: Final = "WaitingForCacheTLS"
_CLIENT_CERT_KEYS = ("tls.crt", "tls.key")
WAITING_FOR_HTTPS_CA: Final = "WaitingForHTTPSCABundle"
HTTPS_CA_INVALID: Final = "HTTPSCABundleInvalid"
KEYSTONE_NOT_TRUSTED: Final = "KeystoneCertificateNotTrusted"
CREDENTIAL_NOT_REPRESENTABLE: Final = "CredentialNotRepresentable"
SECRETS_AVAILABLE: Final = "SecretsAvailable"
_DB_KEYS = ("username", "password")


async def missing_keys(ctx: PassContext, name: str, keys: tuple[str, ...]) -> str | None:
    """None when Secret ``name`` carries every key; else what is missing (no values)."""
    secret = await ctx.live(SECRETS, name)
    if secret is None:
        return f"Secret {ctx.namespace}/{name} not found"
    absent = [k for k in keys if secret_value(secret, k) is None]
    if absent:
        return f"Secret {ctx.namespace}/{name} has no key {', '.join(absent)}"
    return None


def wait(ctx: PassContext, reason: str, message: str) -> Result:
    ctx.set(CONDITION, False, reason, message)
    return Result(requeue_after=intervals.SECRET_POLL)


async def _store_gate(ctx: PassContext) -> tuple[str, str] | None:
    """(reason, message) when the named store blocks the pass; None when unset or Ready."""
    ref = ctx.nova.spec.secret_store_ref
    if ref is None:
        return None
    if ref.kind == "SecretStore":
        store = await ctx.live(SECRET_STORES, ref.name)
    elif ctx.options.namespaced:  # a namespace-scoped install reads nothing cluster-scoped (§4.1)
        return (
            CLUSTER_SECRET_STORE_UNSUPPORTED,
            f"spec.secretStoreRef: ClusterSecretStore {ref.name} cannot be used by an operator scoped to "
            "namespaces (--namespace); name a SecretStore in this namespace instead",
        )
    else:
        store = await ctx.live(CLUSTER_SECRET_STORES, ref.name, namespace="")
    if store is None:
        return SECRET_STORE_NOT_READY, f"{ref.kind} {ref.name} not found"
    if not custom_resource_ready(store):
        return SECRET_STORE_NOT_READY, f"{ref.kind} {ref.name} is not Ready"
    return None


async def _label_gate(ctx: PassContext) -> tuple[str, str] | None:
    """With ``--secret-ref-label``: (reason, message) for the first Secret the spec names that lacks
    the label or does not exist yet (``nova_operator.secret_refs``); checked before any step reads
    or copies one. A Secret that appears later wakes the Nova (``SECRET_INDEX``) and is checked then.
    The pods mount only the copies written past this gate (``checked_copies``), never a named Secret."""
    policy = ctx.options.secret_refs
    if policy is None:
        return None
    for field, name in secret_ref_fields(ctx.obj):
        secret = await ctx.live(SECRETS, name)
        if secret is None:
            return SECRET_REF_NOT_LABELLED, policy.absent(field, ctx.namespace, name)
        if not policy.permits(secret):
            return SECRET_REF_NOT_LABELLED, policy.refusal(field, ctx.namespace, name)
    return None


async def digest_key(ctx: PassContext) -> bytes:
    """The Nova's HMAC key for credential digests: ``{name}-digest-key``, created once when absent."""
    name = naming.digest_key_secret(ctx.name)
    found = await ctx.peek(SECRETS, name)
    taken = (str(SECRETS), ctx.namespace, name)
    if isinstance(found, Unread) and taken not in ctx.options.taken:  # most likely absent: created first
        fresh = token_hex(32)
        made = await apply.create(
            ctx.kube,
            derived.digest_key_secret(ctx.nova, fresh),
            owner=ctx.obj,
            ref=SECRETS,
            own=ctx.wrote,
            digest_key=fresh.encode("utf-8"),
        )
        if made is not None:
            return fresh.encode("utf-8")
        ctx.options.taken.add(*taken)  # refused: an object holds the name
    if isinstance(found, Unread):
        found = await ctx.current(SECRETS, name)
    ownership.refuse_unless_ours(found, ctx.obj, ctx.marks, kind="Secret")  # never key with a stranger's
    ctx.options.taken.drop(*taken)
    key = secret_value(found, "key")
    if not key:
        key = token_hex(32)
        desired = derived.digest_key_secret(ctx.nova, key)
        await ctx.ensure_over(found, desired, ref=SECRETS, digest_key=key.encode("utf-8"))  # read once
    return key.encode("utf-8")


async def publish_secret_config(ctx: PassContext) -> tuple[str, str] | None:
    """Publish (or withdraw) ``{name}-secret-config`` (``nova_operator.secret_config``); ``(reason,
    message)`` when the pass must wait."""
    spec = ctx.nova.spec.secret_config
    name = naming.secret_config_secret(ctx.name)
    if spec is None:
        await ctx.remove(SECRETS, name)
        ctx.state.secret_config_keys, ctx.state.secret_config_digest = (), ""
        return None
    ref = spec.secret_ref.name
    field = f"spec.secretConfig.secretRef: Secret {ctx.namespace}/{ref}"
    source = await ctx.live(SECRETS, ref)
    if source is None:
        return secret_config.WAITING_FOR_SECRET_CONFIG, f"{field} not found"
    keys = sorted({*(source.get("data") or {}), *(source.get("stringData") or {})})
    if not keys:
        return secret_config.WAITING_FOR_SECRET_CONFIG, f"{field} has no key (each key is section.option)"
    release = releases.base(ctx.nova.spec.open_stack_release)
    pairs, problems = catalog.secret_config_problems(release, keys, owned=novaconf.OWNED_PAIRS)
    if problems:
        return secret_config.SECRET_CONFIG_INVALID, f"{field}: " + "; ".join(problems)
    values = {pair: secret_value(source, key) or "" for key, pair in pairs.items()}
    try:
        data = derived.secret_config_data(values)
    except CredentialNotRepresentable as exc:
        return secret_config.SECRET_CONFIG_INVALID, f"{field}: {exc}"
    await ctx.ensure(derived.secret_config_secret(ctx.nova, data))
    ctx.state.secret_config_keys = tuple(sorted(data))
    ctx.state.secret_config_digest = secret_config.values_digest(data, ctx.state.digest_key)
    return None


async def _https_ca(ctx: PassContext) -> str | None:
    """Read the ``spec.tls`` bundle into the pass (``state.https_ca``); a message when it holds no
    certificate (never its text), None when it is usable or unset."""
    tls = ctx.nova.spec.tls
    if tls is None:
        return None
    ref = tls.ca_bundle_secret_ref
    key = ref.key or "ca.crt"
    bundle = secret_value(await ctx.live(SECRETS, ref.name), key) or ""
    try:
        http.trusted(bundle)
    except http.BadBundle as exc:
        return f"spec.tls.caBundleSecretRef: key {key} of Secret {ctx.namespace}/{ref.name} {exc}"
    ctx.state.https_ca = bundle
    return None


def _own_authtoken_cafile(ctx: PassContext) -> bool:
    """Whether ``spec.extraConfig`` sets ``[keystone_authtoken] cafile`` (trust handled by hand)."""
    extra = ctx.nova.spec.extra_config or {}
    return any(
        catalog.oslo_name(s, k) == ("keystone_authtoken", "cafile") for s, opts in extra.items() for k in opts
    )


async def _keystone_trust(ctx: PassContext) -> str | None:
    """A message when ``spec.keystoneEndpoint`` is https and its certificate definitely does not verify
    against the ``spec.tls`` bundle (or, unset, the system's CAs): every pod would fail to authenticate,
    so the pass stops here and says why. Not checked while ``spec.tls`` is unset and extraConfig sets
    ``[keystone_authtoken] cafile`` (trust configured by hand); an unreachable Keystone is no verdict."""
    spec = ctx.nova.spec
    if spec.tls is None and _own_authtoken_cafile(ctx):
        return None
    verdict = await ctx.options.trust.check(spec.keystone_endpoint, ctx.state.https_ca)
    if verdict is not Verdict.UNTRUSTED:
        return None
    host = urlsplit(spec.keystone_endpoint).hostname
    if spec.tls is None:
        return (
            f"spec.keystoneEndpoint: the certificate of {host} is not trusted: set "
            "spec.tls.caBundleSecretRef to a bundle of the CA that issued it"
        )
    ref = spec.tls.ca_bundle_secret_ref
    return (
        f"spec.keystoneEndpoint: the certificate of {host} is not trusted by the bundle of "
        f"spec.tls.caBundleSecretRef (key {ref.key or 'ca.crt'} of Secret {ctx.namespace}/{ref.name}): add "
        "the CA that issued it"
    )


async def reconcile_secrets(ctx: PassContext) -> Result:
    spec = ctx.nova.spec
    if (blocked := await _store_gate(ctx)) is not None:
        return wait(ctx, *blocked)
    if (unlabelled := await _label_gate(ctx)) is not None:
        return wait(ctx, *unlabelled)
    gates = [
        (
            spec.api_database.secret_ref.name,
            ("username", "password"),
            WAITING_FOR_DB_CREDENTIALS,
            "apiDatabase",
        ),
        (spec.database.secret_ref.name, ("username", "password"), WAITING_FOR_DB_CREDENTIALS, "database"),
        (
            spec.service_user.secret_ref.name,
            (spec.service_user.secret_ref.key or "password",),
            WAITING_FOR_SERVICE_USER,
            "serviceUser",
        ),
        (
            spec.metadata.shared_secret_ref.name,
            (spec.metadata.shared_secret_ref.key or "shared_secret",),
            WAITING_FOR_METADATA_SECRET,
            "metadata.sharedSecretRef",
        ),
    ]
    if spec.messaging.tls is not None:
        ca = spec.messaging.tls.ca_bundle_secret_ref
        gates.append(
            (ca.name, (ca.key or "ca.crt",), WAITING_FOR_MESSAGING_CA, "messaging.tls.caBundleSecretRef")
        )
        if (client := spec.messaging.tls.client_cert_secret_ref) is not None:
            gates.append(
                (
                    client.name,
                    _CLIENT_CERT_KEYS,
                    WAITING_FOR_MESSAGING_CLIENT_CERT,
                    "messaging.tls.clientCertSecretRef",
                )
            )
    if spec.cache.tls is not None:
        cache_ca = spec.cache.tls.ca_bundle_secret_ref
        gates.append(
            (cache_ca.name, (cache_ca.key or "ca.crt",), WAITING_FOR_CACHE_TLS, "cache.tls.caBundleSecretRef")
        )
        if (cache_client := spec.cache.tls.client_cert_secret_ref) is not None:
            gates.append(
                (cache_client.name, _CLIENT_CERT_KEYS, WAITING_FOR_CACHE_TLS, "cache.tls.clientCertSecretRef")
            )
    if spec.tls is not None:
        https = spec.tls.ca_bundle_secret_ref
        gates.append((https.name, (https.key or "ca.crt",), WAITING_FOR_HTTPS_CA, "tls.caBundleSecretRef"))
    for name, keys, reason, field in gates:
        if (problem := await missing_keys(ctx, name, keys)) is not None:
            return wait(ctx, reason, f"spec.{field}: {problem}")

    service = await ctx.live(SECRETS, spec.service_user.secret_ref.name)
    shared = await ctx.live(SECRETS, spec.metadata.shared_secret_ref.name)
    password = secret_value(service, spec.service_user.secret_ref.key or "password")
    metadata_secret = secret_value(shared, spec.metadata.shared_secret_ref.key or "shared_secret")
    if password is None or metadata_secret is None:
        raise RuntimeError("a credential Secret vanished between its gate and its read")  # error, not a wait
    if not metadata_secret:
        return wait(
            ctx,
            METADATA_SECRET_EMPTY,
            f"spec.metadata.sharedSecretRef: key {spec.metadata.shared_secret_ref.key or 'shared_secret'} of "
            f"Secret {ctx.namespace}/{spec.metadata.shared_secret_ref.name} is empty; nova would verify "
            "instance metadata requests against an empty key",
        )
    plain = (
        ("serviceUser.secretRef", spec.service_user.secret_ref, "password", password),
        ("metadata.sharedSecretRef", spec.metadata.shared_secret_ref, "shared_secret", metadata_secret),
    )
    for field, ref, default_key, value in plain:
        try:
            oslo_value(value)
        except CredentialNotRepresentable as exc:
            return wait(
                ctx,
                CREDENTIAL_NOT_REPRESENTABLE,
                f"spec.{field}: key {ref.key or default_key} of Secret {ctx.namespace}/{ref.name} {exc}",
            )
    if spec.messaging.tls is not None:
        ca_ref = spec.messaging.tls.ca_bundle_secret_ref
        ctx.state.broker_ca = secret_value(await ctx.live(SECRETS, ca_ref.name), ca_ref.key or "ca.crt") or ""
        if (client_ref := spec.messaging.tls.client_cert_secret_ref) is not None:
            client_secret = await ctx.live(SECRETS, client_ref.name)
            ctx.state.broker_client_cert = secret_value(client_secret, "tls.crt") or ""
            ctx.state.broker_client_key = secret_value(client_secret, "tls.key") or ""
    if (invalid := await _https_ca(ctx)) is not None:
        return wait(ctx, HTTPS_CA_INVALID, invalid)
    if (untrusted := await _keystone_trust(ctx)) is not None:
        return wait(ctx, KEYSTONE_NOT_TRUSTED, untrusted)
    ctx.state.digest_key = await digest_key(ctx)
    await publish_checked_copies(ctx)  # --secret-ref-label: what the pods mount, past the gate only
    if (unpublished := await publish_secret_config(ctx)) is not None:
        return wait(ctx, *unpublished)
    ctx.state.service_user_password = password
    ctx.state.metadata_secret = metadata_secret
    ctx.state.authtoken_digest = credential_digest(password, ctx.state.digest_key)
    ctx.state.metadata_digest = credential_digest(metadata_secret, ctx.state.digest_key)
    ctx.set(CONDITION, True, SECRETS_AVAILABLE, "All referenced Secrets are available")
    return Result()
