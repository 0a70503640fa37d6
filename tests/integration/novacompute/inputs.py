"""Shared helpers of the tests beside this module (not a test module)."""

from __future__ import annotations

from .conftest import Env


async def ready(env: Env, pool: str = "pool") -> bool:
    cond = await env.condition("Ready", pool)
    return cond is not None and cond["status"] == "True"
