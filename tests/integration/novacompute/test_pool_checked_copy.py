"""Issue 36 §5 for a pool's own ``spec.tls`` bundle, on the real API server: with ``--secret-ref-label``
the PoolConfig step writes the pool's copy (``{pool}-nova-compute-checked-https-ca``) past its label
gate only, and the DaemonSet mounts that copy, never the Secret the spec names; a bundle that loses
the label (and is rewritten) stops the step and never reaches the copy; a converged pass sends
nothing. Without the flag the DaemonSet mounts the named Secret and a leftover copy is removed."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client
from simcluster import ControlPlane
from simcluster.realtier.services.pki import CertificateAuthority

from nova_operator import conditions
from nova_operator.kube import errors
from nova_operator.kube.owners import with_owner
from nova_operator.kube.resources import CONFIGMAPS, DAEMONSETS, PODS, SECRETS, ResourceRef
from nova_operator.kube.types import Object
from nova_operator.models.novacompute import NovaCompute
from nova_operator.reconcilers.compute.context import ComputePass, ComputeSettings
from nova_operator.reconcilers.compute.daemon_set import reconcile_daemon_set
from nova_operator.reconcilers.compute.pool_config import reconcile_pool_config
from nova_operator.renderers import compute_pool
from nova_operator.secret_refs import SecretRefPolicy
from tests.integration.novacompute.conftest import Env
from tests.integration.novacompute.inputs import ready
from tests.integration.novacompute.passes import CONTRACT, KEY_SECRET, Stage, encoded

pytestmark = pytest.mark.integration

POLICY = SecretRefPolicy("usable")
COPY = compute_pool.checked_ca_name("pool")
DS = compute_pool.daemonset_name("pool")


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """Two CAs' certificates (PEM): the labelled bundle and what replaces it."""
    directory = tmp_path_factory.mktemp("ca")
    first, second = (CertificateAuthority.create(directory, n).cert.read_text() for n in ("ca-1", "ca-2"))
    return first, second


async def bundle_secret(stage: Stage, pem: str, *, labelled: bool) -> Object:
    meta: Object = {"name": "pool-ca", **({"labels": {"usable": "yes"}} if labelled else {})}
    return await stage.put(
        SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": encoded(**{"ca.crt": pem})}
    )


async def tls_pool(stage: Stage, pem: str, *, labelled: bool) -> tuple[Object, Object]:
    """``pool-ca`` holding ``pem`` (``bundle_secret``), the contract, the digest key, the Nova and a
    pool whose ``spec.tls`` names ``pool-ca``."""
    await bundle_secret(stage, pem, labelled=labelled)
    await stage.pool_inputs()
    nova = await stage.nova(spec={"openStackRelease": "2026.1"})
    return await stage.pool(tls={"caBundleSecretRef": {"name": "pool-ca"}}), nova


def step_pass(stage: Stage, cr: Object, nova: Object, *, flag: bool) -> ComputePass:
    settings = ComputeSettings(secret_refs=POLICY) if flag else None
    p, _ = stage.pass_over(cr, nova=nova, settings=settings)
    p.contract_secret, p.image = CONTRACT, "ghcr.io/c5c3/nova:2025.2"
    return p


async def converge(stage: Stage, p: ComputePass) -> Object:
    """PoolConfig then DaemonSet; the DaemonSet as the server holds it."""
    assert (await reconcile_pool_config(p)).requeue_after is None
    await reconcile_daemon_set(p)
    return await stage.admin.get(DAEMONSETS, DS, stage.ns)


async def waiting(stage: Stage, cr: Object, nova: Object) -> Any:
    """A flagged PoolConfig pass that waits at its gate: its ``ConfigReady`` condition."""
    p = step_pass(stage, cr, nova, flag=True)
    assert (await reconcile_pool_config(p)).requeue_after == p.settings.intervals.wait
    cond = p.condition(conditions.CONFIG_READY)
    assert cond is not None
    return cond


def https_volume(ds: Object) -> Any:
    (volume,) = [v for v in ds["spec"]["template"]["spec"]["volumes"] if v["name"] == "https-ca"]
    return volume["secret"]


def secret_writes(stage: Stage) -> list[tuple[str, str, str, str]]:
    return [
        c for c in stage.kube.sent if c[1] == "secrets" and c[0] in ("create", "apply", "patch", "delete")
    ]


def b64(pem: str) -> str:
    return base64.b64encode(pem.encode()).decode()


async def test_with_the_flag_the_pool_mounts_its_copy_and_an_unlabelled_bundle_never_reaches_it(
    stage: Stage, bundles: tuple[str, str]
) -> None:
    first, second = bundles
    cr, nova = await tls_pool(stage, first, labelled=True)
    ds = await converge(stage, step_pass(stage, cr, nova, flag=True))
    assert https_volume(ds)["secretName"] == COPY
    assert https_volume(ds)["items"] == [{"key": "ca.crt", "path": "ca.crt"}]
    copy = await stage.admin.get(SECRETS, COPY, stage.ns)
    assert copy["data"] == {"ca.crt": b64(first)}
    (owner,) = copy["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("NovaCompute", cr["metadata"]["uid"], True)

    # the label goes and the content is replaced: the step stops at its gate, the copy stays as it was
    await stage.admin.patch(
        SECRETS,
        "pool-ca",
        {"metadata": {"labels": {"usable": None}}, "data": encoded(**{"ca.crt": second})},
        stage.ns,
    )
    stage.kube.sent.clear()
    cond = await waiting(stage, cr, nova)
    assert cond["reason"] == "SecretRefNotLabelled"
    assert cond["message"].startswith(
        f"spec.tls.caBundleSecretRef: Secret {stage.ns}/pool-ca does not carry the label usable;"
    )
    assert "BEGIN CERTIFICATE" not in cond["message"]
    assert secret_writes(stage) == []
    kept = await stage.admin.get(SECRETS, COPY, stage.ns)
    assert kept["data"] == {"ca.crt": b64(first)}
    assert kept["metadata"]["resourceVersion"] == copy["metadata"]["resourceVersion"]
    assert https_volume(await stage.admin.get(DAEMONSETS, DS, stage.ns))["secretName"] == COPY

    # gone altogether: the condition names the field and the Secret, the copy still stays
    await stage.admin.delete(SECRETS, "pool-ca", stage.ns)
    cond = await waiting(stage, cr, nova)
    assert (cond["reason"], cond["message"]) == (
        "WaitingForHTTPSCABundle",
        f"spec.tls.caBundleSecretRef: Secret {stage.ns}/pool-ca not found",
    )
    assert (await stage.admin.get(SECRETS, COPY, stage.ns))["data"] == {"ca.crt": b64(first)}


async def test_a_converged_pass_sends_nothing_and_a_labelled_rotation_reaches_the_copy(
    stage: Stage, bundles: tuple[str, str]
) -> None:
    first, second = bundles
    cr, nova = await tls_pool(stage, first, labelled=True)
    p = step_pass(stage, cr, nova, flag=True)
    ds = await converge(stage, p)
    held: dict[tuple[str, str], Object] = {
        (ref.kind, name): await stage.admin.get(ref, name, stage.ns)
        for ref, name in (
            (SECRETS, CONTRACT),
            (SECRETS, KEY_SECRET),
            (SECRETS, "pool-ca"),
            (SECRETS, COPY),
            (CONFIGMAPS, p.config_map),
        )
    }
    held["DaemonSet", DS] = ds
    config_map = held["ConfigMap", p.config_map]

    def cached(ref: ResourceRef, namespace: str, name: str) -> Object | None:
        return held.get((ref.kind, name))

    def listed(ref: ResourceRef, namespace: str, labels: Any) -> list[Object] | None:
        return {CONFIGMAPS: [config_map], PODS: []}.get(ref)

    stage.kube.sent.clear()
    again = step_pass(stage, cr, nova, flag=True)
    again.cached, again.listed = cached, listed
    assert (await reconcile_pool_config(again)).requeue_after is None
    await reconcile_daemon_set(again)
    assert stage.kube.sent == []  # every read from the caches, nothing to write

    # a rotation of the labelled bundle is copied, and the pool rolls once for it
    await stage.admin.patch(SECRETS, "pool-ca", {"data": encoded(**{"ca.crt": first + second})}, stage.ns)
    rotated = await converge(stage, step_pass(stage, cr, nova, flag=True))
    assert (await stage.admin.get(SECRETS, COPY, stage.ns))["data"] == {"ca.crt": b64(first + second)}
    annotation = compute_pool.HTTPS_CA_HASH_ANNOTATION
    before = ds["spec"]["template"]["metadata"]["annotations"][annotation]
    assert rotated["spec"]["template"]["metadata"]["annotations"][annotation] != before
    assert https_volume(rotated)["secretName"] == COPY


async def test_without_the_flag_the_named_secret_is_mounted_and_a_leftover_copy_removed(
    stage: Stage, bundles: tuple[str, str]
) -> None:
    first, _ = bundles
    cr, nova = await tls_pool(stage, first, labelled=False)
    pool = NovaCompute.model_validate(cr)
    leftover = await stage.put(
        SECRETS, with_owner(compute_pool.checked_ca_secret(pool, {"ca.crt": b64(first)}), cr)
    )
    p = step_pass(stage, cr, nova, flag=False)
    p.cached = lambda ref, namespace, name: leftover if (ref, name) == (SECRETS, COPY) else None
    ds = await converge(stage, p)
    assert https_volume(ds) == {
        "secretName": "pool-ca",
        "defaultMode": 0o444,
        "items": [{"key": "ca.crt", "path": "ca.crt"}],
    }
    assert ("secrets", COPY) in stage.kube.deleted()
    with pytest.raises(errors.NotFound):
        await stage.admin.get(SECRETS, COPY, stage.ns)


# -- the controller itself: what it caches of the copy ------------------------------------------------


@pytest.fixture
async def flagged(
    control_plane: ControlPlane, admin: Any, admin_api: client.ApiClient, fake: Any, namespace: str
) -> AsyncIterator[Env]:
    """The running NovaCompute controller with ``--secret-ref-label usable``."""
    e = Env(admin, admin_api, fake, namespace)
    e.secret_refs = POLICY
    await e.start(control_plane)
    try:
        yield e
    finally:
        await e.stop()


async def test_the_controller_mounts_the_copy_and_a_converged_pass_sends_no_request(
    flagged: Env, bundles: tuple[str, str]
) -> None:
    env = flagged
    await env.nova()
    await env.admin.patch(SECRETS, "nova-service-user", {"metadata": {"labels": {"usable": "yes"}}}, env.ns)
    await env.secret("pool-ca", {"ca.crt": bundles[0]}, labels={"usable": "yes"})
    n1 = await env.node("n1", pool="a", zone="az1")
    await env.pool(tls={"caBundleSecretRef": {"name": "pool-ca"}})
    ds = await env.until(lambda: env.get(DAEMONSETS, DS))
    assert https_volume(ds)["secretName"] == COPY
    env.fake.add_compute(n1)
    await env.daemonset_rolled_out(count=1)
    await env.until(lambda: ready(env))
    await env.settle(1.0)

    before, passes = env.metrics.api_request_counts(), env.step_count("PoolConfig")
    await env.settle(3.0)  # the pool keeps polling its services (the test's intervals are short)
    after, ran = env.metrics.api_request_counts(), env.step_count("PoolConfig") - passes
    grown = {k: v - before.get(k, 0.0) for k, v in after.items() if v != before.get(k, 0.0)}
    assert ran >= 2, "no pass ran while the pool sat converged"
    assert grown == {}, f"a converged pool pass sent requests: {grown}"
    copy = await env.admin.get(SECRETS, COPY, env.ns)
    assert copy["data"] == {"ca.crt": b64(bundles[0])}
