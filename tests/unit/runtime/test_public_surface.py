"""The runtime's public surface is small and deliberate; the runtime knows nothing of Nova."""

from __future__ import annotations

import ast
import pathlib

import nova_operator.runtime as runtime


def test_runtime_exports_exactly_the_documented_names() -> None:
    assert sorted(runtime.__all__) == [
        "Cache",
        "Controller",
        "Informer",
        "Predicate",
        "Reconciler",
        "Request",
        "Result",
        "ShutDown",
        "TerminalError",
        "WorkQueue",
    ]
    for name in runtime.__all__:
        assert getattr(runtime, name) is not None


def test_runtime_imports_neither_kubernetes_asyncio_nor_nova_modules() -> None:
    forbidden = (
        "kubernetes_asyncio",
        "nova_operator.models",
        "nova_operator.reconcilers",
        "nova_operator.renderers",
    )
    for path in pathlib.Path(runtime.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert not name.startswith(forbidden), f"{path.name} imports {name}"
