"""The path-segment rule every name and namespace must pass before it becomes part of a URL.

A name is put into the request path as one segment. A value that is empty, ``.`` or ``..``,
or that contains ``/`` or ``%``, would let the HTTP stack resolve the path somewhere else
(``../../victim-ns/secrets/prod``) or decode into another one. client-go refuses such names
(``IsValidPathSegmentName``); ``ResourceRef.path`` calls :func:`check_segment` for every
namespace, name and subresource, so no field the models forget to constrain can take a
request out of the namespace it was meant for. The message quotes the value with ``repr``
(names are never credentials).

A value that passes is then percent-escaped (:func:`path_segment`): every character outside
the URL's unreserved set (``A-Z a-z 0-9 - . _ ~``) is sent as ``%XX`` of its UTF-8 bytes, so
``?`` cannot start a query (``a?labelSelector=x``), ``#`` cannot start a fragment, and a tab,
a space or a non-ASCII letter cannot be dropped or rewritten by the HTTP stack: the API server
decodes exactly the name the operator meant, as one segment.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import quote

__all__ = ["InvalidPathSegment", "check_segment", "path_segment"]

_DOT_SEGMENTS: Final = frozenset({".", ".."})
_FORBIDDEN: Final = ("/", "%")


class InvalidPathSegment(ValueError):
    """A name or namespace that cannot be one segment of a request path."""


def check_segment(value: str, what: str = "name") -> str:
    """``value`` unchanged when it is a valid path segment; :class:`InvalidPathSegment` otherwise."""
    if not isinstance(value, str) or not value:
        raise InvalidPathSegment(f"{what} must be a non-empty string, not {value!r}")
    if value in _DOT_SEGMENTS:
        raise InvalidPathSegment(f"{what} may not be {value!r}")
    for char in _FORBIDDEN:
        if char in value:
            raise InvalidPathSegment(f"{what} may not contain {char!r}: {value!r}")
    return value


def path_segment(value: str, what: str = "name") -> str:
    """``value`` checked (:func:`check_segment`) and percent-escaped into exactly one path segment."""
    return quote(check_segment(value, what), safe="")
