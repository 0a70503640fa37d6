"""Issue 26 item 6: options nova marks secret never reach a ConfigMap; ``spec.secretConfig`` is their way in.

The catalogs record oslo.config's ``secret`` flag (generated from each release's nova). The Config
steps of a Nova and of a pool refuse such an option in ``extraConfig`` (it would be rendered into a
ConfigMap ``view`` can read) with a message naming ``spec.secretConfig.secretRef``; that Secret's
``section.option`` keys are checked against the catalog, published in oslo.config form as a derived
Secret the pods read as ``OS_<SECTION>__<OPTION>``, and a keyed digest of the values rolls the pods.

The Nova's Config and Secrets steps run on the real API server (``tests/integration/nova/test_config.py``
and ``test_secrets.py``); here the catalogs' decisions and a pool's step.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from nova_operator import catalog, conditions
from nova_operator.models.common import SecretConfigSpec
from nova_operator.reconcilers.compute.pool_config import catalog_problems, reconcile_pool_config
from nova_operator.renderers import compute_pool
from tests.unit.reconcilers.compute.fakes import FakeCompute, make_pass
from tests.unit.reconcilers.compute.fakes import FakeKube as ComputeKube

ISSUE_EXAMPLES = [
    ("database", "slave_connection"),
    ("oslo_messaging_notifications", "transport_url"),
    ("key_manager", "fixed_key"),
    ("vault", "root_token_id"),
]


@pytest.mark.parametrize("release", catalog.supported_releases())
def test_the_catalogs_know_which_options_are_secret(release: str) -> None:
    extra = {s: {k: "x"} for s, k in ISSUE_EXAMPLES} | {"DEFAULT": {"debug": "true"}}
    assert catalog.secret_options(release, extra) == sorted(ISSUE_EXAMPLES)
    assert catalog.secret_options(release, {"KEYMGR": {"fixed_key": "x"}}) == [
        ("KEYMGR", "fixed_key")
    ]  # alias


def test_a_pool_refuses_a_secret_option_in_extra_config() -> None:
    (problem,) = catalog_problems(
        "2025.2", {"libvirt": {"virt_type": "kvm"}, "vault": {"root_token_id": "t"}}
    )
    assert problem.startswith("spec.extraConfig[vault][root_token_id]: nova marks this option secret")


@pytest.mark.parametrize("release", catalog.supported_releases())
def test_a_deprecated_name_of_an_owned_option_is_resolved_before_the_owned_check(release: str) -> None:
    """Issue 36: ``DEFAULT.log_config`` is oslo.log's old name of ``[DEFAULT] log_config_append``,
    which the operator sets; the check must see the option the name resolves to, not the name."""
    from nova_operator.renderers import novaconf

    assert catalog.load_catalog(release).aliases["DEFAULT/log_config"] == "DEFAULT/log_config_append"
    for key in ("DEFAULT.log_config", "DEFAULT.log-config", "DEFAULT.log_config_append"):
        pairs, problems = catalog.secret_config_problems(release, [key], owned=novaconf.OWNED_PAIRS)
        assert pairs == {}
        assert problems == [f"key {key}: the operator sets [DEFAULT] log_config_append from the spec"]


# -- a pool ----------------------------------------------------------------------------------------


class PoolKube(ComputeKube):
    """The compute FakeKube with a server-side apply that stores what it is sent."""

    async def apply(self, ref: Any, body: Any, **_: Any) -> Any:
        self.objects[(ref.plural, body["metadata"]["name"])] = body
        return body


def _pool(extra_secret: dict[str, str] | None) -> Any:
    objects: dict[tuple[str, str], Any] = {
        ("secrets", "nova-compute-config"): {
            "metadata": {"name": "nova-compute-config"},
            "data": {k: base64.b64encode(b"x").decode() for k in compute_pool.REQUIRED_CONTRACT_KEYS},
        },
        ("secrets", "nova-digest-key"): {
            "metadata": {"name": "nova-digest-key"},
            "data": {"key": base64.b64encode(b"k" * 64).decode()},
        },
    }
    if extra_secret is not None:
        objects[("secrets", "pool-secrets")] = {
            "metadata": {"name": "pool-secrets"},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in extra_secret.items()},
        }
    p, _events = make_pass([], compute=FakeCompute(), kube=PoolKube(objects=objects))
    spec = SecretConfigSpec.model_validate({"secretRef": {"name": "pool-secrets"}})
    p.pool = p.pool.model_copy(update={"spec": p.pool.spec.model_copy(update={"secret_config": spec})})
    p.contract_secret = "nova-compute-config"
    return p


async def test_a_pool_publishes_its_secret_config_and_its_pods_read_it() -> None:
    p = _pool({"libvirt.rbd_secret_uuid": "457eb676-$x"})
    assert (await reconcile_pool_config(p)).requeue_after is None
    name = compute_pool.secret_config_name(p.name)
    stored = p.kube.objects[("secrets", name)]
    assert base64.b64decode(stored["data"]["libvirt.rbd_secret_uuid"]).decode() == "457eb676-$$x"
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


async def test_a_pool_refuses_a_key_the_contract_sets() -> None:
    p = _pool({"DEFAULT.transport_url": "rabbit://x"})
    assert (await reconcile_pool_config(p)).requeue_after == 15.0
    c = p.condition(conditions.CONFIG_READY)
    assert c is not None
    assert c["reason"] == "SecretConfigInvalid"
    assert "key DEFAULT.transport_url: the operator sets [DEFAULT] transport_url" in c["message"]
    assert "rabbit://x" not in c["message"]


async def test_with_secret_ref_label_a_pool_uses_only_a_labelled_secret_config() -> None:
    """Issue 26 item 5: --secret-ref-label also covers the pool's own secretConfig Secret."""
    from dataclasses import replace

    from nova_operator.secret_refs import SecretRefPolicy

    p = _pool({"libvirt.rbd_secret_uuid": "u"})
    p.settings = replace(p.settings, secret_refs=SecretRefPolicy("usable"))
    assert (await reconcile_pool_config(p)).requeue_after == 15.0
    c = p.condition(conditions.CONFIG_READY)
    assert c is not None
    assert c["reason"] == "SecretRefNotLabelled"
    assert c["message"].startswith(
        "spec.secretConfig.secretRef: Secret ns/pool-secrets does not carry the label"
    )
    assert ("secrets", compute_pool.secret_config_name(p.name)) not in p.kube.objects
