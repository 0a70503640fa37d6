"""API errors as a small exception tree, so callers never see kubernetes_asyncio types.

KubeError                    any failed API call (``status`` is the HTTP code, 0 if none)
├── Unreachable              no HTTP answer: connection refused, TLS, timeout
├── NotFound                 404
├── Conflict                 409 (resourceVersion precondition, AlreadyExists, SSA conflict)
├── Gone                     410 (expired resourceVersion on list/watch)
├── Invalid                  422
├── Forbidden                403
└── TooManyRequests          429
"""

from __future__ import annotations

import json
from typing import Any


class KubeError(Exception):
    """A failed API call."""

    status: int = 0
    retry_after: float | None = None  # seconds, from a ``Retry-After`` header (429, 5xx)

    def __init__(self, message: str, *, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        if status is not None:
            self.status = status
        self.reason = reason
        self.message = message


class Unreachable(KubeError):
    """The API server did not answer (connection refused, TLS failure, timeout)."""


class NotFound(KubeError):
    status = 404


class Conflict(KubeError):
    status = 409


class Gone(KubeError):
    status = 410


class Invalid(KubeError):
    status = 422


class Forbidden(KubeError):
    status = 403


class TooManyRequests(KubeError):
    status = 429


_BY_STATUS: dict[int, type[KubeError]] = {
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    403: Forbidden,
    429: TooManyRequests,
}


def from_status(status: int, body: bytes | str | dict[str, Any] | None) -> KubeError:
    """The exception for an HTTP status and a (usually metav1.Status) body."""
    reason, message = "", ""
    doc: Any = body
    if isinstance(body, bytes | str):
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
            message = body.decode(errors="replace") if isinstance(body, bytes) else body
    if isinstance(doc, dict):
        reason = str(doc.get("reason", ""))
        message = str(doc.get("message", ""))
    cls = _BY_STATUS.get(status, KubeError)
    return cls(message or f"HTTP {status}", status=status, reason=reason)
