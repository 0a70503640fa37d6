"""The DBConnectionSecrets step (reconciler.md §4.2) on the real API server: its three Secrets in one
round trip, the nova_api DSN still written before the cell block's wait.

The step runs in a ``make_ctx`` pass over a Nova stored by kube-apiserver; the credentials are stored
there and the derived Secrets are written there (requests recorded by a wrapper around the real client).
"""

from __future__ import annotations

import base64
from typing import Any

from nova_operator import conditions
from nova_operator.kube import Kube
from nova_operator.kube.resources import SECRETS
from nova_operator.pipeline import NullObserver, run_sequence
from nova_operator.reconcilers.nova import db_connection_secrets, secrets
from nova_operator.reconcilers.nova.steps import NOVA_STEPS
from tests.integration.nova.passes import ALL_SECRETS, make_ctx, secret, stored, stored_nova
from tests.integration.nova.requests import Recorder

DERIVED = {"nova-api-db-connection", "nova-db-connection", "nova-oslo-credentials"}


def track_applies(kube: Recorder) -> list[list[str]]:
    """Wrap ``kube.apply`` to record which applies were in flight together (the server answers them)."""
    in_flight: list[str] = []
    together: list[list[str]] = []
    plain = kube.apply

    async def apply(ref: Any, body: Any, **kw: Any) -> Any:
        in_flight.append(body["metadata"]["name"])
        together.append(list(in_flight))
        try:
            return await plain(ref, body, **kw)
        finally:
            in_flight.remove(body["metadata"]["name"])

    kube.apply = apply  # type: ignore[method-assign]
    return together


async def test_the_three_secrets_are_sent_at_once_and_the_digests_go_forward(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    nova = await stored_nova(admin, namespace)
    ctx = make_ctx(ours, nova, *await stored(admin, namespace, *ALL_SECRETS))
    assert (await secrets.reconcile_secrets(ctx)).requeue_after is None
    together = track_applies(ours)
    assert (await db_connection_secrets.reconcile_db_connection_secrets(ctx)).requeue_after is None
    assert max(len(t) for t in together) == 3
    assert {name for t in together for name in t} == DERIVED
    assert ctx.state.api_db_digest
    assert ctx.state.cell_db_digest
    for name in DERIVED:  # on the server, owned by the Nova
        stored_secret = await admin.get(SECRETS, name, namespace)
        assert stored_secret["metadata"]["ownerReferences"][0]["uid"] == nova["metadata"]["uid"]


async def test_missing_cell_credentials_wait_after_the_api_dsn_is_written(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    inputs = await stored(admin, namespace, ALL_SECRETS[0], secret("cell-db", username="c"), *ALL_SECRETS[2:])
    ctx = make_ctx(ours, await stored_nova(admin, namespace), *inputs)
    ctx.state.digest_key = b"key"  # (the Secrets step's gate would have stopped first: the step alone)
    result = await db_connection_secrets.reconcile_db_connection_secrets(ctx)
    assert result.requeue_after == 15.0
    assert [n for v, _, n, _ in ours.calls if v == "apply"] == ["nova-api-db-connection"]
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert (c["status"], c["reason"]) == ("False", "WaitingForDBCredentials")
    assert ctx.state.api_db_digest == ""
    await admin.get(SECRETS, "nova-api-db-connection", namespace)  # written


async def test_missing_api_credentials_write_nothing(admin: Kube, ours: Recorder, namespace: str) -> None:
    inputs = await stored(admin, namespace, secret("api-db", username="a"), *ALL_SECRETS[1:])
    ctx = make_ctx(ours, await stored_nova(admin, namespace), *inputs)
    assert (await db_connection_secrets.reconcile_db_connection_secrets(ctx)).requeue_after == 15.0
    assert [c for c in ours.calls if c[0] == "apply"] == []


async def test_a_password_that_is_not_text_is_the_steps_condition_naming_secret_and_key(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    """Issue 13: a value the tenant stored that is not UTF-8 is this step's condition, not a crash."""
    binary = base64.b64encode(b"\xff\xfe\x00Zq9-not-text").decode()
    api_db = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "api-db"}}
    api_db["data"] = {"username": base64.b64encode(b"a").decode(), "password": binary}
    inputs = await stored(admin, namespace, api_db, *ALL_SECRETS[1:])
    ctx = make_ctx(ours, await stored_nova(admin, namespace), *inputs)
    ctx.state.digest_key = b"key"  # (the Secrets step's gate would have stopped first: the step alone)
    steps = [s for s in NOVA_STEPS if s.name == "DBConnectionSecrets"]
    assert (await run_sequence(steps, ctx, NullObserver())).requeue_after is None
    cond = ctx.condition(conditions.SECRETS_READY)
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "SecretNotText")
    assert f"key password of Secret {namespace}/api-db" in cond["message"]
    assert "Zq9" not in cond["message"]
    assert [c for c in ours.calls if c[0] == "apply"] == []
