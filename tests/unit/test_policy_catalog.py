"""The policy-rule catalogs (issue 38 item 3): shipped per release, generated, and queried purely;
the policy file of a ConfigMap parsed as oslo.policy reads it."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from nova_operator import catalog, policy_catalog
from tests.policy_drops import drop_rule

RELEASES = ("2025.2", "2026.1", "2026.2")
SERVERS_CREATE = "os_compute_api:servers:create"


def _raw(release: str) -> dict[str, object]:
    text = resources.files("nova_operator").joinpath(f"data/policy-{release}.json").read_text()
    return dict(json.loads(text))


def test_a_policy_catalog_ships_for_every_release_an_option_catalog_ships_for() -> None:
    assert policy_catalog.policy_releases() == RELEASES == catalog.supported_releases()


@pytest.mark.parametrize("release", RELEASES)
def test_each_policy_catalog_is_generated_from_the_release_s_nova(release: str) -> None:
    raw = _raw(release)
    assert raw["release"] == release
    assert raw["nova_version"] == catalog.load_catalog(release).nova_version
    assert str(raw["generator"]).startswith("tools/catalogs/generate.py")
    rules = raw["rules"]
    assert isinstance(rules, dict)
    assert list(rules) == sorted(rules)
    # nova registers a few hundred rules, the compute API's and its base rules among them
    assert len(rules) > 200
    assert {SERVERS_CREATE, "os_compute_api:servers:delete", "context_is_admin", "admin_api"} <= set(rules)


@pytest.mark.parametrize("release", RELEASES)
def test_a_rule_nova_registers_is_known_and_a_made_up_one_is_not(release: str) -> None:
    assert policy_catalog.unknown_rules(release, [SERVERS_CREATE, "os_compute_api:servers:crate"]) == [
        "os_compute_api:servers:crate"
    ]
    assert policy_catalog.policy_problems(release, {SERVERS_CREATE: "role:admin"}) == []
    assert policy_catalog.policy_problems(release, {"os_compute_api:servers:crate": "role:admin"}) == [
        f"spec.policy.rules[os_compute_api:servers:crate]: no such policy rule in nova {release}"
    ]


def test_a_deprecated_rule_name_counts_as_the_rule_that_replaced_it() -> None:
    found = [
        (release, old, new)
        for release in RELEASES
        if (cat := policy_catalog.load_policy_catalog(release)) is not None
        for old, new in cat.aliases.items()
        if old not in cat.rules
    ]
    # the catalogs record deprecated names where nova declares them; each resolves to a rule
    for release, old, new in found:
        cat = policy_catalog.load_policy_catalog(release)
        assert cat is not None
        assert new in cat.rules
        assert cat.knows(old)
        assert policy_catalog.unknown_rules(release, [old]) == []


def test_a_release_without_a_catalog_checks_nothing_and_says_so() -> None:
    assert policy_catalog.load_policy_catalog("2024.1") is None
    assert policy_catalog.unknown_rules("2024.1", [SERVERS_CREATE]) is None
    (message,) = policy_catalog.policy_problems("2024.1", {SERVERS_CREATE: "role:admin"})
    assert "release 2024.1 ships no policy-rule catalog" in message
    assert "2025.2, 2026.1, 2026.2" in message
    assert policy_catalog.policy_problems("2024.1", {}) == []  # nothing to check, nothing refused


def test_a_rule_the_target_release_drops_is_refused_saying_the_installed_one_had_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before, after, rule = "2026.1", "2026.2", "os_compute_api:os-hypervisors:list"
    drop_rule(monkeypatch, after, rule)
    assert policy_catalog.policy_problems(before, {rule: "role:admin"}) == []
    assert policy_catalog.dropped_rules(before, after, [rule, SERVERS_CREATE]) == [rule]
    assert policy_catalog.policy_problems(after, {rule: "role:admin"}, installed=before) == [
        f"spec.policy.rules[{rule}]: nova {after} drops this policy rule (nova {before} registers it)"
    ]
    # the release before warns about it when its config is written
    assert policy_catalog.next_release(before) == after
    assert policy_catalog.next_release_warnings(before, {rule: "x", SERVERS_CREATE: "y"}) == [
        f"spec.policy.rules[{rule}]: nova {after} drops this policy rule; "
        "change the override before upgrading"
    ]
    assert policy_catalog.next_release(RELEASES[-1]) is None
    assert policy_catalog.next_release_warnings(RELEASES[-1], {rule: "x"}) == []


def test_the_source_is_named_in_every_message() -> None:
    source = "spec.policy.configMapRef (ConfigMap p, key policy.yaml)"
    assert policy_catalog.policy_problems("2026.1", {"nope": "@"}, source=source) == [
        f"{source}[nope]: no such policy rule in nova 2026.1"
    ]


@pytest.mark.parametrize(
    "text",
    [
        '"os_compute_api:servers:create": "role:admin"\n',
        '{"os_compute_api:servers:create": "role:admin"}',  # JSON, as oslo.policy also reads it
    ],
)
def test_a_policy_file_in_yaml_or_json_gives_its_rules(text: str) -> None:
    assert policy_catalog.parse_policy_file(text, source="s") == ({SERVERS_CREATE: "role:admin"}, [])


def test_an_empty_policy_file_has_no_rules() -> None:
    assert policy_catalog.parse_policy_file("  \n", source="s") == ({}, [])


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("a: [b\n", "s: not a YAML or JSON policy file (line 2)"),
        ("- a\n- b\n", "s: a policy file is a mapping of rule name -> check string"),
        ("a: {b: c}\n", "s[a]: the check must be a string"),
        ("1: role:admin\n", "s: a rule name must be a non-empty string, not 1"),
    ],
)
def test_a_policy_file_oslo_policy_would_not_read_as_rules_is_a_problem(text: str, problem: str) -> None:
    _rules, problems = policy_catalog.parse_policy_file(text, source="s")
    assert problems == [problem]
