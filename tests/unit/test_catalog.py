"""The extraConfig option catalogs: shipped per release, generated, and queried purely."""

from __future__ import annotations

import copy
import json
import sys
from importlib import resources
from pathlib import Path

import pytest

from nova_operator import catalog

REPO = Path(__file__).resolve().parents[2]
RELEASES = ("2025.2", "2026.1", "2026.2")


def _releases_txt() -> dict[str, str]:
    sys.path.insert(0, str(REPO / "tools" / "catalogs"))
    try:
        import generate
    finally:
        sys.path.pop(0)
    return dict(generate.releases())


def test_a_catalog_ships_for_every_supported_release() -> None:
    assert catalog.supported_releases() == RELEASES
    assert tuple(_releases_txt()) == RELEASES


@pytest.mark.parametrize("release", RELEASES)
def test_each_catalog_is_generated_from_the_nova_package_the_release_names(release: str) -> None:
    raw = json.loads(resources.files("nova_operator").joinpath(f"data/catalog-{release}.json").read_text())
    assert raw["release"] == release
    assert raw["nova_version"] == _releases_txt()[release]
    assert raw["generator"].startswith("tools/catalogs/generate.py")
    # the namespaces come from nova's own nova-config-generator.conf
    assert raw["namespaces"][0] == "nova.conf"
    assert {"oslo.log", "oslo.messaging", "oslo.policy", "oslo.middleware", "oslo.concurrency"} <= set(
        raw["namespaces"]
    )
    assert "keystonemiddleware.auth_token" in raw["namespaces"]
    assert list(raw["sections"]) == sorted(raw["sections"])
    for options in raw["sections"].values():
        assert list(options) == sorted(options)


@pytest.mark.parametrize("release", RELEASES)
def test_the_catalog_knows_every_key_the_operator_renders(release: str) -> None:
    cat = catalog.load_catalog(release)
    rendered = {
        "DEFAULT": ["use_stderr", "debug", "state_path", "default_log_levels", "log_config_append", "web"],
        "api_database": ["connection"],
        "database": ["connection"],
        "keystone_authtoken": ["auth_type", "auth_url", "www_authenticate_uri", "username", "password"],
        "service_user": ["send_service_user_token", "auth_url", "password"],
        "oslo_messaging_rabbit": [
            "rabbit_quorum_queue",
            "ssl",
            "ssl_ca_file",
            "ssl_cert_file",
            "ssl_key_file",
            "use_queue_manager",
        ],
        "cache": [
            "enabled",
            "backend",
            "memcache_servers",
            "tls_enabled",
            "tls_cafile",
            "tls_certfile",
            "tls_keyfile",
        ],
        "oslo_messaging_notifications": ["driver"],
        "vnc": ["enabled", "novncproxy_base_url", "novncproxy_host", "novncproxy_port"],
        "scheduler": ["workers", "discover_hosts_in_cells_interval"],
        "neutron": ["service_metadata_proxy", "metadata_proxy_shared_secret", "valid_interfaces"],
    }
    for section, keys in rendered.items():
        for key in keys:
            assert cat.knows(section, key), (release, section, key)


def test_unknown_options_names_every_unknown_pair_sorted() -> None:
    extra = {
        "zzz_not_a_section": {"b": "1", "a": "2"},
        "DEFAULT": {"debug": "true", "no_such_option": "x"},
        "libvirt": {"cpu_mode": "host-model"},
    }
    assert catalog.unknown_options("2025.2", extra) == [
        ("DEFAULT", "no_such_option"),
        ("zzz_not_a_section", "a"),
        ("zzz_not_a_section", "b"),
    ]


def test_exempt_pairs_are_never_reported() -> None:
    extra = {"DEFAULT": {"no_such_option": "x"}}
    assert catalog.unknown_options("2026.1", extra, exempt={("DEFAULT", "no_such_option")}) == []


def test_a_deprecated_name_is_known_and_reported_with_its_replacement() -> None:
    cat = catalog.load_catalog("2026.2")
    old, new = next(iter(sorted(cat.aliases.items())))
    section, _, key = old.partition("/")
    extra = {section: {key: "x"}}
    assert catalog.unknown_options("2026.2", extra) == []
    [found] = catalog.deprecated_options("2026.2", extra)
    assert found == catalog.DeprecatedOption(section, key, new)
    assert catalog.format_deprecated("2026.2", found) == (
        f"spec.extraConfig [{section}] {key}: deprecated option in nova 2026.2, replaced by {new}"
    )


def test_messages_name_the_section_and_the_key() -> None:
    extra = {"nope": {"k": "v"}, "DEFAULT": {"nope_key": "v"}}
    assert catalog.unknown_option_messages("2026.1", extra) == [
        "spec.extraConfig[DEFAULT][nope_key]: no such option in the nova 2026.1 option catalog",
        "spec.extraConfig[nope][k]: no such section in the nova 2026.1 option catalog",
    ]


def test_api_auth_strategy_is_not_in_the_catalogs() -> None:
    for release in RELEASES:
        assert catalog.unknown_options(release, {"api": {"auth_strategy": "keystone"}}) == [
            ("api", "auth_strategy")
        ]


def test_a_release_without_catalog_fails_open_with_one_warning() -> None:
    with pytest.raises(catalog.NoCatalogError):
        catalog.unknown_options("2024.1", {"DEFAULT": {"debug": "true"}})
    assert catalog.no_catalog_warning("2024.1").startswith(
        "spec.extraConfig was not validated against an option catalog: "
    )


def test_queries_do_not_mutate_their_input() -> None:
    extra = {"DEFAULT": {"nope": "1"}, "x": {"y": "z"}}
    before = copy.deepcopy(extra)
    catalog.unknown_options("2025.2", extra)
    catalog.deprecated_options("2025.2", extra)
    assert extra == before


def test_oslo_name_is_how_oslo_config_reads_a_rendered_line() -> None:
    """Issue 13 item 9 (checked against the real oslo.config: sections lowercased, key cut at ':'/'=')."""
    assert catalog.oslo_name("Keystone_Authtoken", "password") == ("keystone_authtoken", "password")
    assert catalog.oslo_name("DEFAULT", "transport_url:rabbit") == ("DEFAULT", "transport_url")
    assert catalog.oslo_name("DEFAULT", "transport_url = x") == ("DEFAULT", "transport_url")
    assert catalog.oslo_name("default", "debug") == ("default", "debug")  # not DEFAULT to oslo
    assert catalog.oslo_name(" vnc ", " enabled ") == ("vnc", "enabled")


def test_the_owned_key_guards_normalise_like_oslo() -> None:
    from nova_operator.renderers import compute_pool, novaconf

    extra = {"DEFAULT": {"transport_url:x": "y"}, "Keystone_Authtoken": {"password": "p"}}
    assert compute_pool.overridden_owned_keys(extra) == [
        ("DEFAULT", "transport_url:x"),
        ("Keystone_Authtoken", "password"),
    ]
    assert [(r.section, r.key) for r in novaconf.rejected_keys(extra)]


@pytest.mark.parametrize("release", ["2025.2", "2026.1"])
def test_a_catalog_describes_the_oslo_libraries_its_release_ships(release: str) -> None:
    """Issue 23: each catalog comes from a venv pinned to its own release's upper-constraints.

    oslo.policy < 6 (2025.2: 4.6.0, 2026.1: 5.0.0) still has ``[oslo_policy] enforce_scope``; a catalog
    generated with 2026.2's oslo.policy 6 lacks it and refused a key those releases accept.
    """
    assert catalog.unknown_options(release, {"oslo_policy": {"enforce_scope": "true"}}) == []


def test_an_integer_option_carries_the_default_its_release_registers() -> None:
    """nova 33 (2026.1) raised oslo.service's graceful_shutdown_timeout with set_defaults: the
    catalog records the value nova runs with, not the library's."""
    graceful = {r: catalog.load_catalog(r).option("DEFAULT", "graceful_shutdown_timeout") for r in RELEASES}
    assert all(info is not None and isinstance(info.default, int) for info in graceful.values())
    assert graceful["2025.2"] != graceful["2026.1"]
    assert catalog.load_catalog("2025.2").option("DEFAULT", "manager_shutdown_timeout") is None
    for release in RELEASES:  # only Integer options have one
        for options in catalog.load_catalog(release).sections.values():
            assert all(o.default is None or o.type == "Integer" for o in options.values())
