"""Issue 13 leak test: distinctive credentials never leave their Secrets, over install, upgrade, delete.

The sample Nova runs on the simulated cluster with a distinctive value in every credential it
is given (the service-user password is the fake Keystone's, also searched for) and the
RabbitmqCluster's generated default-user password. After the install, after an upgrade to the
next release and after the delete, no such value (raw, percent-encoded, base64, or as a plain
SHA-256, which anyone could test guesses against) may appear in any ConfigMap, Event,
condition, annotation, the operator's log or a metric label. The Nova is the upgrade scenario's
(``release``, test_scenarios.py), which records what every place showed at the end of each stage;
conftest.py runs this module after test_scenarios.py so the two share one install and upgrade.
"""

from __future__ import annotations

import base64
import hashlib
from urllib.parse import quote

import pytest

from tests.e2e.harness import DISTINCT, Release, release

pytestmark = pytest.mark.e2e
__all__ = ["release"]  # the fixture, shared with the upgrade scenario of test_scenarios.py


def _forms(value: str) -> set[str]:
    raw = value.encode()
    return {value, quote(value, safe=""), base64.b64encode(raw).decode(), hashlib.sha256(raw).hexdigest()}


def _scan(texts: dict[str, str], values: list[str], stage: str) -> list[str]:
    found = []
    for index, value in enumerate(values):  # a finding names the credential by its index only
        for form in _forms(value):
            found += [
                f"{stage}: {where} carries credential #{index}"
                for where, text in texts.items()
                if form in text
            ]
    return found


def test_no_credential_leaks_over_install_upgrade_and_delete(release: Release) -> None:
    """``release`` is the upgrade scenario's Nova (test_scenarios.py): installed with ``DISTINCT``
    credentials, then upgraded to the next release; what every place showed was recorded at the end of
    each stage. The deletion is this test's."""
    values = release.credentials
    assert len(values) > len(DISTINCT) + 1, "no RabbitmqCluster default-user password found"
    release.upgrade()
    release.delete()
    leaks: list[str] = []
    for stage in ("install", "upgrade", "delete"):
        leaks += _scan(release.texts[stage], values, stage)
    assert leaks == [], "\n".join(sorted(set(leaks)))
