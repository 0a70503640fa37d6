"""The PoolConfig step on the real API server: its waits, the option-catalog check when extraConfig
changes (not on every pass: a release bump keeps the pool) and the prune of old ConfigMaps
(novacompute-crd.md §8, §4.2). The contract, the digest key, the Nova and the ConfigMaps are stored
by kube-apiserver; the pass's informer lookups hand the step the server's copies."""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

import pytest
from simcluster.realtier.services.pki import CertificateAuthority

from nova_operator import catalog, conditions
from nova_operator.kube import errors, owners
from nova_operator.kube.resources import CONFIGMAPS, DAEMONSETS, NOVAS, SECRETS
from nova_operator.kube.types import Object
from nova_operator.naming import CONFIG_BASE_LABEL
from nova_operator.reconcilers.compute import pool_config
from nova_operator.reconcilers.compute.context import ComputePass, ComputeSettings
from nova_operator.reconcilers.compute.pool_config import reconcile_pool_config
from nova_operator.renderers import compute_pool
from nova_operator.secret_refs import SecretRefPolicy
from tests.integration.novacompute.passes import CONTRACT, KEY_SECRET, Emitted, Stage, encoded

pytestmark = pytest.mark.integration

DROPPED = {"libvirt": {"num_memory_encrypted_guests": "2"}}  # in 2026.1, gone in 2026.2


def cached_from(*objects: Object) -> Any:
    """The pass's informer lookup holding ``objects`` (the server's copies) and nothing else."""
    held = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    return lambda ref, ns, name: held.get((ref.kind, name))


async def pool_pass(
    stage: Stage, extra: dict[str, dict[str, str]], release: str
) -> tuple[ComputePass, Emitted]:
    """A pass at PoolConfig: the pool's ``extraConfig``, the Nova at ``release``, the contract resolved."""
    await stage.pool_inputs()
    nova = await stage.nova(spec={"openStackRelease": release})
    p, events = stage.pass_over(await stage.pool(extraConfig=extra), nova=nova)
    p.contract_secret = CONTRACT
    return p, events


def condition(p: ComputePass) -> Any:
    c = p.condition(conditions.CONFIG_READY)
    assert c is not None
    return c


async def test_a_release_bump_that_drops_an_accepted_option_keeps_the_pool_running(stage: Stage) -> None:
    p, _ = await pool_pass(stage, DROPPED, "2026.1")
    assert (await reconcile_pool_config(p)).requeue_after is None  # accepted and written on 2026.1
    (cm,) = stage.kube.created
    nova = await stage.admin.patch(NOVAS, "nova", {"spec": {"openStackRelease": "2026.2"}}, stage.ns)
    p, events = stage.pass_over(p.cr, nova=nova)
    p.contract_secret = CONTRACT
    p.cached = cached_from(cm)
    result = await reconcile_pool_config(p)
    assert result.requeue_after is None
    assert condition(p)["reason"] == "ConfigRendered"
    assert p.config_map == cm["metadata"]["name"]
    assert "ConfigError" not in events.reasons()
    assert [c["metadata"]["name"] for c in stage.kube.created] == [cm["metadata"]["name"]]  # nothing new


async def test_a_refused_edit_keeps_the_last_good_config_and_the_pass_goes_on(stage: Stage) -> None:
    p, events = await pool_pass(stage, DROPPED, "2026.2")
    labels = {"app": "nova-compute"}
    ds = await stage.put(
        DAEMONSETS,
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": compute_pool.daemonset_name(p.name)},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [{"name": "c", "image": "x"}],
                        "volumes": [{"name": "pool-config", "configMap": {"name": "rack7-config-0123abcd"}}],
                    },
                },
            },
        },
    )
    p.cached = cached_from(ds)
    result = await reconcile_pool_config(p)
    assert result.requeue_after is None  # the DaemonSet and drain steps run on
    cond = condition(p)
    assert cond["status"] == "False"
    assert cond["reason"] == "ConfigError"
    assert "[libvirt][num_memory_encrypted_guests]" in cond["message"]
    assert "keeps running on ConfigMap rack7-config-0123abcd" in cond["message"]
    assert p.config_map == "rack7-config-0123abcd"
    assert p.contract_hash
    assert stage.kube.created == []
    await reconcile_pool_config(p)
    assert events.reasons() == ["ConfigError"]  # once per distinct message


async def test_a_new_pool_with_a_refused_config_waits_and_writes_nothing(stage: Stage) -> None:
    p, _ = await pool_pass(stage, DROPPED, "2026.2")
    result = await reconcile_pool_config(p)
    assert result.requeue_after == 15.0
    assert condition(p)["reason"] == "ConfigError"
    assert p.config_map == ""
    assert stage.kube.created == []
    assert (await stage.admin.list(CONFIGMAPS, stage.ns))["items"] == []


async def test_an_accepted_option_on_a_release_that_knows_it_is_rendered(stage: Stage) -> None:
    p, _ = await pool_pass(stage, DROPPED, "2026.1")
    assert (await reconcile_pool_config(p)).requeue_after is None
    assert condition(p)["reason"] == "ConfigRendered"
    assert [c["metadata"]["name"] for c in stage.kube.created] == [p.config_map]
    live = await stage.admin.get(CONFIGMAPS, p.config_map, stage.ns)
    assert live["metadata"]["ownerReferences"][0]["uid"] == p.cr["metadata"]["uid"]


@pytest.mark.parametrize(
    ("contract", "want", "fragment"),
    [
        (None, "WaitingForComputeConfig", "does not exist"),
        (
            {"nova-compute.conf": "[DEFAULT]\n", "transport_url": "u"},
            "ComputeConfigIncomplete",
            "lacks password",
        ),
    ],
)
async def test_a_missing_or_incomplete_contract_waits_15s(
    stage: Stage, contract: dict[str, str] | None, want: str, fragment: str
) -> None:
    if contract is not None:
        await stage.secret(CONTRACT, encoded(**contract))
    p, _ = stage.pass_over(await stage.pool())
    p.contract_secret = CONTRACT
    assert (await reconcile_pool_config(p)).requeue_after == 15
    c = condition(p)
    assert (c["status"], c["reason"]) == ("False", want)
    assert fragment in c["message"]
    assert p.config_map == ""


# -- the prune --------------------------------------------------------------------------------------


async def historical(stage: Stage, p: ComputePass, name: str, *, uid: str | None = None) -> Object:
    """A ConfigMap of the pool's config base, owned by the pool (or by ``uid``), stored on the server."""
    owner = owners.owner_reference(p.cr)
    if uid is not None:
        owner["uid"] = uid
    meta = {
        "name": name,
        "labels": {CONFIG_BASE_LABEL: compute_pool.config_base_label(p.name)},
        "ownerReferences": [owner],
    }
    return await stage.put(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})


async def test_old_pool_config_maps_are_pruned_from_the_cache_without_a_list(stage: Stage) -> None:
    p, _ = stage.pass_over(await stage.pool())
    # the server stamps whole seconds: these tie or grow in name order, and ties go by name
    olds = [await historical(stage, p, f"old-{i}") for i in range(1, 6)]
    foreign = await historical(stage, p, "not-ours", uid="7f0e8d3c-0000-4000-8000-000000000000")
    asked: list[tuple[str, str, dict[str, str]]] = []

    def listed(ref: Any, namespace: str, labels: Any) -> list[Object]:
        asked.append((ref.plural, namespace, dict(labels)))
        return [*olds, foreign]

    p.listed = listed
    await pool_config._prune(p, "current")
    assert stage.kube.of_verb("list", CONFIGMAPS.plural) == []  # read from the informer
    assert asked == [("configmaps", stage.ns, {CONFIG_BASE_LABEL: compute_pool.config_base_label(p.name)})]
    assert sorted(stage.kube.deleted()) == [("configmaps", "old-1"), ("configmaps", "old-2")]
    left = {cm["metadata"]["name"] for cm in (await stage.admin.list(CONFIGMAPS, stage.ns))["items"]}
    assert {"old-3", "old-4", "old-5", "not-ours"} <= left  # the 3 newest stay, the foreign one too
    assert not {"old-1", "old-2"} & left


async def test_without_a_cache_for_the_namespace_the_prune_lists(stage: Stage) -> None:
    p, _ = stage.pass_over(await stage.pool())
    await pool_config._prune(p, "current")  # the default lookup: not cached
    assert [c[3] for c in stage.kube.of_verb("list", CONFIGMAPS.plural)] == [
        f"{CONFIG_BASE_LABEL}={compute_pool.config_base_label(p.name)}"
    ]


# -- the keyed compute-config-hash (issue 26 item 7) ------------------------------------------------

KEYED = {"nova-compute.conf": "[DEFAULT]\n", "transport_url": "rabbit://n:pw@b:5672/", "password": "pw"}
DIGEST_KEY = "k" * 64


async def keyed_pass(stage: Stage, *, key: bool = True) -> ComputePass:
    """A pass at PoolConfig over the contract ``KEYED`` and (``key``) the Nova's digest key."""
    await stage.secret(CONTRACT, encoded(**KEYED))
    if key:
        await stage.secret(KEY_SECRET, key=DIGEST_KEY)
    p, _ = stage.pass_over(await stage.pool(), nova=await stage.nova())
    p.contract_secret = CONTRACT
    return p


async def test_the_pool_hash_is_keyed_with_the_novas_digest_key_and_follows_the_contract(
    stage: Stage,
) -> None:
    """The pool DaemonSet's ``compute-config-hash`` is HMAC-SHA-256 with the Nova's digest key (not
    the plain SHA-256 a guess could be tested against), and a rotated contract changes it."""
    p = await keyed_pass(stage)
    assert (await reconcile_pool_config(p)).requeue_after is None
    preimage = b"".join(k.encode() + b"=" + v.encode() + b"\n" for k, v in sorted(KEYED.items()))
    assert p.contract_hash != hashlib.sha256(preimage).hexdigest()
    assert p.contract_hash == hmac.new(DIGEST_KEY.encode(), preimage, hashlib.sha256).hexdigest()
    ds = compute_pool.daemonset(
        p.pool,
        compute_pool.PoolInputs(
            image="i",
            config_map=p.config_map,
            contract_secret=p.contract_secret,
            contract_hash=p.contract_hash,
        ),
    )
    assert ds is not None
    annotations = ds["spec"]["template"]["metadata"]["annotations"]
    assert annotations[compute_pool.COMPUTE_CONFIG_HASH_ANNOTATION] == p.contract_hash
    await stage.admin.patch(SECRETS, CONTRACT, {"data": encoded(password="rotated")}, stage.ns)
    rotated, _ = stage.pass_over(p.cr, nova=p.nova)
    rotated.contract_secret = CONTRACT
    assert (await reconcile_pool_config(rotated)).requeue_after is None
    assert rotated.contract_hash not in ("", p.contract_hash)


async def test_a_pool_waits_for_the_digest_key(stage: Stage) -> None:
    p = await keyed_pass(stage, key=False)
    assert (await reconcile_pool_config(p)).requeue_after == p.settings.intervals.wait
    cond = condition(p)
    assert (cond["status"], cond["reason"]) == ("False", "WaitingForDigestKey")
    assert KEY_SECRET in cond["message"]
    assert p.contract_hash == ""
    assert stage.kube.created == []
    assert (await stage.admin.list(CONFIGMAPS, stage.ns))["items"] == []


# -- the pool's secretConfig (issue 26 item 5) -------------------------------------------------------


async def secret_pass(
    stage: Stage, values: dict[str, str], *, settings: ComputeSettings | None = None
) -> ComputePass:
    """A pass at PoolConfig over a pool whose ``spec.secretConfig`` names the Secret ``pool-secrets``
    (stored with ``values``); the contract, the digest key and the Nova stored too."""
    await stage.pool_inputs()
    await stage.secret("pool-secrets", **values)
    cr = await stage.pool(secretConfig={"secretRef": {"name": "pool-secrets"}})
    p, _ = stage.pass_over(cr, nova=await stage.nova(), settings=settings)
    p.contract_secret = CONTRACT
    return p


async def test_a_pool_publishes_its_secret_config_and_its_pods_read_it(stage: Stage) -> None:
    p = await secret_pass(stage, {"libvirt.rbd_secret_uuid": "457eb676-$x"})
    assert (await reconcile_pool_config(p)).requeue_after is None
    name = compute_pool.secret_config_name(p.name)
    stored = await stage.admin.get(SECRETS, name, stage.ns)
    assert base64.b64decode(stored["data"]["libvirt.rbd_secret_uuid"]).decode() == "457eb676-$$x"
    assert stored["metadata"]["ownerReferences"][0]["uid"] == p.cr["metadata"]["uid"]
    ds = compute_pool.daemonset(
        p.pool,
        compute_pool.PoolInputs(
            image="i",
            config_map=p.config_map,
            contract_secret=p.contract_secret,
            contract_hash=p.contract_hash,
            secret_config_secret=p.secret_config_secret,
            secret_config_keys=p.secret_config_keys,
            secret_config_hash=p.secret_config_hash,
        ),
    )
    assert ds is not None
    template = ds["spec"]["template"]
    env = {e["name"]: e.get("valueFrom") for c in template["spec"]["containers"] for e in c.get("env") or []}
    assert env["OS_LIBVIRT__RBD_SECRET_UUID"] == {
        "secretKeyRef": {"name": name, "key": "libvirt.rbd_secret_uuid"}
    }
    assert (
        template["metadata"]["annotations"][compute_pool.SECRET_CONFIG_HASH_ANNOTATION]
        == p.secret_config_hash
    )


async def test_a_pool_refuses_a_key_the_contract_sets(stage: Stage) -> None:
    p = await secret_pass(stage, {"DEFAULT.transport_url": "rabbit://x"})
    assert (await reconcile_pool_config(p)).requeue_after == 15.0
    c = condition(p)
    assert c["reason"] == "SecretConfigInvalid"
    assert "key DEFAULT.transport_url: the operator sets [DEFAULT] transport_url" in c["message"]
    assert "rabbit://x" not in c["message"]
    assert stage.kube.applied == []


async def test_with_secret_ref_label_a_pool_uses_only_a_labelled_secret_config(stage: Stage) -> None:
    """Issue 26 item 5: --secret-ref-label also covers the pool's own secretConfig Secret."""
    settings = ComputeSettings(secret_refs=SecretRefPolicy("usable"))
    p = await secret_pass(stage, {"libvirt.rbd_secret_uuid": "u"}, settings=settings)
    assert (await reconcile_pool_config(p)).requeue_after == 15.0
    c = condition(p)
    assert c["reason"] == "SecretRefNotLabelled"
    assert c["message"].startswith(
        f"spec.secretConfig.secretRef: Secret {stage.ns}/pool-secrets does not carry the label"
    )
    assert stage.kube.applied == []
    with pytest.raises(errors.NotFound):
        await stage.admin.get(SECRETS, compute_pool.secret_config_name(p.name), stage.ns)


# -- the upstream webhook's warnings, without a webhook -----------------------------------------------

DEPRECATED = {"DEFAULT": {"logdir": "/var/log/nova", "backdoor_port": "0"}}


def warnings_of(events: Emitted) -> list[str]:
    return [m for t, r, m in events.emitted if (t, r) == ("Warning", "ExtraConfigWarning")]


async def test_a_pool_warns_once_for_a_new_config_with_a_deprecated_option(stage: Stage) -> None:
    p, events = await pool_pass(stage, DEPRECATED, "2025.2")
    assert (await reconcile_pool_config(p)).requeue_after is None
    assert warnings_of(events) == catalog.admission_warnings("2025.2", DEPRECATED)
    (cm,) = stage.kube.created  # the config written on the server
    p, events = stage.pass_over(p.cr, nova=p.nova)
    p.contract_secret = CONTRACT
    p.cached = cached_from(cm)
    assert (await reconcile_pool_config(p)).requeue_after is None
    assert warnings_of(events) == []
    assert [c["metadata"]["name"] for c in stage.kube.created] == [cm["metadata"]["name"]]


# -- the pool's own HTTPS CA bundle (issue 38 item 1) -----------------------------------------------


@pytest.fixture(scope="module")
def ca_pems(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """Two CAs' certificates (PEM): a bundle, and the second to rotate to."""
    directory = tmp_path_factory.mktemp("ca")
    first, second = (CertificateAuthority.create(directory, n).cert.read_text() for n in ("ca-1", "ca-2"))
    return first, second


async def tls_pass(stage: Stage, bundle: str | None) -> ComputePass:
    """A pass at PoolConfig over a pool whose ``spec.tls`` names ``pool-ca`` (stored with ``bundle``)."""
    await stage.pool_inputs()
    if bundle is not None:
        await stage.secret("pool-ca", **{"ca.crt": bundle})
    cr = await stage.pool(tls={"caBundleSecretRef": {"name": "pool-ca"}})
    p, _ = stage.pass_over(cr, nova=await stage.nova(spec={"openStackRelease": "2026.1"}))
    p.contract_secret = CONTRACT
    return p


async def test_a_pools_own_bundle_waits_for_its_secret_then_renders_and_rolls_on_a_rotation(
    stage: Stage, ca_pems: tuple[str, str]
) -> None:
    ca_pem, next_ca = ca_pems
    p = await tls_pass(stage, None)
    assert (await reconcile_pool_config(p)).requeue_after == p.settings.intervals.wait
    cond = condition(p)
    assert (cond["status"], cond["reason"]) == ("False", "WaitingForHTTPSCABundle")
    assert cond["message"] == f"spec.tls.caBundleSecretRef: Secret {stage.ns}/pool-ca not found"
    assert stage.kube.created == []

    await stage.secret("pool-ca", **{"ca.crt": "no certificate here: s3cr3t"})
    p, _ = stage.pass_over(p.cr, nova=p.nova)
    p.contract_secret = CONTRACT
    assert (await reconcile_pool_config(p)).requeue_after == p.settings.intervals.wait
    cond = condition(p)
    assert cond["reason"] == "HTTPSCABundleInvalid"
    assert "s3cr3t" not in cond["message"]

    await stage.admin.patch(SECRETS, "pool-ca", {"data": encoded(**{"ca.crt": ca_pem})}, stage.ns)
    p, _ = stage.pass_over(p.cr, nova=p.nova)
    p.contract_secret = CONTRACT
    assert (await reconcile_pool_config(p)).requeue_after is None
    assert p.https_ca_hash == hashlib.sha256(ca_pem.encode()).hexdigest()
    (cm,) = stage.kube.created
    conf = cm["data"][compute_pool.CONFIG_FILE]
    assert "[keystone_authtoken]\ncafile = /etc/nova-https-ca/ca.crt\n" in conf
    assert (
        "[barbican]\ncafile = /etc/nova-https-ca/ca.crt\nverify_ssl_path = /etc/nova-https-ca/ca.crt\n"
        in conf
    )

    rotated = ca_pem + next_ca
    await stage.admin.patch(SECRETS, "pool-ca", {"data": encoded(**{"ca.crt": rotated})}, stage.ns)
    again, _ = stage.pass_over(p.cr, nova=p.nova)
    again.contract_secret = CONTRACT
    again.cached = cached_from(cm)
    assert (await reconcile_pool_config(again)).requeue_after is None
    assert again.https_ca_hash not in ("", p.https_ca_hash)
    assert again.config_map == p.config_map  # the file names a path: only the pod annotation moves
