"""The real nodes' parallel work (an image imported into each): every node at once, and every node's
error in the one exception."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest
from simcluster.realtier.real_compute import on_every_node


def _nodes(*names: str) -> Any:
    return SimpleNamespace(nodes=[SimpleNamespace(name=n) for n in names])


def test_the_nodes_work_at_once_and_every_error_is_reported() -> None:
    together = threading.Barrier(3, timeout=10)  # broken unless all three wait at the same time

    def one(node: Any) -> list[str]:
        together.wait()
        if node.name == "b":
            return []
        if node.name == "c":
            raise OSError("ctr not found")
        return [f"{node.name}: import failed"]

    with pytest.raises(RuntimeError) as caught:
        on_every_node(_nodes("a", "b", "c"), one)
    assert sorted(str(caught.value).split("; ")) == ["a: import failed", "c: OSError('ctr not found')"]


def test_no_error_no_exception() -> None:
    seen: list[str] = []
    on_every_node(_nodes("x", "y"), lambda node: seen.append(node.name) or [])
    assert sorted(seen) == ["x", "y"]
