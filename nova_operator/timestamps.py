"""Kubernetes times (``metav1.Time``): written in UTC to the second with a ``Z``, read back tolerant.

One place for both directions: conditions, events, Job and Pod timestamps and exec-credential
expiries all go through it.
"""

from __future__ import annotations

from datetime import UTC, datetime


def rfc3339(now: datetime) -> str:
    """``metav1.Time``: UTC, second precision, ``Z`` suffix."""
    return now.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(value: object) -> datetime | None:
    """An RFC 3339 time as an aware datetime; None when absent, not a string or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
