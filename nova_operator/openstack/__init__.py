"""Keystone and Nova compute API access for the NovaCompute controller (novacompute-crd.md §14).

Built on keystoneauth1: the Keystone v3 password plugin gets one project-scoped token and
keystoneauth's session adds it to every request. keystoneauth is blocking, so every call
runs in a worker thread (``asyncio.to_thread``); the event loop never waits on a socket.

One ``ComputeClient`` is made per pass and shared by the Aggregates and Services steps,
so a pass asks Keystone for one token. Every failure is a ``ComputeAPIError`` (``status``
is the HTTP code, 0 when there was no answer). Passwords and tokens are never logged or
put into an error message.
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
