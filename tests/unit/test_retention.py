"""Which config ConfigMaps a prune deletes: the current one and the newest others stay."""

from __future__ import annotations

from typing import Any

from nova_operator.decisions.retention import surplus


def cm(name: str, created: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "creationTimestamp": created}}


def test_the_current_one_stays_however_old() -> None:
    items = [
        cm("cur", "2026-01-01T00:00:00Z"),
        *(cm(f"h{i}", f"2026-01-0{i}T00:00:00Z") for i in range(2, 7)),
    ]
    assert sorted(surplus(items, "cur", 3)) == ["h2", "h3"]


def test_older_ones_go_whatever_the_list_order() -> None:
    items = [cm(f"h{i}", f"2026-01-0{i}T00:00:00Z") for i in range(1, 7)]
    for order in (items, items[::-1], items[2:] + items[:2]):
        assert sorted(surplus([cm("cur", "2026-01-09T00:00:00Z"), *order], "cur", 3)) == ["h1", "h2", "h3"]


def test_a_tie_in_the_same_second_keeps_the_name_that_sorts_last() -> None:
    """The API server stamps whole seconds: renders in one second tie, and the name decides."""
    same = "2026-01-01T00:00:07Z"
    items = [
        cm("nova-config-b6242037", same),
        cm("nova-config-06056f99", same),
        cm("nova-config-ef190d4f", same),
    ]
    items.append(cm("nova-config-13c3de60", "2026-01-01T00:00:06Z"))
    assert surplus(items, "cur", 3) == ["nova-config-13c3de60"]  # older than the three that tie
    assert surplus(items, "cur", 2) == ["nova-config-06056f99", "nova-config-13c3de60"]
    assert surplus(items[::-1], "cur", 2) == ["nova-config-06056f99", "nova-config-13c3de60"]


def test_keeping_zero_deletes_every_other_and_nothing_to_delete_is_empty() -> None:
    items = [cm("cur", "2026-01-01T00:00:00Z"), cm("a", "2026-01-02T00:00:00Z")]
    assert surplus(items, "cur", 0) == ["a"]
    assert surplus(items, "cur", 3) == []
    assert surplus([], "cur", 3) == []
