"""The house's figures, measured from the imports: ``python tools/house.py [ROOT]``.

Rooms are the package's root modules and its first-level folders (``nova_operator.reconcilers``
with everything below it is one room). An arrow is a room importing another (type-only imports
count: they are a dependency all the same). An arrow runs up when it points to a room higher in the
import-linter ``layers`` contract of ``pyproject.toml`` than the room it leaves; a circle is a set
of rooms that reach each other (a strongly connected component of two or more). Files over 600
lines are counted in the package and ``tools/``; the tables and schemas the house exempts (the
reasons table, the CRD models) are listed apart.

The tools are measured the same way, each package of ``tools/`` (simcluster, bench, realnode, ...)
apart: its rooms are its first-level modules and folders, with the number of source files in each;
arrows and circles are counted between the rooms of one package.

ROOT defaults to this checkout; pass another checkout (``git worktree add /tmp/old REV``) to
measure an older tree the same way.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from collections import defaultdict
from pathlib import Path

import grimp

PACKAGE = "nova_operator"
LONG = 600
EXEMPT = ("nova_operator/install/reasons.py", "nova_operator/reasons.py", "nova_operator/models/")


def room(module: str, package: str = PACKAGE) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == package else None


def arrows(graph: grimp.ImportGraph, package: str = PACKAGE) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for module in graph.modules:
        source = room(module, package)
        if source is None:
            continue
        for imported in graph.find_modules_directly_imported_by(module):
            target = room(imported, package)
            if target is not None and target != source:
                out[source].add(target)
    return out


def layer_ranks(root: Path) -> dict[str, int]:
    config = tomllib.loads((root / "pyproject.toml").read_text())
    ranks: dict[str, int] = {}
    for contract in config.get("tool", {}).get("importlinter", {}).get("contracts", []):
        if contract.get("type") != "layers":
            continue
        for rank, layer in enumerate(contract["layers"]):
            for name in layer.replace(":", "|").split("|"):
                ranks[name.strip().removeprefix(PACKAGE + ".")] = rank
    return ranks


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of two or more rooms."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(set(edges) | {t for ts in edges.values() for t in ts}):
        if node not in index:
            visit(node)
    return found


def long_files(root: Path) -> tuple[list[str], list[str]]:
    counted: list[str] = []
    exempt: list[str] = []
    for folder in (PACKAGE, "tools"):
        for path in sorted((root / folder).rglob("*.py")):
            lines = len(path.read_text().splitlines())
            if lines > LONG:
                name = f"{path.relative_to(root)} ({lines})"
                (exempt if str(path.relative_to(root)).startswith(EXEMPT) else counted).append(name)
    return counted, exempt


def figures(root: Path) -> dict[str, object]:
    sys.path.insert(0, str(root))
    graph = grimp.build_graph(PACKAGE, cache_dir=None)
    edges = arrows(graph)
    ranks = layer_ranks(root)
    rooms = sorted({r for m in graph.modules if (r := room(m)) is not None})
    package = root / PACKAGE
    root_modules = sorted(p.stem for p in package.glob("*.py") if p.stem not in ("__init__", "__main__"))
    up = sorted(
        f"{a} -> {b}"
        for a, bs in edges.items()
        for b in bs
        if a in ranks and b in ranks and ranks[b] < ranks[a]
    )
    counted, exempt = long_files(root)
    return {
        "rooms": len(rooms),
        "arrows": sum(len(bs) for bs in edges.values()),
        "arrows_up": up,
        "circles": circles(edges),
        "unplaced_rooms": [r for r in rooms if r not in ranks and r != "__init__"],
        "root_modules": len(root_modules),
        "files_over_600": counted,
        "tables_over_600": exempt,
    }


def tool_packages(root: Path) -> list[str]:
    return sorted(p.parent.name for p in (root / "tools").glob("*/__init__.py"))


def tool_figures(root: Path) -> dict[str, object]:
    """Per package of ``tools/``: rooms (with their source files), arrows and circles between them."""
    sys.path.insert(0, str(root / "tools"))
    packages = tool_packages(root)
    graph = grimp.build_graph(*packages, cache_dir=None)
    out: dict[str, object] = {}
    for package in packages:
        edges = arrows(graph, package)
        files: dict[str, int] = defaultdict(int)
        for path in (root / "tools" / package).rglob("*.py"):
            parts = path.relative_to(root / "tools" / package).parts
            files[parts[0].removesuffix(".py")] += 1
        out[package] = {
            "rooms": {name: files[name] for name in sorted(files) if name not in ("__init__", "__main__")},
            "arrows": sum(len(bs) for bs in edges.values()),
            "circles": circles(edges),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    found = figures(args.root.resolve())
    found["tools"] = tool_figures(args.root.resolve())
    if args.json:
        print(json.dumps(found, indent=2))
        return
    for key, value in found.items():
        if isinstance(value, list):
            print(f"{key}: {len(value)}" + "".join(f"\n  {item}" for item in value))
        elif isinstance(value, dict):
            print(f"{key}:")
            for package, its in value.items():
                rooms, circled = its["rooms"], its["circles"]
                print(f"  {package}: {len(rooms)} rooms, {its['arrows']} arrows, {len(circled)} circles")
                print("    " + ", ".join(f"{name} ({count})" for name, count in rooms.items()))
                for circle in circled:
                    print(f"    circle: {' -> '.join(circle)}")
        else:
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
