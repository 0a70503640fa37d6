"""The upstream webhook's extraConfig warnings, as Warning events when a changed config is written.

The Nova's Config step runs on the real API server (``tests/integration/nova/test_config.py``); here
the warnings themselves and a pool's step.
"""

from __future__ import annotations

from typing import Any

from nova_operator import catalog
from tests.unit.reconcilers.compute.fakes import owned_config_map, pool_pass

DEPRECATED = {"DEFAULT": {"logdir": "/var/log/nova", "backdoor_port": "0"}}


def test_admission_warnings_name_the_replacement_or_the_missing_catalog() -> None:
    assert catalog.admission_warnings("2025.2", DEPRECATED) == [
        "spec.extraConfig [DEFAULT] backdoor_port: deprecated option in nova 2025.2, with no replacement",
        "spec.extraConfig [DEFAULT] logdir: deprecated option in nova 2025.2, replaced by DEFAULT/log_dir",
    ]
    assert catalog.admission_warnings("2025.2", {"DEFAULT": {"debug": "true"}}) == []
    assert catalog.admission_warnings("2025.2", None) == []
    (only,) = catalog.admission_warnings("2099.1", {"DEFAULT": {"debug": "true"}})
    assert only.startswith(
        "spec.extraConfig was not validated against an option catalog: none is shipped for"
    )
    assert catalog.admission_warnings("2099.1", {}) == []


def warnings_of(events: Any) -> list[str]:
    return [m for t, r, m in events.emitted if (t, r) == ("Warning", "ExtraConfigWarning")]


async def test_a_pool_warns_once_for_a_new_config_with_a_deprecated_option() -> None:
    p, events, _ = pool_pass(DEPRECATED, "2025.2", {})
    assert (await reconcile(p)).requeue_after is None
    assert warnings_of(events) == catalog.admission_warnings("2025.2", DEPRECATED)
    cm = owned_config_map(p)
    p, events, _ = pool_pass(DEPRECATED, "2025.2", {("configmaps", cm["metadata"]["name"]): cm})
    await reconcile(p)
    assert warnings_of(events) == []


async def reconcile(p: Any) -> Any:
    from nova_operator.reconcilers.compute.pool_config import reconcile_pool_config

    return await reconcile_pool_config(p)
