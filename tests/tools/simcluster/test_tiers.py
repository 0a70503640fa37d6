"""The simulated cluster's tiers import downwards only (``tools/simcluster/README.md``): the entry
points, the real tier, the platform, the stand-ins, the clients; the fault injectors stand apart.
Measured from the imports as ``tools/house.py`` measures the rooms."""

from __future__ import annotations

import grimp

# Top to bottom; a tier may import only tiers below it.
TIERS = ["__main__", "run", "realtier", "platform", "standins", "client"]
APART = {"hazards"}  # imports no other tier, and no tier imports it


def _arrows() -> set[tuple[str, str]]:
    graph = grimp.build_graph("simcluster", cache_dir=None)
    out = set()
    for module in graph.modules:
        source = module.split(".")[1] if "." in module else None
        for imported in graph.find_modules_directly_imported_by(module):
            target = imported.split(".")[1] if imported.startswith("simcluster.") else None
            if source and target and source != target:
                out.add((source, target))
    return out


def test_every_room_is_a_known_tier() -> None:
    graph = grimp.build_graph("simcluster", cache_dir=None)
    rooms = {m.split(".")[1] for m in graph.modules if "." in m}
    assert rooms == set(TIERS) | APART


def test_tiers_import_downwards_only() -> None:
    arrows = _arrows()
    assert arrows, "no arrows measured: the graph is empty"
    up = sorted((a, b) for a, b in arrows if a in TIERS and b in TIERS and TIERS.index(b) <= TIERS.index(a))
    assert up == []


def test_the_fault_injectors_stand_apart() -> None:
    assert sorted((a, b) for a, b in _arrows() if a in APART or b in APART) == []
