"""Named requeue intervals of both controllers, each with the reason it exists (reconciler.md §9, §15.3).

Errors never use these: they go through the work queue's failure backoff.
"""

from __future__ import annotations

from typing import Final

NEXT_PASS: Final = 1.0
"""After adding a finalizer and after the RollingUpdate -> Contracting flip: the next pass sees the write."""

DEPLOYMENT_POLL: Final = 10.0
"""API Deployment not available; each workload's rollout wait in RollingUpdate; HTTPRoute not accepted yet."""

HEALTH_CHECK_RETRY: Final = 10.0
"""A failed API probe (a passing probe is reused for HEALTH_CHECK_REUSE)."""

HEALTH_CHECK_REUSE: Final = 30.0
"""How long a successful API probe of the same URL and CR UID stays valid."""

HEALTH_CHECK_TIMEOUT: Final = 10.0
"""The timeout of one API probe."""

SECRET_POLL: Final = 15.0
"""Credential and store gates, the DSN and transport-URL steps: Secrets have no readiness to watch for."""

DATABASE_WAIT: Final = 30.0
"""MariaDB gates, Database/User/Grant waits, WaitingForConfig, ImageReleaseMismatch, db-sync running,
the finalizer's database cleanup: the MariaDB child objects are polled, not watched."""

CHILD_OWNED_POLL: Final = 60.0
"""A child's name held by another owner (``ChildOwnedByAnother``): the holder's changes do not wake this CR
(they are mapped to the holder), so the step looks again at this interval."""

UPGRADE_WAIT: Final = 30.0
"""Expand, migrate and contract Jobs in progress."""

COMPUTE_NODE_RELEASING: Final = 10.0
"""A Releasing node, a node dropped this pass, an unmapped host during discovery, a concurrent aggregate."""

COMPUTE_NODE_DRAINING: Final = 30.0
"""Draining or Pending nodes, and every failed Keystone/Nova call (a requeue, so backoff never stretches
the other nodes' polls)."""

COMPUTE_SETTLED: Final = 60.0
"""Every node of the pool settled: the slow poll that notices changes made inside Nova."""

DELETION_ABANDON_WINDOW: Final = 300.0
"""How long a deregistered target cluster may stay unresolvable before a deleting CR abandons it."""

SERVICE_RECORDS_WAIT: Final = 30.0
"""Service records of gone pods still reported up (beyond the spec, the ServiceRecords step): Nova calls a
record down ``service_down_time`` (60 s) after its last heartbeat, so a look every 30 s deletes it soon
after. Also the first wait after a failed look, doubled on each further failure up to
SERVICE_RECORDS_RETRY_MAX."""

SERVICE_RECORDS_RETRY_MAX: Final = 600.0
"""The longest wait between two failed looks at the service records (an unreachable compute API)."""

# A pass that only reports progress holds its status write this long (``reconcilers.status_hold``),
# and at most STATUS_HOLD_LONGEST while the Nova's next pass, which supersedes it, is already due;
# then that pass, if still queued, goes next and has STATUS_HOLD more to begin (``runtime.held``).
STATUS_HOLD: Final = 1.0
STATUS_HOLD_LONGEST: Final = 10.0
