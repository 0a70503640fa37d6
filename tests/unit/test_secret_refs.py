"""Issue 26 item 5: what a CR author can make the operator read, and ``--secret-ref-label`` to narrow it.

By default a Nova may name any Secret of its namespace (documented in docs/install.md). With the
flag, a Secret a CR names is used only while it carries the label: the Nova's Secrets step checks
every Secret its spec names before any is read, copied or mounted; a pool checks its Nova's
service-user Secret and its own secretConfig. The refusal is a condition with reason
``SecretRefNotLabelled`` that names the field and the Secret.

The Nova's Secrets step and a pool's NovaRef and PoolConfig steps run on the real API server
(``tests/integration/nova/test_secrets.py``, ``tests/integration/novacompute/test_nova_ref.py`` and
``test_pool_config.py``); here the flag and the policy.
"""

from __future__ import annotations

from typing import Any

import pytest

from nova_operator import cli
from nova_operator.controllers import compute_settings, with_settings
from nova_operator.reconcilers.nova.context import NovaOptions
from nova_operator.secret_refs import SecretRefPolicy, parse_policy

LABEL = "nova.openstack.c5c3.io/usable-by-nova"


def test_the_flag_and_its_variable_parse_to_a_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli.parse_settings([]).secret_refs is None  # default: any Secret of the CR's namespace
    assert cli.parse_settings([f"--secret-ref-label={LABEL}"]).secret_refs == SecretRefPolicy(LABEL)
    monkeypatch.setenv("NOVA_OPERATOR_SECRET_REF_LABEL", "team=nova")
    assert cli.parse_settings([]).secret_refs == SecretRefPolicy("team", "nova")
    settings = cli.parse_settings([])
    assert with_settings(NovaOptions(), settings).secret_refs == SecretRefPolicy("team", "nova")
    assert compute_settings(settings).secret_refs == SecretRefPolicy("team", "nova")


@pytest.mark.parametrize("bad", ["-x", "a/b/c", "x=has space", "UPPER.prefix/x", "k=" + "v" * 64])
def test_a_bad_label_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="--secret-ref-label"):
        parse_policy(bad)
    with pytest.raises(SystemExit) as exc:
        cli.parse_settings([f"--secret-ref-label={bad}"])
    assert exc.value.code == 2


def test_the_policy_matches_key_or_key_and_value() -> None:
    def labelled(labels: dict[str, str]) -> dict[str, Any]:
        return {"metadata": {"labels": labels}}

    assert SecretRefPolicy("k").permits(labelled({"k": ""}))
    assert not SecretRefPolicy("k").permits(labelled({"other": "x"}))
    assert SecretRefPolicy("k", "v").permits(labelled({"k": "v"}))
    assert not SecretRefPolicy("k", "v").permits(labelled({"k": "w"}))
    assert parse_policy("k=") == SecretRefPolicy("k", "")
    assert parse_policy("") is None
