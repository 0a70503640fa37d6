"""Keystone and Nova compute API access: the NovaCompute controller's calls (novacompute-crd.md §14)
and the Nova's ServiceRecords step (list every service, delete a stale one).

Built on aiohttp (``openstack.http``): one project-scoped token from Keystone v3's password method,
sent with every call of that client; each request has a total deadline and a body cap and follows
no redirect, and runs on the event loop, so cancelling a pass ends its calls.

The pools of one Nova reach its API through a ``NovaView`` (``openstack.view``): within a short
window they share one token and one read of the services, the hypervisors and the aggregates, and
the operator's own writes invalidate what they changed. Every failure is a ``ComputeAPIError``
(``status`` is the HTTP code, 0 when there was no answer). Passwords and tokens are never logged
or put into an error message.
"""

from nova_operator.openstack.client import (
    AGGREGATE_MARKER,
    Aggregate,
    AggregateExists,
    ComputeAPIError,
    ComputeClient,
    ComputeService,
    Credentials,
    DeleteOutcome,
)

__all__ = [
    "AGGREGATE_MARKER",
    "Aggregate",
    "AggregateExists",
    "ComputeAPIError",
    "ComputeClient",
    "ComputeService",
    "Credentials",
    "DeleteOutcome",
]
