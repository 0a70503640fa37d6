"""Step NovaRef (condition NovaReady): find the Nova and wait until it can carry a pool (§6)."""

from __future__ import annotations

import base64

from pydantic import ValidationError

from nova_operator import conditions
from nova_operator.decisions import spec_routes
from nova_operator.kube import errors
from nova_operator.kube.resources import NOVAS, SECRETS
from nova_operator.models.nova import Nova
from nova_operator.openstack import Credentials
from nova_operator.reconcilers.compute.context import ComputePass, SecretTooLarge
from nova_operator.renderers.compute_pool import pool_image
from nova_operator.renderers.novaconf import CONTRACT_HTTPS_CA_KEY
from nova_operator.runtime.request import Result
from nova_operator.secret_refs import SECRET_REF_NOT_LABELLED

COND = conditions.NOVA_REF_READY


def _wait(p: ComputePass, reason: str, message: str) -> Result:
    p.set(COND, False, reason, message)
    return Result(requeue_after=p.settings.intervals.wait)  # every NovaReady wait: 15 s


async def _contract_https_ca(p: ComputePass, contract: str) -> str:
    """The Nova's ``spec.tls`` bundle as its compute contract carries it (``https-ca.crt``), which the
    operator's calls for the pool trust; empty while the contract is absent or does not carry it yet
    (the calls then fail on the certificate and say so)."""
    try:
        secret = await p.read(SECRETS, contract)
    except (errors.NotFound, SecretTooLarge):
        return ""
    encoded = (secret.get("data") or {}).get(CONTRACT_HTTPS_CA_KEY) or ""
    try:
        return base64.b64decode(encoded).decode("utf-8") if encoded else ""
    except (UnicodeDecodeError, ValueError):
        return ""


async def reconcile_nova_ref(p: ComputePass) -> Result:
    ns, name = p.namespace, p.nova_name
    try:
        raw = await p.read(NOVAS, name)
    except errors.NotFound:
        return _wait(p, "NovaNotFound", f"Nova {ns}/{name} not found")
    except errors.KubeError as exc:
        p.set(COND, False, "NovaError", f"reading Nova {ns}/{name}: {exc}")
        raise
    status = raw.get("status") or {}
    release = status.get("installedRelease") or ""
    if not release:
        return _wait(p, "WaitingForInstalledRelease", f"Nova {ns}/{name} has no installed release yet")
    ref = (status.get("computeConfigSecretRef") or {}).get("name") or ""
    if not ref:
        return _wait(
            p, "ComputeConfigNotPublished", f"Nova {ns}/{name} has not published its compute contract"
        )
    # The Nova's own cluster (spec.targetClusterRef) is out of scope: it is always the local one.
    try:
        nova = Nova.model_validate(raw)
    except ValidationError as exc:
        # a rule only the model checks stops only the Nova step that consumes the field; the
        # pool needs none of those fields, so it goes on with the rest of the spec
        routed = spec_routes.route(raw, exc)
        if routed is None:
            p.set(COND, False, "NovaError", f"Nova {ns}/{name} does not parse: {str(exc).splitlines()[0]}")
            raise
        nova = routed.nova
    user = nova.spec.service_user
    secret_name, key = user.secret_ref.name, user.secret_ref.key or "password"
    try:
        secret = await p.read(SECRETS, secret_name)  # cached once the namespace is listed
    except errors.NotFound:
        secret = {}
    except SecretTooLarge as exc:
        return _wait(p, exc.reason, f"Nova {ns}/{name} spec.serviceUser.secretRef: {exc}")
    except errors.KubeError as exc:
        p.set(COND, False, "NovaError", f"reading the service-user Secret {ns}/{secret_name}: {exc}")
        raise
    policy = p.settings.secret_refs
    if secret and policy is not None and not policy.permits(secret):
        return _wait(
            p,
            SECRET_REF_NOT_LABELLED,
            policy.refusal(f"Nova {ns}/{name} spec.serviceUser.secretRef", ns, secret_name),
        )
    encoded = (secret.get("data") or {}).get(key) or ""
    try:
        password = base64.b64decode(encoded).decode("utf-8") if encoded else ""
    except (UnicodeDecodeError, ValueError):
        return _wait(
            p,
            "SecretNotText",
            f"key {key} of the service-user Secret {ns}/{secret_name} is not valid UTF-8 text",
        )
    if not password:
        return _wait(
            p,
            "WaitingForServiceUserSecret",
            f"waiting for key {key} in the service-user Secret {ns}/{secret_name}",
        )
    ca_bundle = await _contract_https_ca(p, ref) if nova.spec.tls is not None else ""
    p.nova = raw
    p.image = pool_image(p.pool, release)
    p.contract_secret = ref
    p.nova_url = p.settings.nova_api_url(name, ns)
    p.credentials = Credentials(
        auth_url=str(nova.spec.keystone_endpoint),
        username=user.username,
        password=password,
        project_name=user.project_name,
        user_domain_name=user.user_domain_name,
        project_domain_name=user.project_domain_name,
        ca_bundle=ca_bundle,
    )
    p.set(COND, True, "NovaResolved", f"Nova {ns}/{name} is installed at release {release}")
    return Result()
