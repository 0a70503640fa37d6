"""Kubernetes times: written as metav1.Time, read back from every form the API server or a plugin sends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from nova_operator.timestamps import parse_rfc3339, rfc3339


def test_written_in_utc_to_the_second_with_z() -> None:
    local = datetime(2026, 12, 6, 21, 30, 15, 987654, tzinfo=timezone(timedelta(hours=2)))
    assert rfc3339(local) == "2026-12-06T19:30:15Z"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-12-06T19:30:15Z", datetime(2026, 12, 6, 19, 30, 15, tzinfo=UTC)),
        ("2026-12-06T19:30:15.123456Z", datetime(2026, 12, 6, 19, 30, 15, 123456, tzinfo=UTC)),
        ("2026-12-06T21:30:15+02:00", datetime(2026, 12, 6, 19, 30, 15, tzinfo=UTC)),
        ("2026-12-06T19:30:15", datetime(2026, 12, 6, 19, 30, 15, tzinfo=UTC)),
    ],
)
def test_read_back_as_an_aware_time(text: str, expected: datetime) -> None:
    parsed = parse_rfc3339(text)
    assert parsed == expected
    assert parsed is not None
    assert parsed.tzinfo is not None


@pytest.mark.parametrize("value", [None, "", "yesterday", 1733512215, "2026-13-01T00:00:00Z"])
def test_absent_or_unreadable_is_none(value: object) -> None:
    assert parse_rfc3339(value) is None


def test_round_trip() -> None:
    now = datetime(2026, 12, 6, 19, 30, 15, tzinfo=UTC)
    assert parse_rfc3339(rfc3339(now)) == now
