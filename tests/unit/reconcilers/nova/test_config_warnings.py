"""The upstream webhook's extraConfig warnings, as Warning events when a changed config is written.

The Nova's Config step and a pool's PoolConfig step run on the real API server
(``tests/integration/nova/test_config.py``, ``tests/integration/novacompute/test_pool_config.py``);
here the warnings themselves.
"""

from __future__ import annotations

from nova_operator import catalog

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
