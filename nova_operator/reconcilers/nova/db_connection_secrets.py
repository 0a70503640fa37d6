"""Step 2, ``DBConnectionSecrets`` (reports ``SecretsReady``): the two derived pymysql DSN Secrets (§4.2),
and ``{name}-oslo-credentials`` (the service-user password and metadata secret in oslo.config form).

The ``nova_api`` half runs first and returns its own wait; the cell half is never derived
while the ``nova_api`` credentials are missing. A DSN is never written with empty
credentials. The digests go forward to the workload steps (empty on every wait).
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from nova_operator import conditions, intervals
from nova_operator.digests import credential_digest
from nova_operator.kube.resources import SECRETS
from nova_operator.pipeline import all_in_order
from nova_operator.reconcilers.nova.context import PassContext, secret_value
from nova_operator.renderers import secrets as derived
from nova_operator.runtime.request import Result

CONDITION: Final = conditions.SECRETS_READY
WAITING_FOR_DB_CREDENTIALS: Final = "WaitingForDBCredentials"


async def reconcile_db_connection_secrets(ctx: PassContext) -> Result:
    spec = ctx.nova.spec
    digests: dict[str, str] = {}
    # The Secrets this step writes go out together when it ends (one round trip, not three): on the
    # cell block's wait or failure that is the nova_api DSN alone, as if it had been written first.
    writes: list[dict[str, Any]] = []
    try:
        for which, block, field in (
            ("api", spec.api_database, "apiDatabase"),
            ("cell", spec.database, "database"),
        ):
            secret = await ctx.live(SECRETS, block.secret_ref.name)
            username, password = secret_value(secret, "username"), secret_value(secret, "password")
            if not username or not password:
                ctx.set(
                    CONDITION,
                    False,
                    WAITING_FOR_DB_CREDENTIALS,
                    f"spec.{field}.secretRef: Secret {ctx.namespace}/{block.secret_ref.name} needs non-empty "
                    "username and password",
                )
                return Result(requeue_after=intervals.SECRET_POLL)
            dsn = derived.database_dsn(ctx.nova, which, username=username, password=password)  # type: ignore[arg-type]
            writes.append(derived.dsn_secret(ctx.nova, which, dsn))  # type: ignore[arg-type]
            digests[which] = credential_digest(dsn, ctx.state.digest_key)
        # The plain credentials in oslo.config form (``$`` doubled), what the pods' env reads.
        writes.append(
            derived.oslo_credentials_secret(
                ctx.nova, password=ctx.state.service_user_password, metadata_secret=ctx.state.metadata_secret
            )
        )
    except asyncio.CancelledError:
        writes.clear()  # the pass is being cancelled: send nothing more
        raise
    finally:
        await all_in_order(*(ctx.ensure(w) for w in writes))
    ctx.state.api_db_digest = digests["api"]
    ctx.state.cell_db_digest = digests["cell"]
    return Result()
