"""Issue 36 §5, the label gate: with ``--secret-ref-label`` the Secrets the pods mount by name (the
database TLS Secrets, the bus CA bundle) reach the pods only as the Nova's label-checked copies
(``reconcilers.nova.checked_copies``), on the real API server.

Before, the gate checked those Secrets but the pods mounted them by name, and the kubelet hands a
mounted Secret's later content to running pods: a label removed and the content replaced (or the
Secret deleted and made again without the label) reached the pods all the same.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from nova_operator import conditions
from nova_operator.kube import Kube
from nova_operator.kube.errors import NotFound
from nova_operator.kube.resources import CRONJOBS, DEPLOYMENTS, JOBS, NOVAS, SECRETS
from nova_operator.kube.types import Object
from nova_operator.metrics import WRITE_VERBS
from nova_operator.naming import Component
from nova_operator.reconcilers.nova import secrets
from nova_operator.reconcilers.nova.context import NovaOptions, PassContext
from nova_operator.renderers import workload
from nova_operator.secret_refs import SecretRefPolicy
from tests.integration.nova.inputs import (
    SECRETS_DATA,
    cond,
    create_inputs,
    grown,
    is_ready,
    nova_body,
    requests_by_verb,
    settled,
)
from tests.integration.nova.inputs import secret as input_secret
from tests.integration.nova.passes import ALL_SECRETS, make_ctx, secret, stored, stored_nova
from tests.integration.nova.requests import Recorder

from .conftest import Operator, Simulator, wait_for  # type: ignore[import-not-found]

LABEL = "nova.openstack.c5c3.io/usable-by-nova"
WITH_LABEL = NovaOptions(secret_refs=SecretRefPolicy(LABEL))
CA_V1, CA_V2 = "-----BEGIN CERTIFICATE----- ca one", "-----BEGIN CERTIFICATE----- ca two, unlabelled"
CELL_TLS = {
    "mode": "verify-full",
    "caBundleSecretRef": {"name": "db-ca"},
    "clientCertSecretRef": {"name": "db-cert"},
}
BUS_TLS = {"caBundleSecretRef": {"name": "bus-ca", "key": "bundle.pem"}}
COPY, BUS_COPY, API_COPY = "nova-checked-cell-db-tls", "nova-checked-messaging-ca", "nova-checked-api-db-tls"


def labelled(body: Object) -> Object:
    return {**body, "metadata": {**body["metadata"], "labels": {LABEL: "true"}}}


def tls_sources(ca: str = CA_V1) -> tuple[Object, ...]:
    """The database CA bundle (with a key the pods do not mount), the client certificate and the bus CA."""
    return (
        secret("db-ca", **{"ca.crt": ca, "ca.key": "not for the pods"}),
        secret("db-cert", **{"tls.crt": "client cert", "tls.key": "client key"}),
        secret("bus-ca", **{"bundle.pem": "bus ca"}),
    )


def decoded(obj: Object) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()}


async def on_server(admin: Kube, ns: str, name: str) -> Object | None:
    try:
        return await admin.get(SECRETS, name, ns)
    except NotFound:
        return None


async def tls_nova(admin: Kube, ns: str) -> Object:
    plain = await stored_nova(admin, ns, "plain")
    messaging = {**plain["spec"]["messaging"], "tls": BUS_TLS}
    return await stored_nova(
        admin, ns, database={**plain["spec"]["database"], "tls": CELL_TLS}, messaging=messaging
    )


BUS = secret("bus", url="amqp://bus")


async def pass_over(admin: Kube, ours: Recorder, nova: Object, ns: str, options: NovaOptions) -> PassContext:
    """A pass whose Secrets cache holds every Secret of ``ns`` as the server does (the watch caught up)."""
    held = [{"apiVersion": "v1", "kind": "Secret", **s} for s in (await admin.list(SECRETS, ns))["items"]]
    return make_ctx(ours, nova, *held, options=options)


async def passed(admin: Kube, ours: Recorder, nova: Object, ns: str, options: NovaOptions) -> PassContext:
    """``pass_over`` after a Secrets step that finished (no wait): the pass, for what it handed on."""
    ctx = await pass_over(admin, ours, nova, ns, options)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after is None
    return ctx


async def labelled_tls_nova(admin: Kube, ns: str) -> Object:
    """The TLS Nova, its inputs, the bus and every TLS source stored, all carrying the label."""
    nova = await tls_nova(admin, ns)
    await stored(admin, ns, *[labelled(s) for s in (*ALL_SECRETS, BUS, *tls_sources())])
    return nova


async def test_with_the_flag_the_copies_hold_what_the_pods_mount_and_keep_the_last_labelled_content(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    ns = namespace
    nova = await labelled_tls_nova(admin, ns)
    ctx = await passed(admin, ours, nova, ns, WITH_LABEL)
    copy, bus_copy = await on_server(admin, ns, COPY), await on_server(admin, ns, BUS_COPY)
    assert copy is not None
    assert bus_copy is not None
    assert decoded(copy) == {"ca.crt": CA_V1, "tls.crt": "client cert", "tls.key": "client key"}
    assert decoded(bus_copy) == {"ca.crt": "bus ca"}  # the spec's key, as the file the pods read
    assert await on_server(admin, ns, API_COPY) is None  # the API database has no TLS
    (owner,) = copy["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Nova", nova["metadata"]["uid"], True)
    assert copy["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "nova-operator"
    assert LABEL not in copy["metadata"]["labels"]
    # the pods of this pass mount the copies, never the named Secrets
    api = workload.deployment(ctx.nova, Component.API, ctx.workload_inputs())
    names = volume_secrets(api["spec"]["template"]["spec"])
    assert names == {COPY, BUS_COPY}

    # a converged pass writes nothing
    before = len(ours.calls)
    ctx = await passed(admin, ours, nova, ns, WITH_LABEL)
    assert ours.calls[before:] == []  # not even a read: everything came from the cache

    # the label removed and the content replaced: the gate names the Secret, the copy is kept
    await admin.patch(
        SECRETS,
        "db-ca",
        {
            "metadata": {"labels": {LABEL: None}},
            "data": {"ca.crt": base64.b64encode(CA_V2.encode()).decode()},
        },
        ns,
    )
    before = len(ours.calls)
    ctx = await pass_over(admin, ours, nova, ns, WITH_LABEL)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after == 15.0
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert (c["status"], c["reason"]) == ("False", "SecretRefNotLabelled")
    assert c["message"].startswith(
        f"spec.database.tls.caBundleSecretRef: Secret {ns}/db-ca does not carry the label {LABEL}"
    )
    assert "ca two" not in c["message"]
    assert "ca one" not in c["message"]
    assert written_since(ours, before) == []
    kept = await on_server(admin, ns, COPY)
    assert kept is not None
    assert decoded(kept) == decoded(copy)
    assert kept["metadata"]["resourceVersion"] == copy["metadata"]["resourceVersion"]

    # labelled again: the new content is copied
    await admin.patch(SECRETS, "db-ca", {"metadata": {"labels": {LABEL: "true"}}}, ns)
    ctx = await passed(admin, ours, nova, ns, WITH_LABEL)
    now = await on_server(admin, ns, COPY)
    assert now is not None
    assert decoded(now)["ca.crt"] == CA_V2


def volume_secrets(pod: dict[str, Any]) -> set[str]:
    found = set()
    for volume in pod.get("volumes") or []:
        if "secret" in volume:
            found.add(volume["secret"]["secretName"])
        for part in (volume.get("projected") or {}).get("sources") or []:
            if "secret" in part:
                found.add(part["secret"]["name"])
    return found


def written_since(kube: Recorder, at: int) -> list[tuple[str, str, str]]:
    return [(v, r, n) for v, r, n, _ in kube.calls[at:] if v in WRITE_VERBS]


async def test_with_the_flag_a_tls_secret_created_later_without_the_label_is_never_copied(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    ns = namespace
    nova = await tls_nova(admin, ns)
    ca, cert, bus_ca = tls_sources()
    await stored(admin, ns, *[labelled(s) for s in (*ALL_SECRETS, BUS, cert, bus_ca)])
    ctx = await pass_over(admin, ours, nova, ns, WITH_LABEL)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after == 15.0
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert c["message"].startswith(f"spec.database.tls.caBundleSecretRef: Secret {ns}/db-ca not found")

    await stored(admin, ns, ca)  # made later, without the label
    ctx = await pass_over(admin, ours, nova, ns, WITH_LABEL)
    assert (await secrets.reconcile_secrets(ctx)).requeue_after == 15.0
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert (c["status"], c["reason"]) == ("False", "SecretRefNotLabelled")
    assert f"Secret {ns}/db-ca does not carry the label {LABEL}" in c["message"]
    assert CA_V1 not in c["message"]
    assert written_since(ours, 0) == []
    for name in (COPY, BUS_COPY, API_COPY):
        assert await on_server(admin, ns, name) is None, name

    await admin.patch(SECRETS, "db-ca", {"metadata": {"labels": {LABEL: "true"}}}, ns)
    ctx = await passed(admin, ours, nova, ns, WITH_LABEL)
    copy = await on_server(admin, ns, COPY)
    assert copy is not None
    assert decoded(copy)["ca.crt"] == CA_V1


async def test_without_the_flag_there_is_no_copy_and_the_pods_mount_the_named_secrets(
    admin: Kube, ours: Recorder, namespace: str
) -> None:
    ns = namespace
    nova = await labelled_tls_nova(admin, ns)
    # a copy left from a run with the flag
    ctx = await passed(admin, ours, nova, ns, WITH_LABEL)
    assert await on_server(admin, ns, COPY) is not None

    ctx = await passed(admin, ours, nova, ns, NovaOptions())  # the operator restarted without the flag
    for name in (COPY, BUS_COPY, API_COPY):
        assert await on_server(admin, ns, name) is None, name
    api = workload.deployment(ctx.nova, Component.API, ctx.workload_inputs())
    assert volume_secrets(api["spec"]["template"]["spec"]) == {"db-ca", "db-cert", "bus-ca"}


# -- the whole operator ----------------------------------------------------------------------------


async def create_labelled_inputs(admin: Kube, ns: str) -> None:
    for name, data in SECRETS_DATA.items():
        await admin.create(SECRETS, labelled(input_secret(name, data)), ns)
    for body in tls_sources():
        await admin.create(SECRETS, labelled(body), ns)


def pod_templates(objs: list[Object]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for obj in objs:
        spec = obj["spec"]
        template = spec["jobTemplate"]["spec"]["template"] if "jobTemplate" in spec else spec["template"]
        out.append((obj["metadata"]["name"], template["spec"]))
    return out


@pytest.mark.parametrize("operator", [{"secret_refs": SecretRefPolicy(LABEL)}], indirect=True)
async def test_with_the_flag_a_converged_nova_mounts_only_copies_and_a_pass_sends_nothing(
    admin: Kube, operator: Operator, simulator: Simulator, namespace: str
) -> None:
    ns = namespace
    await create_inputs(admin, ns, skip=tuple(SECRETS_DATA))  # the MariaDB the Nova names
    await create_labelled_inputs(admin, ns)
    body = nova_body()
    body["spec"]["database"]["tls"] = CELL_TLS
    body["spec"]["messaging"]["tls"] = BUS_TLS
    await admin.create(NOVAS, body, ns)
    nova = await wait_for(lambda: admin.get(NOVAS, "nova", ns), is_ready, within=90)
    assert cond(nova, "SecretsReady")["reason"] == "SecretsAvailable"
    simulator.hold_jobs = True
    await settled(operator)

    deployments = pod_templates((await admin.list(DEPLOYMENTS, ns))["items"])
    assert len(deployments) == 5
    for name, pod in deployments:
        assert volume_secrets(pod) == {COPY, BUS_COPY}, name
    jobs = pod_templates([*(await admin.list(JOBS, ns))["items"], *(await admin.list(CRONJOBS, ns))["items"]])
    assert {name for name, _pod in jobs} >= {"nova-db-sync", "nova-db-archive"}
    for name, pod in jobs:
        assert volume_secrets(pod) == {COPY}, name  # the Jobs reach the databases only
    copy = await on_server(admin, ns, COPY)
    assert copy is not None
    assert decoded(copy)["ca.crt"] == CA_V1

    before = requests_by_verb(operator.metrics)
    for _ in range(3):
        await operator.force_pass("nova")
    assert grown(before, requests_by_verb(operator.metrics)) == {}

    # the label removed and the content replaced: the Nova stops at the gate, the copy is kept
    patch = {
        "metadata": {"labels": {LABEL: None}},
        "data": {"ca.crt": base64.b64encode(CA_V2.encode()).decode()},
    }
    await admin.patch(SECRETS, "db-ca", patch, ns)
    nova = await wait_for(
        lambda: admin.get(NOVAS, "nova", ns),
        lambda n: cond(n, "SecretsReady").get("reason") == "SecretRefNotLabelled",
        within=30,
    )
    assert f"Secret {ns}/db-ca does not carry the label {LABEL}" in cond(nova, "SecretsReady")["message"]
    kept = await on_server(admin, ns, COPY)
    assert kept is not None
    assert decoded(kept) == decoded(copy)
