"""The PoolConfig step's option-catalog check (§4.2, run in the reconciler: there is no webhook).

The step itself runs on the real API server: tests/integration/novacompute/test_pool_config.py."""

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


def test_a_release_without_catalog_refuses_every_key() -> None:
    """Issue 13 item 9: without a catalog nothing can be checked, so nothing is let through."""
    (problem,) = catalog_problems("2099.1", {"libvirt": {"no_such_knob": "1"}})
    assert "release 2099.1 ships no option catalog" in problem
    assert "[libvirt] no_such_knob" in problem
    assert catalog_problems("", {"libvirt": {"no_such_knob": "1"}}) == []  # no release: nothing to run
    assert catalog_problems("2025.2", None) == []


def test_keys_are_checked_as_oslo_config_reads_them() -> None:
    """Issue 13 item 9: a section in another case, or a key with ':' / '=', is the option oslo reads."""
    assert catalog_problems("2025.2", {"LIBVIRT": {"virt_type": "qemu"}}) == []  # == [libvirt] virt_type
    assert catalog_problems("2025.2", {"DEFAULT": {"debug: true": "x"}}) == []  # oslo reads "debug"
    assert catalog_problems("2025.2", {"Libvirt": {"no_such_knob": "1"}}) != []
