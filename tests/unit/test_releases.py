from __future__ import annotations

import pytest

from nova_operator.decisions import releases as r


@pytest.mark.parametrize(
    ("value", "expected"),
    [("2025.2", r.Release(2025, 2)), ("2026.1-p1", r.Release(2026, 1)), ("2010.1", r.Release(2010, 1))],
)
def test_parse(value: str, expected: r.Release) -> None:
    assert r.parse(value) == expected


@pytest.mark.parametrize("value", ["2025.9", "2025.3", "25.1", "2009.2", "2025", "", "latest", "2025.1-"])
def test_parse_refuses(value: str) -> None:
    with pytest.raises(r.ReleaseParseError, match=r"YYYY\.N"):
        r.parse(value)


@pytest.mark.parametrize(
    ("installed", "target", "outcome"),
    [
        ("", "2026.1", r.Transition.STEADY),  # fresh install
        ("2026.1", "2026.1", r.Transition.STEADY),
        ("2026.1", "2026.1-p2", r.Transition.STEADY),  # patch only
        ("2025.1", "2025.2", r.Transition.UPGRADE),
        ("2025.2", "2026.1", r.Transition.UPGRADE),
        ("2026.1", "2026.2", r.Transition.UPGRADE),
        ("2024.2", "2026.1", r.Transition.SKIP_LEVEL),
        ("2025.2", "2026.2", r.Transition.SKIP_LEVEL),
        ("2026.1", "2025.2", r.Transition.DOWNGRADE),
        ("2026.2", "2026.1", r.Transition.DOWNGRADE),
        ("garbage", "2026.1", r.Transition.UNPARSEABLE),
        ("2026.1", "2026.x", r.Transition.UNPARSEABLE),
    ],
)
def test_classify(installed: str, target: str, outcome: r.Transition) -> None:
    assert r.classify(installed, target) is outcome


@pytest.mark.parametrize(
    ("image", "tag"),
    [
        ("ghcr.io/c5c3/nova:2026.1", "2026.1"),
        ("registry:5000/c5c3/nova:2026.1-p1", "2026.1-p1"),
        ("registry:5000/c5c3/nova", None),
        ("ghcr.io/c5c3/nova@sha256:" + "a" * 64, None),
    ],
)
def test_image_tag(image: str, tag: str | None) -> None:
    assert r.image_tag(image) == tag


@pytest.mark.parametrize(
    ("tag", "release", "mismatch"),
    [
        ("2026.1", "2026.1", False),
        ("2026.1-p1", "2026.1", False),
        ("2025.2", "2026.1", True),
        ("latest", "2026.1", False),
        (None, "2026.1", False),
    ],
)
def test_lockstep(tag: str | None, release: str, mismatch: bool) -> None:
    assert r.lockstep_mismatch(image_tag_value=tag, release=release) is mismatch
