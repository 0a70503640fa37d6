"""Issue 26 item 6: options nova marks secret never reach a ConfigMap; ``spec.secretConfig`` is their way in.

The catalogs record oslo.config's ``secret`` flag (generated from each release's nova). The Config
steps of a Nova and of a pool refuse such an option in ``extraConfig`` (it would be rendered into a
ConfigMap ``view`` can read) with a message naming ``spec.secretConfig.secretRef``; that Secret's
``section.option`` keys are checked against the catalog, published in oslo.config form as a derived
Secret the pods read as ``OS_<SECTION>__<OPTION>``, and a keyed digest of the values rolls the pods.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from nova_operator import apply, catalog, conditions, secret_config
from nova_operator.kube.resources import SECRETS
from nova_operator.models.common import SecretConfigSpec
from nova_operator.reconcilers.compute.pool_config import catalog_problems, reconcile_pool_config
from nova_operator.reconcilers.nova import config, secrets
from nova_operator.renderers import compute_pool, workload
from tests.unit.reconcilers.compute.fakes import FakeCompute, make_pass
from tests.unit.reconcilers.compute.fakes import FakeKube as ComputeKube
from tests.unit.reconcilers.nova.passes import ALL_SECRETS, NS, make_ctx, secret

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


async def test_the_config_step_refuses_a_secret_option_and_names_the_secret_backed_way(
    kube: Any, events: Any
) -> None:
    ctx = make_ctx(kube, events, extraConfig={"vault": {"root_token_id": "s.t0ken"}})
    await config.reconcile_config(ctx)
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert (c["status"], c["reason"]) == ("False", "ConfigError")
    assert "spec.extraConfig[vault][root_token_id]: nova marks this option secret" in c["message"]
    assert "key vault.root_token_id of the Secret named by spec.secretConfig.secretRef" in c["message"]
    assert "s.t0ken" not in c["message"]
    assert kube.writes() == []  # no ConfigMap carries it


def test_a_pool_refuses_a_secret_option_in_extra_config() -> None:
    (problem,) = catalog_problems(
        "2025.2", {"libvirt": {"virt_type": "kvm"}, "vault": {"root_token_id": "t"}}
    )
    assert problem.startswith("spec.extraConfig[vault][root_token_id]: nova marks this option secret")


def _watch_back(kube: Any, ctx: Any) -> None:
    """What the Secrets informer holds after the pass's writes."""
    for (ref, _ns, _name), obj in kube.store.items():
        if ref == str(SECRETS):
            ctx.caches[SECRETS].upsert(obj)


def _published(kube: Any) -> dict[str, str]:
    stored = kube.store[(str(SECRETS), NS, "nova-secret-config")]
    return {k: base64.b64decode(v).decode() for k, v in stored["data"].items()}


async def test_secret_config_is_published_in_oslo_form_and_read_by_every_deployment(
    kube: Any, events: Any
) -> None:
    source = secret(
        "nova-secrets", **{"vault.root_token_id": "s.$tok", "DATABASE.slave_connection": "mysql+pymysql://r"}
    )
    ctx = make_ctx(kube, events, *ALL_SECRETS, source, secretConfig={"secretRef": {"name": "nova-secrets"}})
    assert (await secrets.reconcile_secrets(ctx)).requeue_after is None
    assert _published(kube) == {
        "vault.root_token_id": "s.$$tok",
        "database.slave_connection": "mysql+pymysql://r",
    }
    assert ctx.state.secret_config_keys == ("database.slave_connection", "vault.root_token_id")
    inputs = ctx.state.workload_inputs()
    for component, deployment in workload.deployments(ctx.nova, inputs).items():
        template = deployment["spec"]["template"]
        env = {
            e["name"]: e.get("valueFrom") for c in template["spec"]["containers"] for e in c.get("env") or []
        }
        assert env["OS_VAULT__ROOT_TOKEN_ID"] == {
            "secretKeyRef": {"name": "nova-secret-config", "key": "vault.root_token_id"}
        }, component
        assert "OS_DATABASE__SLAVE_CONNECTION" in env, component
        assert template["metadata"]["annotations"]["nova.c5c3.io/secret-config-hash"] == (
            ctx.state.secret_config_digest
        )
    first_digest = ctx.state.secret_config_digest
    assert first_digest == secret_config.values_digest(_published(kube), ctx.state.digest_key)
    # a converged pass writes nothing
    _watch_back(kube, ctx)
    before = len(kube.writes())
    again = make_ctx(kube, events, *ALL_SECRETS, source, secretConfig={"secretRef": {"name": "nova-secrets"}})
    _watch_back(kube, again)
    await secrets.reconcile_secrets(again)
    assert len(kube.writes()) == before
    # a rotated value rolls the pods (the annotation follows the values)
    rotated = secret(
        "nova-secrets", **{"vault.root_token_id": "s.other", "DATABASE.slave_connection": "mysql+pymysql://r"}
    )
    third = make_ctx(
        kube, events, *ALL_SECRETS, rotated, secretConfig={"secretRef": {"name": "nova-secrets"}}
    )
    _watch_back(kube, third)
    await secrets.reconcile_secrets(third)
    assert third.state.secret_config_digest != first_digest
    stored = kube.store[(str(SECRETS), NS, "nova-secret-config")]
    assert stored["metadata"]["annotations"][apply.APPLIED_DIGEST]


async def test_bad_keys_are_named_and_no_value_is_echoed(kube: Any, events: Any) -> None:
    source = secret(
        "nova-secrets",
        **{"vault.no_such": "v1", "database.connection": "v2", "plain": "v3", "neutron.password": "v4"},
    )
    ctx = make_ctx(kube, events, *ALL_SECRETS, source, secretConfig={"secretRef": {"name": "nova-secrets"}})
    assert (await secrets.reconcile_secrets(ctx)).requeue_after == 15.0
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert c["reason"] == "SecretConfigInvalid"
    for part in (
        "key database.connection: the operator sets [database] connection",
        "key neutron.password: the operator sets",
        "key plain is not section.option",
        "key vault.no_such: no such option in the nova 2025.2 option catalog",
    ):
        assert part in c["message"]
    assert not any(v in c["message"] for v in ("v1", "v2", "v3", "v4"))
    assert ctx.state.service_user_password == ""  # a wait hands nothing on
    assert (str(SECRETS), NS, "nova-secret-config") not in kube.store


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


async def test_a_deprecated_name_of_an_owned_option_is_refused_in_the_secret(kube: Any, events: Any) -> None:
    source = secret("nova-secrets", **{"DEFAULT.log_config": "/tmp/evil.ini"})
    ctx = make_ctx(kube, events, *ALL_SECRETS, source, secretConfig={"secretRef": {"name": "nova-secrets"}})
    assert (await secrets.reconcile_secrets(ctx)).requeue_after == 15.0
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert c["reason"] == "SecretConfigInvalid"
    assert "key DEFAULT.log_config: the operator sets [DEFAULT] log_config_append" in c["message"]
    assert "/tmp/evil.ini" not in c["message"]
    assert (str(SECRETS), NS, "nova-secret-config") not in kube.store


async def test_a_missing_secret_config_secret_is_a_wait(kube: Any, events: Any) -> None:
    ctx = make_ctx(kube, events, *ALL_SECRETS, secretConfig={"secretRef": {"name": "absent"}})
    assert (await secrets.reconcile_secrets(ctx)).requeue_after == 15.0
    c = ctx.condition(conditions.SECRETS_READY)
    assert c is not None
    assert (c["reason"], c["message"]) == (
        "WaitingForSecretConfig",
        f"spec.secretConfig.secretRef: Secret {NS}/absent not found",
    )


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
