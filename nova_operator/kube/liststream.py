"""A List response decoded item by item as its bytes arrive: ``decode_list``.

``json.loads`` of a List page holds the whole page twice (its text and its objects): 200 Secrets
of 1 MiB are some 700 MiB at once, even when the reader keeps only their names. Here the top-level
members of the List are decoded as they come, and each element of ``items`` is handed to ``each``
as soon as it is complete; what ``each`` returns (a narrowed object, say) is what the List keeps.
So at most one item is held whole (its text and its objects), plus what ``each`` keeps.

Each value is decoded with ``json.JSONDecoder.raw_decode`` from a text buffer. A value that is
not complete yet fails to decode; the buffer then grows by at least a quarter of what was tried
before the next attempt, so a large item costs a bounded number of attempts (decoding time stays
linear in its size, about five times one decode) and the buffer holds at most a quarter more than
the item and one chunk. A value that still fails once the body has ended is invalid JSON: ``ValueError``.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from nova_operator.kube.types import Object

_WHITESPACE = " \t\n\r"
_DECODER = json.JSONDecoder()


class _Reader:
    """A text buffer over an async iterator of byte chunks (UTF-8).

    New chunks wait in ``_pending`` and are joined to the buffer only when a decode is tried (or
    the next character is needed): appending each chunk to one string would copy it every time.
    """

    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._pending: list[str] = []
        self._pending_len = 0
        self.buf = ""
        self.pos = 0
        self.ended = False

    @property
    def available(self) -> int:
        return len(self.buf) - self.pos + self._pending_len

    async def more(self) -> bool:
        """Read the next chunk (kept pending); False at the end of the body."""
        if self.ended:
            return False
        try:
            chunk = await anext(self._chunks)
        except StopAsyncIteration:
            self.ended = True
            text = self._utf8.decode(b"", final=True)
        else:
            text = self._utf8.decode(chunk)
        if text:
            self._pending.append(text)
            self._pending_len += len(text)
        return not self.ended

    def _join(self) -> None:
        """Move the pending text into the buffer, dropping what has been consumed."""
        if self._pending:
            self.buf = self.buf[self.pos :] + "".join(self._pending)
            self.pos = 0
            self._pending, self._pending_len = [], 0

    async def peek(self) -> str:
        """The next non-whitespace character (not consumed); "" at the end of the body."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _WHITESPACE:
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            self._join()
            if self.pos < len(self.buf):
                continue
            if not await self.more() and not self._pending:
                return ""

    async def expect(self, chars: str) -> str:
        """Consume the next non-whitespace character, which must be one of ``chars``."""
        found = await self.peek()
        if not found or found not in chars:
            raise ValueError(f"List response: expected one of {chars!r}, found {found or 'the end'!r}")
        self.pos += 1
        return found

    async def value(self) -> Any:
        """Decode the next JSON value (see the module docstring for how an incomplete one is waited for)."""
        await self.peek()
        tried = 0
        while True:
            available = self.available
            if available >= tried:
                self._join()
                try:
                    value, end = _DECODER.raw_decode(self.buf, self.pos)
                except json.JSONDecodeError:
                    if self.ended:
                        raise
                    tried = available + max(available // 4, 1)
                else:
                    # a number may go on in the next chunk: accept a value once what follows it is seen
                    if end < len(self.buf) or self.ended:
                        self.pos = end
                        return value
                    tried = available + 1
            if not await self.more():
                tried = 0  # the body ended: one last attempt on what there is


async def decode_list(chunks: AsyncIterator[bytes], each: Callable[[Object], Object]) -> Object:
    """The List object read from ``chunks``, its ``items`` being what ``each`` returned for each item."""
    reader = _Reader(chunks)
    doc: Object = {}
    await reader.expect("{")
    if await reader.peek() == "}":
        reader.pos += 1
        return doc
    while True:
        key = await reader.value()
        if not isinstance(key, str):
            raise ValueError("List response: a member name is not a string")
        await reader.expect(":")
        if key == "items" and await reader.peek() == "[":
            doc[key] = await _items(reader, each)
        else:
            doc[key] = await reader.value()
        if await reader.expect(",}") == "}":
            return doc


async def _items(reader: _Reader, each: Callable[[Object], Object]) -> list[Object]:
    items: list[Object] = []
    await reader.expect("[")
    if await reader.peek() == "]":
        reader.pos += 1
        return items
    while True:
        item = await reader.value()
        items.append(each(item) if isinstance(item, dict) else item)
        del item
        if await reader.expect(",]") == "]":
            return items
