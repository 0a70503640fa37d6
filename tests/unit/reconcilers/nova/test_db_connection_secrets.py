"""The DBConnectionSecrets step (reconciler.md §4.2): its three Secrets in one round trip, the
nova_api DSN still written before the cell block's wait."""

from __future__ import annotations

import asyncio
from typing import Any

from nova_operator import conditions
from nova_operator.reconcilers.nova import db_connection_secrets, secrets
from tests.unit.reconcilers.nova.passes import ALL_SECRETS, make_ctx, secret

DERIVED = {"nova-api-db-connection", "nova-db-connection", "nova-oslo-credentials"}


def track_applies(kube: Any) -> list[list[str]]:
    """Replace ``kube.apply`` by one that records which applies were in flight together."""
    in_flight: list[str] = []
    together: list[list[str]] = []
    plain = kube.apply

    async def apply(ref: Any, body: Any, **kw: Any) -> Any:
        in_flight.append(body["metadata"]["name"])
        together.append(list(in_flight))
        await asyncio.sleep(0.01)
        in_flight.remove(body["metadata"]["name"])
        return await plain(ref, body, **kw)

    kube.apply = apply
    return together


async def test_the_three_secrets_are_sent_at_once_and_the_digests_go_forward(kube: Any, events: Any) -> None:
    ctx = make_ctx(kube, events, *ALL_SECRETS)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after is None
    together = track_applies(kube)
    assert (await db_connection_secrets.reconcile_db_connection_secrets(ctx)).requeue_after is None
    assert max(len(t) for t in together) == 3
    assert {name for t in together for name in t} == DERIVED
    assert ctx.state.api_db_digest
    assert ctx.state.cell_db_digest


async def test_missing_cell_credentials_wait_after_the_api_dsn_is_written(kube: Any, events: Any) -> None:
    ctx = make_ctx(kube, events, ALL_SECRETS[0], secret("cell-db", username="c"), *ALL_SECRETS[2:])
    ctx.state.digest_key = b"key"  # (the Secrets step's gate would have stopped first: the step alone)
    kube.calls.clear()
    result = await db_connection_secrets.reconcile_db_connection_secrets(ctx)
    assert result.requeue_after == 15.0
    assert [name for verb, _, name in kube.calls if verb == "apply"] == ["nova-api-db-connection"]
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert (c["status"], c["reason"]) == ("False", "WaitingForDBCredentials")
    assert ctx.state.api_db_digest == ""


async def test_missing_api_credentials_write_nothing(kube: Any, events: Any) -> None:
    ctx = make_ctx(kube, events, secret("api-db", username="a"), *ALL_SECRETS[1:])
    kube.calls.clear()
    assert (await db_connection_secrets.reconcile_db_connection_secrets(ctx)).requeue_after == 15.0
    assert [c for c in kube.calls if c[0] == "apply"] == []
