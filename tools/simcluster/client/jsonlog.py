"""The operator's output as JSON log records: what tests use to hold it to nova_operator/log.py's format."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

FIRST_KEYS = ["ts", "level", "logger", "msg"]


def records(text: str) -> list[dict[str, Any]]:
    """Each line of ``text`` as one JSON object starting ts (RFC 3339, UTC), level, logger, msg.

    Raises AssertionError naming the first line that is not: a plain-text line inside the stream,
    a record without the keys, a timestamp that is not UTC.
    """
    out = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            raise AssertionError(f"a plain-text line in the JSON log stream: {line!r}") from None
        if not isinstance(record, dict) or list(record)[:4] != FIRST_KEYS:
            raise AssertionError(f"not a record starting {', '.join(FIRST_KEYS)}: {line!r}")
        if datetime.fromisoformat(record["ts"]).utcoffset() != timedelta(0):
            raise AssertionError(f"ts not in UTC: {line!r}")
        out.append(record)
    return out
