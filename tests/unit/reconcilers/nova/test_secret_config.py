"""Issue 26 item 6: options nova marks secret never reach a ConfigMap; ``spec.secretConfig`` is their way in.

The catalogs record oslo.config's ``secret`` flag (generated from each release's nova). The Config
steps of a Nova and of a pool refuse such an option in ``extraConfig`` (it would be rendered into a
ConfigMap ``view`` can read) with a message naming ``spec.secretConfig.secretRef``; that Secret's
``section.option`` keys are checked against the catalog, published in oslo.config form as a derived
Secret the pods read as ``OS_<SECTION>__<OPTION>``, and a keyed digest of the values rolls the pods.

The Nova's Config and Secrets steps and a pool's PoolConfig step run on the real API server
(``tests/integration/nova/test_config.py``, ``test_secrets.py`` and
``tests/integration/novacompute/test_pool_config.py``); here the catalogs' decisions.
"""

from __future__ import annotations

import pytest

from nova_operator import catalog
from nova_operator.reconcilers.compute.pool_config import catalog_problems

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
