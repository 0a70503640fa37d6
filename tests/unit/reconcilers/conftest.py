"""Fixtures: a tiny in-memory stand-in for the ``Kube`` seam and an event sink."""

from __future__ import annotations

import pytest

from tests.unit.reconcilers.fakes import FakeEvents, FakeKube


@pytest.fixture
def kube() -> FakeKube:
    return FakeKube()


@pytest.fixture
def events() -> FakeEvents:
    return FakeEvents()
