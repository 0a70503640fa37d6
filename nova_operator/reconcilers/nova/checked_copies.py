"""``--secret-ref-label``'s copies of the Secrets the pods mount by name (issue 36 §5, the label gate).

The database TLS Secrets and the CA bundles of the message bus and of HTTPS reach the pods as
volumes, and the kubelet keeps a mounted Secret's files in step with the Secret: mounted by name, a
Secret would reach the running pods with whatever it holds later, labelled or not. With the flag,
the pods mount the Nova's copies instead (``naming.checked_copy``: ``{name}-checked-api-db-tls``,
``-checked-cell-db-tls``, ``-checked-messaging-ca``, ``-checked-https-ca``, the keys the pods take,
``pod_env.mounted_secrets``), which the Secrets step
writes after its label gate, and only from sources that carry the label as this pass reads them. A
source without the label (or absent) stops the step at the gate, whose condition names it: its
content never reaches a copy, and the copy keeps the last labelled content. Without the flag there
is no copy (one left from a run with it is removed) and the pods mount the spec's Secrets as before.
A NovaCompute's own ``spec.tls`` bundle has the pool's copy, made the same way
(``reconcilers.compute.pool_config``).

A copy is applied like every derived Secret: no request while it already holds that content.
"""

from __future__ import annotations

from nova_operator import naming
from nova_operator.kube.resources import SECRETS
from nova_operator.reconcilers.nova.context import PassContext
from nova_operator.renderers import pod_env
from nova_operator.renderers import secrets as derived


async def publish_checked_copies(ctx: PassContext) -> None:
    """Write each copy the spec needs from its labelled sources; remove those it does not (or all,
    without the flag). A source found without the label here leaves its copy as it is."""
    policy = ctx.options.secret_refs
    wanted = pod_env.mounted_secrets(ctx.nova) if policy is not None else {}
    for which in naming.CHECKED_COPIES:
        mounted = wanted.get(which)
        if mounted is None or policy is None:
            await ctx.remove(SECRETS, naming.checked_copy(ctx.name, which))
            continue
        data: dict[str, str] = {}
        for source in mounted:
            secret = await ctx.live(SECRETS, source.secret)
            if secret is None or not policy.permits(secret):
                break  # changed since the gate read it: the next pass's gate names it
            data.update(pod_env.copied_data(source, secret))
        else:
            await ctx.ensure(derived.checked_copy_secret(ctx.nova, which, data))
