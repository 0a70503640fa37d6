"""Issue 26 item 2 on the real API server: the Secrets cache holds the data of the Secrets a Nova reads only.

A namespace holds the Nova's inputs, a managed bus, and many large Secrets no Nova names. Once the
Nova is Ready the operator's Secrets cache holds those as references (no data), the ones the Nova
reads whole, and a converged pass sends no request. Then the Nova is edited to read one of the
withheld Secrets: the pass reads it (one GET) and publishes its URL, later passes read it from the
cache, and a change of that Secret wakes the Nova on its own.
"""

from __future__ import annotations

import base64
import os

import pytest

from nova_operator.kube import Kube
from nova_operator.kube.resources import NOVAS, SECRETS
from nova_operator.reconcilers.nova.secret_reads import DERIVED_SUFFIXES
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.request import Request
from tests.integration.nova.inputs import (
    create_bus,
    create_inputs,
    grown,
    is_ready,
    nova_body,
    requests_by_verb,
    secret,
    settled,
)
from tests.integration.nova.passes import make_ctx, stored, stored_nova
from tests.integration.nova.requests import Recorder

from .conftest import Operator, Simulator, wait_for  # type: ignore[import-not-found]

pytestmark = pytest.mark.integration

UNREAD = 24
SIZE = 256 * 1024  # bytes of random data in each Secret no Nova reads
READ = ("api-db", "cell-db", "service-user", "metadata-proxy", "rabbitmq-default-user")
URL_V2 = "rabbit://nova:s3cret-v2@rabbitmq-v2.example.org:5672/"
URL_V3 = "rabbit://nova:s3cret-v3@rabbitmq-v3.example.org:5672/"


def large(name: str) -> dict[str, object]:
    blob = base64.b64encode(os.urandom(SIZE)).decode()
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": {"blob": blob}}


async def published_url(admin: Kube, ns: str) -> str:
    derived = await admin.get(SECRETS, "nova-transport-url", ns)
    return base64.b64decode(derived["data"]["transport_url"]).decode()


async def test_unread_secrets_are_held_without_data_and_a_newly_named_one_is_read_once_and_wakes_the_nova(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    for i in range(UNREAD):
        await admin.create(SECRETS, large(f"sh.helm.release.v1.app.v{i}"), ns)
    await admin.create(SECRETS, secret("bus-v2", {"transport_url": URL_V2}), ns)  # unread, for now
    await create_inputs(admin, ns, skip=("bus",))
    await create_bus(admin, ns)
    await admin.create(NOVAS, nova_body(messaging={"clusterRef": {"name": "rabbitmq"}}), ns)
    await wait_for(lambda: admin.get(NOVAS, "nova", ns), is_ready, within=60)
    simulator.hold_jobs = True
    await settled(operator)

    cache = operator.controller.reconciler.caches[SECRETS]  # type: ignore[attr-defined]
    unread = [Request(ns, f"sh.helm.release.v1.app.v{i}") for i in range(UNREAD)] + [Request(ns, "bus-v2")]
    assert all(key in cache for key in unread)  # they are listed and watched (their events still count)
    assert [k.name for k in unread if not cache.withheld(k)] == []
    assert [k.name for k in unread if "data" in cache.get(k.name, ns)] == []
    stored = sum(len(cache._items[k].data) for k in unread)
    assert stored < UNREAD * 1024, stored  # references only: not a trace of the 6 MiB of data
    derived = [f"nova{suffix}" for suffix in DERIVED_SUFFIXES if Request(ns, f"nova{suffix}") in cache]
    assert {"nova-transport-url", "nova-digest-key", "nova-oslo-credentials"} <= set(derived)
    for name in (*READ, *derived):
        assert not cache.withheld(Request(ns, name)), name
        assert cache.get(name, ns)["data"], name

    before = requests_by_verb(operator.metrics)
    for _ in range(3):
        await operator.force_pass("nova")
    assert grown(before, requests_by_verb(operator.metrics)) == {}, "a converged pass sent requests"

    # The Nova now names a Secret the cache holds without its data: read once, then from the cache.
    await admin.patch(
        NOVAS, "nova", {"spec": {"messaging": {"clusterRef": None, "secretRef": {"name": "bus-v2"}}}}, ns
    )
    await wait_for(lambda: published_url(admin, ns), lambda url: "rabbitmq-v2.example.org" in url, within=30)
    await settled(operator)
    gets = grown(before, requests_by_verb(operator.metrics)).get(("get", "secrets"), 0.0)
    assert gets == 1.0, f"the newly named Secret was read {gets} times"
    assert not cache.withheld(Request(ns, "bus-v2"))
    assert cache.withheld(Request(ns, "rabbitmq-default-user"))  # no longer read: narrowed again

    after = requests_by_verb(operator.metrics)
    await operator.force_pass("nova")
    assert grown(after, requests_by_verb(operator.metrics)) == {}, "a converged pass sent requests"

    # A change of that Secret wakes the Nova by itself (no forced pass): the URL it publishes follows.
    await admin.patch(
        SECRETS, "bus-v2", {"data": {"transport_url": base64.b64encode(URL_V3.encode()).decode()}}, ns
    )
    await wait_for(lambda: published_url(admin, ns), lambda url: "rabbitmq-v3.example.org" in url, within=30)
    await settled(operator)
    assert ("get", "secrets") not in grown(after, requests_by_verb(operator.metrics))


async def test_a_withheld_secret_is_read_once_then_from_the_cache(admin: Kube, namespace: str) -> None:
    """``PassContext.live`` in a pass over a stored Nova: a Secret the cache holds as a reference
    only is read with one GET and handed to the cache; the next pass reads it from there, and a
    Secret the covering cache does not hold is absent without a request."""
    bus, api_db = await stored(admin, namespace, large("bus"), large("api-db"))
    cache = Cache(str(SECRETS))
    cache.cover({namespace})
    cache.upsert({"apiVersion": "v1", "kind": "Secret", "metadata": bus["metadata"]}, whole=False)
    cache.upsert(api_db)
    ours = Recorder.of(admin)
    nova = await stored_nova(admin, namespace)
    ctx = make_ctx(ours, nova, caches={SECRETS: cache})
    first = await ctx.live(SECRETS, "bus")
    assert first is not None
    assert first["data"] == bus["data"]
    assert ours.called() == [("get", "secrets", "200")]
    again = await make_ctx(ours, nova, caches={SECRETS: cache}).live(SECRETS, "bus")
    assert again is not None
    assert again["data"] == bus["data"]
    assert await ctx.live(SECRETS, "api-db") is not None
    assert await ctx.live(SECRETS, "absent") is None
    assert ours.called() == [("get", "secrets", "200")]  # one GET in all: the rest came from the cache
