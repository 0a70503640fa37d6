"""Checks on a ``rabbit://`` transport URL before it is published (reconciler.md §4.3).

nova fills a cell mapping's ``{hostname}:{port}`` template from this URL with
``urllib.parse.urlparse``, which renders a missing port as ``None`` and drops IPv6
brackets. So the URL must name its port explicitly and must not use an IPv6 literal;
in a multi-host URL only the last host is what ``urlparse`` sees. Messages never carry
the URL itself: it holds a password.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass


@dataclass(frozen=True)
class TransportCheck:
    port: int | None
    problem: str | None

    @property
    def ok(self) -> bool:
        return self.problem is None


def check_transport_url(url: str) -> TransportCheck:
    """The broker port, or a problem description that names no credential."""
    try:
        parsed = urllib.parse.urlparse(url)
    except ValueError:
        return TransportCheck(None, "the transport URL does not parse")
    if parsed.scheme not in ("rabbit", "amqp"):
        return TransportCheck(None, "the transport URL must use the rabbit:// scheme")
    host_port = parsed.netloc.rpartition("@")[2]
    if host_port.startswith("["):
        return TransportCheck(
            None, "the transport URL uses an IPv6 literal host, which nova's cell templates cannot carry"
        )
    if not parsed.hostname:
        return TransportCheck(None, "the transport URL names no host")
    try:
        port = parsed.port
    except ValueError:
        return TransportCheck(None, "the transport URL carries an invalid port")
    if port is None:
        return TransportCheck(None, "the transport URL must name its port explicitly (for example :5672)")
    return TransportCheck(port, None)
