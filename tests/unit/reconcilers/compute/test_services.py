"""The Services step's poll interval (novacompute-crd.md §12), a pure function.

The step itself runs on the real API server: tests/integration/novacompute/test_services.py."""

from __future__ import annotations

from nova_operator.reconcilers.compute.context import ComputeIntervals
from nova_operator.reconcilers.compute.services import poll_interval


def test_poll_is_the_shortest_need_of_any_entry() -> None:
    every = ComputeIntervals()
    assert poll_interval([], every) == 60
    assert poll_interval([{"phase": "Active"}, {"phase": "Conflict"}], every) == 60
    assert poll_interval([{"phase": "Active"}, {"phase": "Pending"}], every) == 30
    assert poll_interval([{"phase": "Draining"}, {"phase": "Releasing"}], every) == 10
    assert ComputeIntervals().scaled(0.5).settled == 30
