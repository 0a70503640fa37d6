"""The TransportURLSecret step (``reconcile_transport_url_secret``) on the real API server: the
RabbitmqCluster's default user it may read (issue 13), the cluster as the cache keeps it
(``cache_fields``), a value that is not text, and the keyed digest of the Secret it writes (issue 26
item 7).

Each pass runs in ``make_ctx`` over a Nova stored by kube-apiserver; the inputs are stored there and
the caches hold the server's copies. Requests are recorded by a wrapper around the real client
(``Recorder``) with the server's answers.
"""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest

from nova_operator import apply, conditions
from nova_operator.kube import Kube
from nova_operator.kube.resources import NAMESPACES, RABBITMQ_CLUSTERS, SECRETS
from nova_operator.kube.types import Object
from nova_operator.metrics import WRITE_VERBS
from nova_operator.pipeline import NullObserver, run_sequence
from nova_operator.reconcilers.nova import cache_fields, secrets, transport_url_secret
from nova_operator.reconcilers.nova.steps import NOVA_STEPS
from nova_operator.runtime.cache import Cache
from nova_operator.runtime.transform import Transform
from tests.integration.nova.passes import ALL_SECRETS, make_ctx, secret, stored, stored_nova
from tests.integration.nova.requests import Recorder

ON_CLUSTER: dict[str, Any] = {"messaging": {"clusterRef": {"name": "rabbit"}}}
RABBIT_RESOURCE = f"{RABBITMQ_CLUSTERS.plural}.{RABBITMQ_CLUSTERS.group}"


def written(kube: Recorder) -> list[tuple[str, str, str]]:
    return [(v, r, n) for v, r, n, _ in kube.calls if v in WRITE_VERBS]


async def rabbit(admin: Kube, ns: str, default_user: dict[str, Any] | None) -> Object:
    """A RabbitmqCluster ``rabbit`` whose status publishes ``default_user`` (as its operator would)."""
    body = {
        "apiVersion": RABBITMQ_CLUSTERS.api_version,
        "kind": "RabbitmqCluster",
        "metadata": {"name": "rabbit"},
    }
    await admin.create(RABBITMQ_CLUSTERS, {**body, "spec": {"replicas": 3}}, ns)
    status: dict[str, Any] = {"conditions": [{"type": "AllReplicasReady", "status": "True"}]}
    if default_user is not None:
        status["defaultUser"] = {
            "secretReference": default_user,
            "serviceReference": {"name": "rabbit", "namespace": ns},
        }
    return await admin.patch_status(RABBITMQ_CLUSTERS, "rabbit", {"status": status}, ns)


def bus_secret(name: str) -> Object:
    return secret(name, username="admin", password="victim-password", host="rabbit.victim", port="5672")


# -- the default user's Secret: only the Nova's own namespace (issue 13) ---------------------------


KEYS: dict[str, str] = {"username": "username", "password": "password"}  # the CRD requires keys and namespace


@pytest.mark.parametrize(
    # "own" is the Nova's namespace: the CRD refuses a reference without a namespace, so a name that
    # would climb out of it is tried under the Nova's own namespace
    "secret_ref",
    [
        {"name": "prod-rabbit-default-user", "namespace": "victim"},
        {"name": "../../victim/secrets/prod-rabbit-default-user", "namespace": "own"},
        {"name": "..", "namespace": "own"},
    ],
)
async def test_a_default_user_secret_outside_the_namespace_is_never_read(
    admin: Kube, ours: Recorder, namespace: str, secret_ref: dict[str, str]
) -> None:
    victim_ns = f"{namespace}-victim"
    await admin.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": victim_ns}})
    victim = await admin.create(SECRETS, bus_secret("prod-rabbit-default-user"), victim_ns)
    ref = {k: v.replace("victim", victim_ns).replace("own", namespace) for k, v in secret_ref.items()}
    await rabbit(admin, namespace, {**ref, "keys": KEYS})
    ctx = make_ctx(ours, await stored_nova(admin, namespace, **ON_CLUSTER), victim)
    result = await transport_url_secret.reconcile_transport_url_secret(ctx)
    assert result.requeue_after == 15.0
    cond = ctx.condition(conditions.SECRETS_READY)
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "WaitingForMessagingCredentials")
    assert "own namespace" in cond["message"]
    assert "victim-password" not in cond["message"]
    assert ctx.state.transport_url == ""
    assert written(ours) == []
    assert [c for c in ours.calls if c[1] == "secrets"] == []


async def test_a_default_user_secret_in_the_own_namespace_is_used(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    await rabbit(admin, namespace, {"name": "rabbit-default-user", "namespace": namespace, "keys": KEYS})
    inputs = await stored(admin, namespace, bus_secret("rabbit-default-user"))
    ctx = make_ctx(ours, await stored_nova(admin, namespace, **ON_CLUSTER), *inputs)
    ctx.state.digest_key = b"k" * 32  # what the Secrets step hands on
    assert (await transport_url_secret.reconcile_transport_url_secret(ctx)).requeue_after is None
    assert ctx.state.transport_url == "rabbit://admin:victim-password@rabbit.victim:5672/"
    await admin.get(SECRETS, "nova-transport-url", namespace)  # written


async def test_a_bus_url_that_is_not_text_is_the_steps_condition_naming_secret_and_key(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    binary = b"\xff\xfe\x00Zq9-not-text"
    bus = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bus"}}
    bus["data"] = {"transport_url": base64.b64encode(binary).decode()}
    ctx = make_ctx(
        ours, await stored_nova(admin, namespace), *await stored(admin, namespace, *ALL_SECRETS, bus)
    )
    steps = [s for s in NOVA_STEPS if s.name == "TransportURLSecret"]
    assert (await run_sequence(steps, ctx, NullObserver())).requeue_after is None
    cond = ctx.condition(conditions.SECRETS_READY)
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "SecretNotText")
    assert f"key transport_url of Secret {namespace}/bus" in cond["message"]
    assert "Zq9" not in cond["message"]


# -- the cluster as the Nova controller's cache keeps it (cache_fields) ----------------------------


def kept(obj: Object) -> Object:
    """``obj`` as the Nova controller's RabbitmqClusters cache keeps it."""
    t = Transform()
    t.keep(cache_fields.kept(RABBITMQ_CLUSTERS))
    return t(copy.deepcopy(obj))


async def transport_from_cache(admin: Kube, ours: Recorder, ns: str, cluster: Object) -> Any:
    inputs = await stored(
        admin,
        ns,
        secret("rabbit-default-user", username="admin", password="pw", host="rabbit.ns", port="5672"),
    )
    rabbits = Cache(str(RABBITMQ_CLUSTERS))
    rabbits.upsert(kept({"apiVersion": RABBITMQ_CLUSTERS.api_version, "kind": "RabbitmqCluster", **cluster}))
    ctx = make_ctx(
        ours, await stored_nova(admin, ns, **ON_CLUSTER), *inputs, caches={RABBITMQ_CLUSTERS: rabbits}
    )
    ctx.state.digest_key = b"k" * 32
    return ctx, await transport_url_secret.reconcile_transport_url_secret(ctx)


async def test_the_transport_step_builds_its_url_from_the_kept_rabbitmq_cluster(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    ref: dict[str, Any] = {"name": "rabbit-default-user", "namespace": namespace, "keys": KEYS}
    cluster = await rabbit(admin, namespace, ref)
    ctx, result = await transport_from_cache(admin, ours, namespace, cluster)
    assert result.requeue_after is None
    assert ctx.state.transport_url == "rabbit://admin:pw@rabbit.ns:5672/"
    assert [c for c in ours.calls if c[1] == RABBIT_RESOURCE] == []  # read from the cache
    assert kept(cluster)["status"] == {"defaultUser": {"secretReference": ref}}
    assert "spec" not in kept(cluster)


async def test_a_kept_rabbitmq_cluster_without_a_default_user_still_reads_as_not_published(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    ctx, result = await transport_from_cache(admin, ours, namespace, await rabbit(admin, namespace, None))
    assert result.requeue_after == 15.0
    cond = ctx.condition(conditions.SECRETS_READY)
    assert cond is not None
    assert cond["message"] == f"RabbitmqCluster {namespace}/rabbit publishes no default user yet"


# -- the keyed digest of the Secret it writes (issue 26 item 7) ------------------------------------


def track_bodies(kube: Recorder) -> dict[str, Object]:
    """Wrap ``kube.apply`` to keep the last body sent for each name (the server answers it)."""
    sent: dict[str, Object] = {}
    plain = kube.apply

    async def recording(ref: Any, body: Any, **kw: Any) -> Any:
        meta = {k: v for k, v in body["metadata"].items() if k != "resourceVersion"}  # a precondition
        sent[body["metadata"]["name"]] = {**copy.deepcopy(body), "metadata": copy.deepcopy(meta)}
        return await plain(ref, body, **kw)

    kube.apply = recording  # type: ignore[method-assign]
    return sent


async def both_steps(ours: Recorder, nova: Object, cached: list[Object]) -> bytes:
    ctx = make_ctx(ours, nova, *cached)
    await secrets.reconcile_secrets(ctx)
    assert ctx.state.digest_key
    await transport_url_secret.reconcile_transport_url_secret(ctx)
    return ctx.state.digest_key


async def test_a_derived_secret_records_a_keyed_digest_that_follows_its_content(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    sent = track_bodies(ours)
    nova = await stored_nova(admin, namespace)
    bus = secret("bus", transport_url="rabbit://nova:guessable@bus:5672/")
    key = await both_steps(ours, nova, await stored(admin, namespace, *ALL_SECRETS, bus))
    live = await admin.get(SECRETS, "nova-transport-url", namespace)
    recorded = live["metadata"]["annotations"][apply.APPLIED_DIGEST]
    body = sent["nova-transport-url"]
    assert recorded != apply.digest(body)  # not the plain hash an offline guess can be checked against
    assert recorded == apply.digest(body, key)
    # the stored key Secret holds that key, and its own digest is keyed too
    key_secret = await admin.get(SECRETS, "nova-digest-key", namespace)
    assert base64.b64decode(key_secret["data"]["key"]) == key
    assert key_secret["metadata"]["annotations"][apply.APPLIED_DIGEST] != apply.digest(
        sent["nova-digest-key"]
    )
    # a rotated password changes the recorded digest (the Secret is rewritten)
    url = base64.b64encode(b"rabbit://nova:rotated@bus:5672/").decode()
    await admin.patch(SECRETS, "bus", {"data": {"transport_url": url}}, namespace)
    listed = (await admin.list(SECRETS, namespace))["items"]
    await both_steps(ours, nova, [{"apiVersion": "v1", "kind": "Secret", **s} for s in listed])
    rotated = await admin.get(SECRETS, "nova-transport-url", namespace)
    assert rotated["metadata"]["annotations"][apply.APPLIED_DIGEST] not in ("", recorded)


async def test_an_unkeyed_secret_is_never_applied(ours: Recorder) -> None:
    with pytest.raises(ValueError, match="must be keyed"):
        await apply.apply(ours, secret("x", password="pw"))
    assert ours.calls == []  # refused before any request
