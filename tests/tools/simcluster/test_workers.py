"""The stand-ins' workers: a key that keeps failing the same way logs its traceback once."""

from __future__ import annotations

import asyncio
import logging

import pytest
from simcluster.client.watchcache import KeyQueue, run_workers


async def test_a_repeated_failure_logs_one_traceback_then_one_line_per_retry(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue: KeyQueue[str] = KeyQueue()
    stop = asyncio.Event()
    outcomes = [OSError("broker stopped"), OSError("broker stopped"), ValueError("other"), None]
    calls: list[str] = []

    async def handle(key: str) -> None:
        calls.append(key)
        outcome = outcomes[len(calls) - 1]
        if outcome is None:
            stop.set()
            return
        raise outcome

    queue.add("rmq")
    with caplog.at_level(logging.INFO, logger="simcluster.standins"):
        await asyncio.wait_for(run_workers(queue, handle, 1, stop), 10)
    assert calls == ["rmq"] * 4  # retried until it passed
    records = [(r.levelno, r.exc_info is not None, r.getMessage()) for r in caplog.records]
    assert records == [
        (logging.ERROR, True, "stand-in rmq failed"),
        (logging.WARNING, False, "stand-in rmq still failing: OSError: broker stopped"),
        (logging.ERROR, True, "stand-in rmq failed"),  # another error: its traceback
    ]
