"""Issue 40: docs/architecture.svg names every object the renderers produce for a Nova, and a pool's
DaemonSet, with its kind (so the picture cannot drift from the code)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nova_operator import naming
from nova_operator.install import architecture, docs
from nova_operator.models.nova import Nova
from nova_operator.renderers import compute_pool

REPO = Path(__file__).resolve().parents[3]
SVG = "{http://www.w3.org/2000/svg}"


def _boxes(svg: str) -> set[tuple[str, str]]:
    """(kind, name) of every object box: its data-kind and its two text lines."""
    root = ET.fromstring(svg.split("\n", 1)[1])  # after the generated-file comment
    out = set()
    for group in root.iter(f"{SVG}g"):
        if group.get("class") != "object":
            continue
        label, name = (t.text or "" for t in group.iter(f"{SVG}text"))
        kind = group.get("data-kind", "")
        assert label.split(" · ")[0] == kind
        out.add((kind, name))
    return out


def _placeholder(nova: Nova, kind: str, name: str) -> str:
    """A rendered child's name as the picture writes it: ``{nova}`` for the Nova's name."""
    own = nova.metadata.name or ""
    assert name.startswith(own)
    rest = name[len(own) :]
    if kind == "ConfigMap":
        rest = re.sub(r"^-config-[0-9a-f]+$", naming.CONFIG_HASH_PLACEHOLDER, rest)
    if kind in ("Database", "Grant") and rest.endswith("-cell0"):
        rest = naming.CELL0_PLACEHOLDER
    return architecture.NOVA + rest


def test_the_picture_names_every_object_the_renderers_produce(
    nova: Nova, render_all: Callable[[Nova], dict[str, Any]]
) -> None:
    boxes = _boxes(architecture.render())
    rendered = render_all(nova)
    assert len(rendered) > 20
    for obj in rendered.values():
        kind, name = obj["kind"], obj["metadata"]["name"]
        assert (kind, _placeholder(nova, kind, name)) in boxes, (kind, name)


def test_the_picture_has_the_pool_and_every_listed_child() -> None:
    boxes = _boxes(architecture.render())
    assert ("DaemonSet", compute_pool.daemonset_name(architecture.POOL)) in boxes
    assert ("NovaCompute", architecture.POOL) in boxes
    assert ("Nova", architecture.NOVA) in boxes
    for kind, suffixes in naming.CHILD_SUFFIXES.items():
        for suffix in suffixes:
            assert (kind, architecture.NOVA + suffix) in boxes
    # the five roles are labelled as such
    text = architecture.render()
    for component in ("api", "metadata", "scheduler", "conductor", "novncproxy"):
        assert f"Deployment · {component}</text>" in text


def test_a_kind_without_a_panel_fails_the_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(naming, "CHILD_SUFFIXES", {**naming.CHILD_SUFFIXES, "ServiceAccount": ("-sa",)})
    with pytest.raises(KeyError, match="ServiceAccount"):
        architecture.render()


def test_the_committed_picture_is_current() -> None:
    assert (REPO / "docs" / "architecture.svg").read_text() == architecture.render()
    assert "architecture.svg" in docs.pages()
