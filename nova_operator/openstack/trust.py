"""Does an HTTPS endpoint's certificate verify? One TLS handshake, nothing sent over it.

The Nova's Secrets step asks it of ``spec.keystoneEndpoint`` (issue 38): a Keystone whose
certificate the pods cannot verify leaves every service unable to authenticate (nova-scheduler does
not even start), and the step's condition can then say so in words instead of a role that never
becomes Ready. Only a definite verification failure is ``UNTRUSTED``; a name that does not resolve,
a refused connection or a timeout is ``UNKNOWN`` (Keystone may be starting): the caller goes on.

``TrustMemory`` keeps verdicts per (host, port, bundle digest): a ``TRUSTED`` one for
``TRUSTED_FOR`` seconds and an ``UNKNOWN`` one for ``UNKNOWN_FOR`` (no handshake on every pass), an
``UNTRUSTED`` one not at all (the next pass, after a fix, looks again).
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urlsplit

from nova_operator.openstack.http import trusted

HANDSHAKE_DEADLINE: Final = 5.0
TRUSTED_FOR: Final = 600.0
UNKNOWN_FOR: Final = 60.0
MAX_REMEMBERED: Final = 1024


class Verdict(enum.Enum):
    TRUSTED = "trusted"
    UNTRUSTED = "untrusted"
    UNKNOWN = "unknown"


def _endpoint(url: str) -> tuple[str, int] | None:
    """``(host, port)`` of an https URL; None for any other scheme or a URL without a host."""
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        return None
    try:
        return parts.hostname, parts.port or 443
    except ValueError:
        return None


async def handshake(host: str, port: int, context: ssl.SSLContext, deadline: float) -> Verdict:
    """One TLS handshake with ``host:port`` verified by ``context`` (host name checked)."""
    try:
        async with asyncio.timeout(deadline):
            _, writer = await asyncio.open_connection(host, port, ssl=context, server_hostname=host)
    except ssl.SSLCertVerificationError:
        return Verdict.UNTRUSTED
    except (OSError, TimeoutError, ssl.SSLError, ValueError):
        return Verdict.UNKNOWN
    writer.close()
    try:
        async with asyncio.timeout(deadline):
            await writer.wait_closed()
    except (OSError, TimeoutError, ssl.SSLError):
        pass
    return Verdict.TRUSTED


@dataclass
class TrustMemory:
    """Verdicts by (host, port, bundle digest) with the monotonic time they expire; shared across passes."""

    monotonic: Callable[[], float] = time.monotonic
    deadline: float = HANDSHAKE_DEADLINE
    verdicts: dict[tuple[str, int, str], tuple[Verdict, float]] = field(default_factory=dict)

    async def check(self, url: str, bundle: str = "") -> Verdict:
        """The verdict for ``url``'s certificate under ``bundle`` (empty: the system's CAs); an http
        URL is ``TRUSTED`` (there is no certificate to verify)."""
        endpoint = _endpoint(url)
        if endpoint is None:
            return Verdict.TRUSTED
        host, port = endpoint
        key = (host, port, hashlib.sha256(bundle.encode()).hexdigest())
        now = self.monotonic()
        remembered = self.verdicts.get(key)
        if remembered is not None and remembered[1] > now:
            return remembered[0]
        context = trusted(bundle) if bundle else ssl.create_default_context()
        verdict = await handshake(host, port, context, self.deadline)
        if verdict is Verdict.UNTRUSTED:
            self.verdicts.pop(key, None)
        else:
            if len(self.verdicts) >= MAX_REMEMBERED:
                self.verdicts.clear()
            ttl = TRUSTED_FOR if verdict is Verdict.TRUSTED else UNKNOWN_FOR
            self.verdicts[key] = (verdict, self.monotonic() + ttl)
        return verdict
