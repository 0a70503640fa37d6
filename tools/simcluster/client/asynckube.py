"""A small asyncio JSON client for the stand-ins (aiohttp, admin token).

The stand-ins only list, watch, create and merge-patch a handful of kinds; a thin client keeps
them independent of the operator's client stack and of generated-client quirks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import pathlib
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

JSON = dict[str, Any]


class ApiError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class AsyncKube:
    def __init__(self, server: str, token: str, ca_file: pathlib.Path) -> None:
        self.server = server
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self._ssl = ssl.create_default_context(cafile=str(ca_file))
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> AsyncKube:
        self._session = aiohttp.ClientSession(headers=self._headers)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "use AsyncKube as an async context manager"
        return self._session

    async def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> JSON:
        headers = {"Content-Type": content_type} if body is not None else {}
        data = json.dumps(body) if body is not None else None
        async with self.session.request(
            method, self.server + path, data=data, headers=headers, ssl=self._ssl
        ) as resp:
            text = await resp.text()
            if resp.status >= 400:
                try:
                    message = json.loads(text).get("message", text)
                except ValueError:
                    message = text
                raise ApiError(resp.status, message)
            result: JSON = json.loads(text) if text else {}
            return result

    async def get(self, path: str) -> JSON | None:
        try:
            return await self.request("GET", path)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    async def list(self, path: str) -> list[JSON]:
        items: list[JSON] = (await self.request("GET", path)).get("items", [])
        return items

    async def create(self, path: str, body: JSON) -> JSON:
        return await self.request("POST", path, body)

    async def merge_patch(self, path: str, body: JSON) -> JSON:
        return await self.request("PATCH", path, body, "application/merge-patch+json")

    async def watch(self, path: str, timeout_seconds: int = 60) -> AsyncIterator[JSON]:
        """Watch events of a collection (from "now"); ends when the server closes the stream."""
        sep = "&" if "?" in path else "?"
        url = f"{self.server}{path}{sep}watch=1&allowWatchBookmarks=false&timeoutSeconds={timeout_seconds}"
        timeout = aiohttp.ClientTimeout(total=None, sock_read=timeout_seconds + 10)
        async with self.session.get(url, ssl=self._ssl, timeout=timeout) as resp:
            if resp.status >= 400:
                raise ApiError(resp.status, await resp.text())
            async for line in resp.content:
                if line.strip():
                    yield json.loads(line)


async def sleep_or(event: asyncio.Event, seconds: float) -> None:
    """Sleep up to ``seconds``, or less if ``event`` is set. (``asyncio.timeout``, not ``wait_for``:
    on Python 3.11 ``wait_for`` loses a cancel that comes in the turn the event is set.)"""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()
