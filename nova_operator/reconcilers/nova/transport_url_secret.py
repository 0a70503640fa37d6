"""Step 3, ``TransportURLSecret`` (reports ``SecretsReady``): the derived ``{name}-transport-url`` (§4.3).

Managed bus: the ``RabbitmqCluster``'s default-user Secret gives user, password, host and
port; that Secret is read only from the Nova's own namespace, whatever the cluster's status
says. Brownfield bus: ``spec.messaging.secretRef`` holds the URL. The URL is checked before
anything is written (explicit port, no IPv6 literal): a rejected URL leaves the previously
written Secret as it was. No message ever carries the URL.
"""

from __future__ import annotations

import re
from typing import Final

from nova_operator import conditions, intervals
from nova_operator.digests import credential_digest
from nova_operator.kube.resources import RABBITMQ_CLUSTERS, SECRETS
from nova_operator.models.common import DNS1123_SUBDOMAIN
from nova_operator.reconcilers.nova.context import PassContext, secret_value
from nova_operator.renderers import secrets as derived
from nova_operator.runtime.request import Result

CONDITION: Final = conditions.SECRETS_READY
WAITING_FOR_MESSAGING: Final = "WaitingForMessagingCredentials"
TRANSPORT_URL_REJECTED: Final = "TransportURLRejected"


def _wait(ctx: PassContext, reason: str, message: str) -> Result:
    ctx.set(CONDITION, False, reason, message)
    return Result(requeue_after=intervals.SECRET_POLL)


async def _managed_url(ctx: PassContext, cluster: str) -> str | Result:
    rabbit = await ctx.live(RABBITMQ_CLUSTERS, cluster)
    if rabbit is None:
        return _wait(ctx, WAITING_FOR_MESSAGING, f"RabbitmqCluster {ctx.namespace}/{cluster} not found")
    ref = ((rabbit.get("status") or {}).get("defaultUser") or {}).get("secretReference") or {}
    if not ref.get("name"):
        return _wait(
            ctx,
            WAITING_FOR_MESSAGING,
            f"RabbitmqCluster {ctx.namespace}/{cluster} publishes no default user yet",
        )
    namespace = ref.get("namespace") or ctx.namespace
    if namespace != ctx.namespace or not re.fullmatch(DNS1123_SUBDOMAIN, str(ref["name"])):
        # The status of an object the tenant controls may point anywhere: read only our own namespace.
        return _wait(
            ctx,
            WAITING_FOR_MESSAGING,
            f"RabbitmqCluster {ctx.namespace}/{cluster} publishes its default user as Secret "
            f"{namespace!r}/{ref['name']!r}; only a Secret of a valid name in the Nova's own namespace "
            f"{ctx.namespace} is read",
        )
    secret = await ctx.live(SECRETS, ref["name"])
    values = {k: secret_value(secret, k) for k in ("username", "password", "host", "port")}
    if any(not v for v in values.values()):
        missing = ", ".join(k for k, v in values.items() if not v)
        return _wait(
            ctx, WAITING_FOR_MESSAGING, f"Secret {namespace}/{ref['name']} of the bus lacks {missing}"
        )
    return derived.managed_transport_url(
        username=values["username"] or "",
        password=values["password"] or "",
        host=values["host"] or "",
        port=values["port"] or "",
    )


async def reconcile_transport_url_secret(ctx: PassContext) -> Result:
    messaging = ctx.nova.spec.messaging
    if messaging.cluster_ref is not None:
        found = await _managed_url(ctx, messaging.cluster_ref.name)
    else:
        assert messaging.secret_ref is not None  # the CRD requires exactly one of the two
        key = messaging.secret_ref.key or "transport_url"
        url = secret_value(await ctx.live(SECRETS, messaging.secret_ref.name), key)
        if not url:
            found = _wait(
                ctx,
                WAITING_FOR_MESSAGING,
                f"spec.messaging.secretRef: Secret {ctx.namespace}/{messaging.secret_ref.name} has no "
                f"non-empty key {key}",
            )
        else:
            found = url
    if isinstance(found, Result):
        return found
    try:
        port = derived.check_transport_url(found)
    except derived.TransportURLRejected as exc:
        return _wait(ctx, TRANSPORT_URL_REJECTED, str(exc))
    await ctx.ensure(derived.transport_url_secret(ctx.nova, found))
    ctx.state.transport_url = found
    ctx.state.transport_digest = credential_digest(found, ctx.state.digest_key)
    ctx.state.broker_port = port
    return Result()
