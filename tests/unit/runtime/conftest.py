"""Helpers for runtime unit tests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

Until = Callable[[Callable[[], bool]], Awaitable[None]]


@pytest.fixture
def until() -> Until:
    """Let the loop run until ``condition()`` holds (bounded: fails after one second of wall time)."""

    async def wait(condition: Callable[[], bool]) -> None:
        async with asyncio.timeout(1):
            while not condition():  # noqa: ASYNC110 - polling plain state that has no event to await
                await asyncio.sleep(0)

    return wait
