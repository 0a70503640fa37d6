"""The process's open-file limit: raised from the soft to the hard limit at start-up.

Every watch, API connection, probe and metrics connection holds a descriptor; the soft limit a
container starts with is often 1024 while the hard limit is far higher. Go programs (the
kube-apiserver, controller-runtime operators) raise it the same way at start.
"""

from __future__ import annotations

import resource


def raise_open_files_limit() -> tuple[int, int]:
    """Set the soft ``RLIMIT_NOFILE`` to the hard limit; returns (before, after) soft limits.

    An unlimited hard limit is left as it is (a soft limit of "unlimited" is refused on Linux);
    a refusal leaves the soft limit unchanged.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft == hard:
        return soft, soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        return soft, soft
    return soft, resource.getrlimit(resource.RLIMIT_NOFILE)[0]
