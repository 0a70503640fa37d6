"""How long a nova service may take to stop, by its release: what a pod's grace period must cover.

Pure: the release's option catalog and the CR's extraConfig only. From 2026.1 a stopping
nova-scheduler, nova-conductor or nova-compute waits ``[DEFAULT] manager_shutdown_timeout`` for
its tasks; oslo.service ends the process after ``[DEFAULT] graceful_shutdown_timeout`` whatever is
left, and nova cuts a longer manager wait to that bound minus 10 s. So the bound is the latter.
"""

from __future__ import annotations

from collections.abc import Mapping

from nova_operator import catalog
from nova_operator.catalog import oslo_name

__all__ = ["graceful_shutdown_timeout"]

_GRACEFUL = ("DEFAULT", "graceful_shutdown_timeout")


def _release_bound(release: str) -> int:
    """The release's default [DEFAULT] graceful_shutdown_timeout, from its option catalog.

    A release without a shipped catalog gets the longest bound any shipped catalog has: a grace
    period too long only waits for a process that has already ended, one too short kills it
    mid-stop.
    """
    base = release.partition("-")[0]  # 2026.1-p1 is 2026.1
    shipped = catalog.supported_releases()
    bounds = [
        info.default
        for r in ([base] if base in shipped else shipped)
        if (info := catalog.load_catalog(r).option(*_GRACEFUL)) is not None and info.default is not None
    ]
    if not bounds:
        raise LookupError(
            f"no option catalog gives [DEFAULT] graceful_shutdown_timeout a default ({release!r})"
        )
    return max(bounds)


def graceful_shutdown_timeout(release: str, extra_config: Mapping[str, Mapping[str, str]] | None) -> int:
    """nova's own bound on a service's stop, in seconds: when it runs out, oslo.service ends the process.

    ``[DEFAULT] graceful_shutdown_timeout`` of the pool's extraConfig when it is a positive integer
    (0, "no bound", and a value nova would refuse fall back), else the release's default. A
    ``manager_shutdown_timeout`` needs no reading: nova caps the manager's wait below this bound.
    """
    for section, options in (extra_config or {}).items():
        for key, value in options.items():
            if oslo_name(section, key) == _GRACEFUL:
                try:
                    own = int(value.strip())
                except ValueError:
                    break
                if own > 0:
                    return own
    return _release_bound(release)
