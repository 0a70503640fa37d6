"""The PoolConfig step's option-catalog check (§4.2, run in the reconciler: there is no webhook)."""

from __future__ import annotations

from nova_operator.reconcilers.compute.pool_config import catalog_problems


def test_known_options_and_owned_keys_pass() -> None:
    extra = {
        "libvirt": {"live_migration_permit_auto_converge": "true", "virt_type": "qemu"},
        "DEFAULT": {"debug": "true", "host": "x"},  # host is owned: exempt from the scan
    }
    assert catalog_problems("2025.2", extra) == []


def test_unknown_option_and_section_are_named() -> None:
    problems = catalog_problems("2025.2", {"libvirt": {"no_such_knob": "1"}, "nosuchsection": {"k": "v"}})
    assert problems == [
        "spec.extraConfig[libvirt][no_such_knob]: no such option in the nova 2025.2 option catalog",
        "spec.extraConfig[nosuchsection][k]: no such section in the nova 2025.2 option catalog",
    ]


def test_no_catalog_or_no_release_fails_open() -> None:
    assert catalog_problems("2099.1", {"libvirt": {"no_such_knob": "1"}}) == []
    assert catalog_problems("", {"libvirt": {"no_such_knob": "1"}}) == []
    assert catalog_problems("2025.2", None) == []
