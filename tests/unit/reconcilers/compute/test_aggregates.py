"""The Aggregates step's required set (novacompute-crd.md §11), a pure function.

The step itself runs on the real API server: tests/integration/novacompute/test_aggregates.py."""

from __future__ import annotations

from nova_operator.reconcilers.compute.aggregates import required_names


def sibling(nodes: list[dict[str, str]], deleting: bool = False) -> dict[str, object]:
    meta: dict[str, object] = {"name": "other"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"nodes": nodes}}


def test_required_set_spans_live_siblings_and_any_phase() -> None:
    own = [{"name": "n1", "phase": "Draining", "zone": "az1"}]
    assert required_names(own, False, []) == {"tenant_filter_tests", "az1"}
    assert required_names(own, True, []) == set()
    assert required_names(own, True, [sibling([{"name": "x", "phase": "Conflict", "zone": "az9"}])]) == {
        "tenant_filter_tests",
        "az9",
    }
    assert required_names([], True, [sibling([{"name": "x", "zone": "az9"}], deleting=True)]) == set()
