"""A release that drops a policy rule, for the tests of what an upgrade does about one.

The shipped catalogs need not hold such a pair (nova rarely drops a rule between two releases),
so a test takes a shipped catalog and removes one rule from it, with the rule's deprecated names.
"""

from __future__ import annotations

import dataclasses

import pytest

from nova_operator import policy_catalog


def drop_rule(monkeypatch: pytest.MonkeyPatch, release: str, rule: str) -> None:
    """From now on, ``release``'s catalog lacks ``rule`` (and the deprecated names of it)."""
    real = policy_catalog.load_policy_catalog
    shipped = real(release)
    assert shipped is not None, release
    assert rule in shipped.rules, (release, rule)
    dropped = dataclasses.replace(
        shipped,
        rules=shipped.rules - {rule},
        aliases={old: new for old, new in shipped.aliases.items() if rule not in (old, new)},
    )
    monkeypatch.setattr(
        policy_catalog, "load_policy_catalog", lambda name: dropped if name == release else real(name)
    )
