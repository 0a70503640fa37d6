"""Step modules are independent of each other: they talk through ``context`` and ``common`` only."""

from __future__ import annotations

import ast
import pathlib

import nova_operator.reconcilers as package

ROOT = pathlib.Path(package.__file__).parent
SHARED = {"nova_operator.reconcilers.common", "nova_operator.reconcilers.context"}
# The pass (nova.py) and the list (nova_steps.py) assemble the steps; upgrade.py is the upgrade flow's
# glue, owned with that flow.
ASSEMBLERS = {"__init__.py", "nova.py", "nova_steps.py", "upgrade.py"}


def _imports(path: pathlib.Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "nova_operator.reconcilers":
                found |= {f"nova_operator.reconcilers.{a.name}" for a in node.names}
            else:
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return {m for m in found if m.startswith("nova_operator.reconcilers")}


def test_no_step_module_imports_another_step_module() -> None:
    offenders = {
        path.name: sorted(_imports(path) - SHARED)
        for path in sorted(ROOT.glob("*.py"))
        if path.name not in ASSEMBLERS
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_shared_modules_import_no_step() -> None:
    assert _imports(ROOT / "common.py") == set()
    assert _imports(ROOT / "context.py") == set()
