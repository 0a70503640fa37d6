"""Issue 26 item 4: which Nova names would share a child with another Nova, and that the CRD refuses them."""

from __future__ import annotations

from itertools import permutations

from nova_operator import naming
from nova_operator.models.nova import REFUSED_NAME_SUFFIXES


def _colliding_tails(suffixes: tuple[str, ...]) -> set[str]:
    """Each ``t`` for which Nova ``x + t``'s child ``x + t + s2`` is Nova ``x``'s ``x + s1``, s1 = t + s2."""
    return {s1[: len(s1) - len(s2)] for s1, s2 in permutations(suffixes, 2) if s1.endswith(s2) and s1 != s2}


def test_every_name_that_would_share_a_child_with_another_nova_is_refused() -> None:
    for kind, suffixes in naming.CHILD_SUFFIXES.items():
        concrete = tuple(s.replace(naming.CELL0_PLACEHOLDER, "-nova-cell0") for s in suffixes)
        for tail in _colliding_tails(concrete):
            assert tail.endswith(REFUSED_NAME_SUFFIXES), (kind, tail)


def test_the_remote_suffix_is_what_the_compute_contracts_needed() -> None:
    assert _colliding_tails(naming.CHILD_SUFFIXES["Secret"]) == {"-api", "-remote"}
    assert "-remote" in REFUSED_NAME_SUFFIXES


def test_cell0_names_of_two_novas_can_meet_through_the_schema_name() -> None:
    """The gap no rule on one Nova can close: left to the ownership check (ChildOwnedByAnother)."""
    assert naming.cell0_object_name("x", "a_nova") == "x-a-nova-cell0"
    assert naming.cell0_object_name("x-a", "nova") == "x-a-nova-cell0"
    assert naming.cell0_object_name("nova", "nova") == "nova-nova-cell0"
