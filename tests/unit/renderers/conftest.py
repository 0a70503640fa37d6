"""Fixtures of the renderer tests: sample Novas, the inputs a pass hands the renderers, goldens.

Goldens live under ``golden/``; a changed byte fails the test with a diff.  To accept a
deliberate change, rerun with ``UPDATE_GOLDEN=1`` and review the diff in git.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from nova_operator.models.nova import Nova

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
GOLDEN = HERE / "golden"
SAMPLES = ("minimal", "full")


def load_nova(sample: str) -> Nova:
    return Nova.model_validate(yaml.safe_load((FIXTURES / f"{sample}.yaml").read_text()))


@pytest.fixture(params=SAMPLES)
def sample(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def nova(sample: str) -> Nova:
    return load_nova(sample)


Golden = Callable[[str, str], None]


@pytest.fixture
def golden() -> Golden:
    def check(relative: str, text: str) -> None:
        path = GOLDEN / relative
        if os.environ.get("UPDATE_GOLDEN"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        if not path.exists():
            pytest.fail(f"no golden {path.relative_to(HERE)}; run with UPDATE_GOLDEN=1 to create it")
        want = path.read_text(encoding="utf-8")
        if want != text:
            diff = "".join(
                difflib.unified_diff(
                    want.splitlines(keepends=True), text.splitlines(keepends=True), "golden", "rendered"
                )
            )
            pytest.fail(f"{relative} differs from its golden:\n{diff}")

    return check


@pytest.fixture
def load_sample() -> Callable[[str], Nova]:
    return load_nova
