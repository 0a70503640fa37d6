"""The requeue intervals are the contract's numbers (reconciler.md §9 and the NovaCompute poll).

Every other test compares a step's requeue with the named constant; this one pins each constant
to the number the spec states, once, so a changed constant fails here and not silently everywhere.
"""

from __future__ import annotations

from nova_operator import intervals


def test_the_nova_intervals_are_the_spec_table() -> None:
    assert intervals.NEXT_PASS == 1  # after a finalizer add; after the Contracting flip
    assert intervals.DEPLOYMENT_POLL == 10  # API Deployment not available, rollout waits, HTTPRoute
    assert intervals.HEALTH_CHECK_RETRY == 10  # a failed API probe
    assert intervals.HEALTH_CHECK_REUSE == 30  # a passing probe is reused this long
    assert intervals.SECRET_POLL == 15  # store and credential gates, DSN and transport-URL steps
    assert intervals.DATABASE_WAIT == 30  # cluster gate, Database/User/Grant, WaitingForConfig, db-sync
    assert intervals.UPGRADE_WAIT == 30  # expand, migrate and contract Jobs in progress


def test_the_novacompute_polls_are_the_spec_numbers() -> None:
    assert intervals.COMPUTE_NODE_RELEASING == 10  # a Releasing node, a node dropped this pass
    assert intervals.COMPUTE_NODE_DRAINING == 30  # Draining/Pending nodes, failed Keystone/Nova calls
    assert intervals.COMPUTE_SETTLED == 60  # every node settled
