"""Step 5, ``ComputeConfig`` (``ComputeConfigReady``): the compute contract Secret(s), reconciler.md §4.5.

``{name}-compute-config`` is applied under its stable name and named in
``status.computeConfigSecretRef``. While ``spec.remoteCompute`` is set, the remote contract
``{name}-remote-compute-config`` follows the same shape with the remote transport URL and
Keystone endpoint; a missing remote URL is a non-stopping wait (computes read the contract,
the control plane does not). Only when both are as the spec asks: ``ComputeConfigPublished``.
"""

from __future__ import annotations

from typing import Final

from nova_operator import conditions
from nova_operator.kube.errors import KubeError
from nova_operator.kube.resources import SECRETS
from nova_operator.naming import Component
from nova_operator.reconcilers.nova.context import PassContext, secret_value
from nova_operator.renderers import novaconf
from nova_operator.renderers import secrets as derived
from nova_operator.runtime.request import Result

CONDITION: Final = conditions.COMPUTE_CONFIG_READY
PUBLISHED: Final = "ComputeConfigPublished"
COMPUTE_CONFIG_ERROR: Final = "ComputeConfigError"
WAITING_FOR_REMOTE_URL: Final = "WaitingForRemoteTransportURL"


class RemoteContractRefused(Exception):
    """The remote transport URL cannot be published (the pass stops and backs off)."""


def _contract(ctx: PassContext, fragment: str, transport_url: str, *, remote: bool) -> dict[str, object]:
    return derived.compute_config_secret(
        ctx.nova,
        fragment=fragment,
        transport_url=transport_url,
        password=ctx.state.service_user_password,
        metadata_secret=ctx.state.metadata_secret,
        ca_crt=ctx.state.broker_ca or None,
        https_ca=ctx.state.https_ca or None,
        client_cert=(ctx.state.broker_client_cert, ctx.state.broker_client_key)
        if ctx.state.broker_client_cert
        else None,
        remote=remote,
    )


async def _remote(ctx: PassContext, inputs: novaconf.ConfInputs) -> str | None:
    """Publish or withdraw the remote contract; a False reason and message when it is not as asked."""
    remote = ctx.nova.spec.remote_compute
    name = f"{ctx.name}-{Component.REMOTE_COMPUTE_CONFIG}"
    if remote is None:
        await ctx.remove(SECRETS, name)
        ctx.status.pop("remoteComputeConfigSecretRef", None)
        return None
    ref = remote.transport_url_secret_ref
    key = ref.key or "transport_url"
    url = secret_value(await ctx.live(SECRETS, ref.name), key)
    if not url:
        return (
            f"{WAITING_FOR_REMOTE_URL}:spec.remoteCompute.transportURLSecretRef: Secret "
            f"{ctx.namespace}/{ref.name} has no non-empty key {key}"
        )
    scheme, sep, _ = url.partition("://")
    if not sep or scheme != "rabbit":  # a remote compute would join no bus: halt (nova-crd §11.2)
        message = (  # never echo the URL or a part of it: it carries a password
            "spec.remoteCompute.transportURLSecretRef: the transport URL scheme must be rabbit, not "
            f"{derived.shown_scheme(url)}"
        )
        ctx.set(CONDITION, False, COMPUTE_CONFIG_ERROR, message)
        raise RemoteContractRefused(message)
    try:
        fragment = novaconf.render_compute_fragment(
            inputs, remote=novaconf.RemoteComputeInputs(keystone_endpoint=remote.keystone_endpoint)
        )
    except novaconf.ConfigError as exc:
        return f"{COMPUTE_CONFIG_ERROR}:remote compute contract: {exc}"
    await ctx.ensure(_contract(ctx, fragment, url, remote=True))
    ctx.status["remoteComputeConfigSecretRef"] = {"name": name}
    return None


def _redacted(ctx: PassContext, text: str) -> str:
    """``text`` with every credential this step writes blanked (a server message may quote a value)."""
    for value in (
        ctx.state.transport_url,
        ctx.state.service_user_password,
        ctx.state.metadata_secret,
        ctx.state.broker_client_key,
    ):
        if value:
            text = text.replace(value, "***")
    return text


async def reconcile_compute_config(ctx: PassContext) -> Result:
    inputs = novaconf.conf_inputs(ctx.nova)
    try:
        fragment = novaconf.render_compute_fragment(inputs)
    except novaconf.ConfigError as exc:
        ctx.set(CONDITION, False, COMPUTE_CONFIG_ERROR, f"compute contract: {exc}")
        return Result()
    try:
        published = await ctx.ensure(_contract(ctx, fragment, ctx.state.transport_url, remote=False))
        ctx.status["computeConfigSecretRef"] = {"name": published["metadata"]["name"]}
        problem = await _remote(ctx, inputs)
    except KubeError as exc:  # a refused or failed write of a contract Secret (§4.5)
        ctx.set(
            CONDITION,
            False,
            COMPUTE_CONFIG_ERROR,
            f"publishing the compute contract: {_redacted(ctx, str(exc))}",
        )
        raise
    if problem is not None:
        reason, _, message = problem.partition(":")
        ctx.set(CONDITION, False, reason, message)
        return Result()
    ctx.set(CONDITION, True, PUBLISHED, "The compute contract is published")
    return Result()
