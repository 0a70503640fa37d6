"""Step PoolConfig (ConfigReady, and ExtraConfigHealthy): compute-pool.conf and its ConfigMap (§8).

There is no admission webhook, so the option-catalog check of §4.2 runs here, against the
Nova's ``spec.openStackRelease``, and only when the rendered config is new (``extraConfig``
changed): a ConfigMap this CR already owns under the content-hash name was accepted when it
was written, so a later release bump that drops an option does not stop the pool. A refused
config is a ``ConfigError`` (Warning event of the same reason, once per distinct message);
no pod template ever mounts it. A pool that runs already keeps its last good ConfigMap and
the pass goes on (its DaemonSet updates and its drain do not stop over a config edit); a new
pool waits 15 s. Fixing the spec wakes the pool at once. Owned keys are exempt from the
scan, and a release without a shipped catalog fails open.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from nova_operator import apply, catalog, conditions, naming, secret_config
from nova_operator.decisions import releases, retention
from nova_operator.digests import sha256_hex
from nova_operator.kube import errors
from nova_operator.kube.owners import controlled_by, with_owner
from nova_operator.kube.resources import CONFIGMAPS, DAEMONSETS, SECRETS
from nova_operator.kube.types import Object
from nova_operator.naming import CONFIG_BASE_LABEL
from nova_operator.openstack import http
from nova_operator.reconcilers.compute.context import ComputePass, SecretTooLarge
from nova_operator.renderers import compute_pool, pod_env
from nova_operator.renderers import secrets as derived
from nova_operator.renderers.novaconf import ConfigError
from nova_operator.runtime.request import Result
from nova_operator.secret_refs import SECRET_REF_NOT_LABELLED

COND = conditions.CONFIG_READY
HEALTH = conditions.EXTRA_CONFIG_HEALTHY
WAITING_FOR_DIGEST_KEY = "WaitingForDigestKey"
WAITING_FOR_HTTPS_CA = "WaitingForHTTPSCABundle"
HTTPS_CA_INVALID = "HTTPSCABundleInvalid"


async def _extra_config_health(p: ComputePass) -> None:
    keys = compute_pool.overridden_owned_keys(p.pool.spec.extra_config)
    if not keys:
        p.set(
            HEALTH, True, "NoOwnedKeysOverridden", "extraConfig overrides no owned key of compute-pool.conf"
        )
        return
    listed = ", ".join(f"[{s}] {k}" for s, k in keys)
    message = f"extraConfig overrides owned keys of compute-pool.conf: {listed}"
    before = p.condition(HEALTH)
    p.set(HEALTH, False, "OwnedKeysOverridden", message)
    # Once when it turns False, and again when the set of keys changes; never on steady passes.
    if before is None or before.get("status") != "False" or before.get("message") != message:
        await p.emit("Warning", "ExtraConfigOwnedKeyOverride", message)


def _decoded(secret: Mapping[str, Any]) -> dict[str, bytes]:
    return {k: base64.b64decode(v or "") for k, v in (secret.get("data") or {}).items()}


def catalog_problems(release: str, extra_config: Mapping[str, Mapping[str, str]] | None) -> list[str]:
    """One message per extraConfig pair the release's option catalog does not know or marks secret."""
    return catalog.extra_config_problems(releases.base(release), extra_config, exempt=compute_pool.OWNED_KEYS)


async def reconcile_pool_config(p: ComputePass) -> Result:
    await _extra_config_health(p)
    ns, secret_name = p.namespace, p.contract_secret
    try:
        secret = await p.read(SECRETS, secret_name)
    except errors.NotFound:
        p.set(
            COND,
            False,
            "WaitingForComputeConfig",
            f"the compute contract Secret {ns}/{secret_name} does not exist; the ControlPlane mirrors it, "
            "or it must be copied here by hand",
        )
        return Result(requeue_after=p.settings.intervals.wait)
    except SecretTooLarge as exc:
        p.set(COND, False, exc.reason, f"the compute contract: {exc}")
        return Result(requeue_after=exc.requeue_after)
    except errors.KubeError as exc:
        p.set(COND, False, "ConfigError", f"reading the compute contract Secret {ns}/{secret_name}: {exc}")
        raise
    data = _decoded(secret)
    missing = [k for k in compute_pool.REQUIRED_CONTRACT_KEYS if not data.get(k)]
    if missing:
        p.set(
            COND,
            False,
            "ComputeConfigIncomplete",
            f"the compute contract Secret {ns}/{secret_name} lacks {', '.join(missing)}",
        )
        return Result(requeue_after=p.settings.intervals.wait)
    key_name = naming.digest_key_secret(p.nova_name)
    try:
        digest_key = _decoded(await p.read(SECRETS, key_name)).get("key") or b""
    except errors.NotFound:
        digest_key = b""
    if not digest_key:
        p.set(
            COND,
            False,
            WAITING_FOR_DIGEST_KEY,
            f"the Nova's digest key Secret {ns}/{key_name} (key key) does not exist yet; the Nova "
            "creates it, and the pool's compute-config-hash annotation is keyed with it",
        )
        return Result(requeue_after=p.settings.intervals.wait)
    p.digest_key = digest_key
    if (unpublished := await _publish_secret_config(p)) is not None:
        return _wait(p, *unpublished)
    if (unread := await _own_https_ca(p)) is not None:
        return _wait(p, *unread)
    try:
        desired = compute_pool.config_map(p.pool, compute_pool.pool_conf(p.pool, _release(p)))
    except ConfigError as exc:
        p.set(COND, False, "ConfigError", str(exc))
        raise
    if problems := _refused(p, desired):
        return await _keep_last_good(p, "; ".join(problems), data)
    new_config = not _accepted(p, desired)
    try:
        name = await _ensure_config_map(p, desired)
        await _prune(p, name)
    except (ConfigError, errors.KubeError, OwnershipError) as exc:
        p.set(COND, False, "ConfigError", str(exc))
        raise
    p.config_map = name
    p.contract_hash = compute_pool.contract_hash(data, digest_key)
    p.set(COND, True, "ConfigRendered", f"{compute_pool.CONFIG_FILE} is rendered into ConfigMap {name}")
    base = releases.base(_release(p))
    if new_config and base is not None:  # admission warnings without a webhook: once per new config
        for warning in catalog.admission_warnings(base, p.pool.spec.extra_config):
            await p.emit("Warning", "ExtraConfigWarning", warning)
    return Result()


def _wait(p: ComputePass, reason: str, message: str) -> Result:
    p.set(COND, False, reason, message)
    return Result(requeue_after=p.settings.intervals.wait)


async def _publish_secret_config(p: ComputePass) -> tuple[str, str] | None:
    """Apply (or withdraw) the pool's ``spec.secretConfig`` Secret; ``(reason, message)`` to wait.

    As the Nova's (``reconcilers.secret_config``): keys ``section.option`` checked against the
    Nova's release catalog, values in oslo.config form, a keyed digest of them on the pod template.
    """
    spec = p.pool.spec.secret_config
    name = compute_pool.secret_config_name(p.name)
    if spec is None:
        live = p.cached(SECRETS, p.namespace, name)
        if live is not None and controlled_by(live, p.cr["metadata"]["uid"]):
            await apply.delete_if_present(p.kube, SECRETS, name, p.namespace)
        return None
    ref = spec.secret_ref.name
    field = f"spec.secretConfig.secretRef: Secret {p.namespace}/{ref}"
    try:
        source = await p.read(SECRETS, ref)
    except errors.NotFound:
        return secret_config.WAITING_FOR_SECRET_CONFIG, f"{field} not found"
    except SecretTooLarge as exc:
        return exc.reason, f"spec.secretConfig.secretRef: {exc}"
    policy = p.settings.secret_refs
    if policy is not None and not policy.permits(source):
        return SECRET_REF_NOT_LABELLED, policy.refusal("spec.secretConfig.secretRef", p.namespace, ref)
    keys = sorted({*(source.get("data") or {}), *(source.get("stringData") or {})})
    if not keys:
        return secret_config.WAITING_FOR_SECRET_CONFIG, f"{field} has no key (each key is section.option)"
    pairs, problems = catalog.secret_config_problems(
        releases.base(_release(p)), keys, owned=compute_pool.OWNED_KEYS | secret_config.COMPUTE_MANAGED
    )
    if problems:
        return secret_config.SECRET_CONFIG_INVALID, f"{field}: " + "; ".join(problems)
    decoded = _decoded(source)
    try:
        values = {pair: decoded.get(key, b"").decode("utf-8") for key, pair in pairs.items()}
        data = derived.secret_config_data(values)
    except UnicodeDecodeError:
        return secret_config.SECRET_CONFIG_INVALID, f"{field}: a value is not valid UTF-8 text"
    except derived.CredentialNotRepresentable as exc:
        return secret_config.SECRET_CONFIG_INVALID, f"{field}: {exc}"
    desired = compute_pool.secret_config_secret(p.pool, data)
    await apply.apply(
        p.kube,
        desired,
        owner=p.cr,
        cached=p.cached(SECRETS, p.namespace, name),
        ref=SECRETS,
        digest_key=p.digest_key,
    )
    p.secret_config_secret = name
    p.secret_config_keys = tuple(sorted(data))
    p.secret_config_hash = secret_config.values_digest(data, p.digest_key)
    return None


async def _own_https_ca(p: ComputePass) -> tuple[str, str] | None:
    """The pool's own ``spec.tls`` bundle: its digest for the pod template (a rotation rolls the pool
    once); ``(reason, message)`` while it is missing or holds no certificate (never its text).

    With ``--secret-ref-label`` the pods mount the pool's copy (``compute_pool.checked_ca_name``), written
    here past the label gate only, from the bundle as this pass read and checked it: a source that
    loses the label stops the step here and the copy keeps its last labelled content (issue 36 §5, as
    the Nova's ``reconcilers.nova.checked_copies``). Without the flag, or ``spec.tls``, there is none.
    """
    tls = p.pool.spec.tls
    if tls is None or p.settings.secret_refs is None:
        await _remove_checked_ca(p)
    if tls is None:
        p.https_ca_hash = ""
        return None
    ref = tls.ca_bundle_secret_ref
    key = ref.key or "ca.crt"
    field = f"spec.tls.caBundleSecretRef: Secret {p.namespace}/{ref.name}"
    try:
        source = await p.read(SECRETS, ref.name)
    except errors.NotFound:
        return WAITING_FOR_HTTPS_CA, f"{field} not found"
    except SecretTooLarge as exc:
        return exc.reason, f"spec.tls.caBundleSecretRef: {exc}"
    policy = p.settings.secret_refs
    if policy is not None and not policy.permits(source):
        return SECRET_REF_NOT_LABELLED, policy.refusal("spec.tls.caBundleSecretRef", p.namespace, ref.name)
    raw = _decoded(source).get(key)
    if raw is None:
        return WAITING_FOR_HTTPS_CA, f"{field} has no key {key}"
    try:
        http.trusted(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return HTTPS_CA_INVALID, f"{field}: key {key} is not PEM text"
    except http.BadBundle as exc:
        return HTTPS_CA_INVALID, f"{field}: key {key} {exc}"
    p.https_ca_hash = sha256_hex(raw)
    own = compute_pool.own_ca_source(p.pool)
    if policy is not None and own is not None:
        desired = compute_pool.checked_ca_secret(p.pool, pod_env.copied_data(own, source))
        cached = p.cached(SECRETS, p.namespace, desired["metadata"]["name"])
        await apply.apply(p.kube, desired, owner=p.cr, cached=cached, ref=SECRETS, digest_key=p.digest_key)
    return None


async def _remove_checked_ca(p: ComputePass) -> None:
    """A copy of the pool's bundle left from a run with ``--secret-ref-label`` (or from a removed
    ``spec.tls``), removed when the cache shows one this pool owns."""
    name = compute_pool.checked_ca_name(p.name)
    live = p.cached(SECRETS, p.namespace, name)
    if live is not None and controlled_by(live, p.cr["metadata"]["uid"]):
        await apply.delete_if_present(p.kube, SECRETS, name, p.namespace)


def _release(p: ComputePass) -> str:
    return str(((p.nova or {}).get("spec") or {}).get("openStackRelease") or "")


def _accepted(p: ComputePass, desired: Mapping[str, Any]) -> bool:
    live = p.cached(CONFIGMAPS, p.namespace, desired["metadata"]["name"])
    return live is not None and controlled_by(live, p.cr["metadata"]["uid"])


def _refused(p: ComputePass, desired: Mapping[str, Any]) -> list[str]:
    """The catalog's objections to ``extraConfig``, checked only when the rendered config is new.

    A ConfigMap this CR already owns under the content-hash name was accepted when it was
    written; the Nova's release moving on later (an option dropped in the new release) does not
    stop a pool that runs it (§4.2 checks ``extraConfig`` when it changes, not on every pass).
    """
    if _accepted(p, desired):
        return []
    return catalog_problems(_release(p), p.pool.spec.extra_config)


def _mounted_config_map(p: ComputePass) -> str | None:
    """The pool-config ConfigMap the live DaemonSet mounts (its last good config), if any."""
    ds = p.cached(DAEMONSETS, p.namespace, compute_pool.daemonset_name(p.name))
    volumes = (((ds or {}).get("spec") or {}).get("template") or {}).get("spec", {}).get("volumes") or []
    for volume in volumes:
        if volume.get("name") == "pool-config" and (volume.get("configMap") or {}).get("name"):
            return str(volume["configMap"]["name"])
    return None


async def _keep_last_good(p: ComputePass, message: str, data: Mapping[str, bytes]) -> Result:
    """A refused ``extraConfig``: ConfigError (event once per message); a running pool keeps its config.

    With a last good ConfigMap mounted, the pass goes on with it (the DaemonSet's other updates
    and the drain must not stop over a config edit); without one (a new pool) it waits 15 s.
    """
    last_good = _mounted_config_map(p)
    if last_good is not None:
        message = f"{message}; the pool keeps running on ConfigMap {last_good}"
    before = p.condition(COND)
    p.set(COND, False, "ConfigError", message)
    if before is None or before.get("message") != message:
        await p.emit("Warning", "ConfigError", message)
    if last_good is None:
        return Result(requeue_after=p.settings.intervals.wait)
    p.config_map = last_good
    p.contract_hash = compute_pool.contract_hash(data, p.digest_key)
    return Result()


class OwnershipError(Exception):
    """A child with the name this CR wants exists but belongs to someone else."""


async def _ensure_config_map(p: ComputePass, desired: Object) -> str:
    """Create the immutable ConfigMap unless it exists; an existing one is reused only if this CR owns it."""
    name = desired["metadata"]["name"]
    uid = p.cr["metadata"]["uid"]
    live = p.cached(CONFIGMAPS, p.namespace, name)
    if live is None:
        try:
            live = await p.kube.create(CONFIGMAPS, with_owner(desired, p.cr), p.namespace)
        except errors.Conflict:  # AlreadyExists (stale cache or a twin): judge the live one
            live = await p.kube.get(CONFIGMAPS, name, p.namespace)
    if not controlled_by(live, uid):
        raise OwnershipError(f"ConfigMap {p.namespace}/{name} exists and is not owned by this NovaCompute")
    return str(name)


async def _prune(p: ComputePass, current: str) -> None:
    """Keep the current ConfigMap and the newest ``config_map_history`` others this CR owns.

    They are read from the ConfigMaps informer (a converged pass lists nothing), or listed when the
    namespace is not cached. A cache that lags is harmless: the current one is kept by name, one
    deleted already is a NotFound, one not seen yet is pruned on a later pass.
    """
    base = compute_pool.config_base_label(p.name)
    items = p.listed(CONFIGMAPS, p.namespace, {CONFIG_BASE_LABEL: base})
    if items is None:
        listed = await p.kube.list(CONFIGMAPS, p.namespace, label_selector=f"{CONFIG_BASE_LABEL}={base}")
        items = listed.get("items") or []
    uid = p.cr["metadata"]["uid"]
    ours = [cm for cm in items if controlled_by(cm, uid)]
    for name in retention.surplus(ours, current, p.settings.config_map_history):
        await apply.delete_if_present(p.kube, CONFIGMAPS, name, p.namespace)
