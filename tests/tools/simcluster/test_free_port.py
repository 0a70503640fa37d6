"""``free_port``: a port outside the kernel's ephemeral range, that no socket holds."""

from __future__ import annotations

import socket

import pytest
from simcluster.platform import controlplane
from simcluster.platform.controlplane import bindable, ephemeral_range, free_port


def test_a_free_port_is_below_the_ephemeral_range_and_bindable() -> None:
    low, _ = ephemeral_range()
    for _ in range(20):
        port = free_port()
        assert controlplane.LOWEST_PORT <= port < low
        assert bindable(port)


def test_a_port_some_socket_holds_is_passed_over() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        assert not bindable(taken)
        offered = iter([taken, taken])
        port = free_port(lambda low, high: next(offered, low + 7))
        assert port != taken


def test_without_room_below_the_range_the_kernel_chooses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(controlplane, "ephemeral_range", lambda: (controlplane.LOWEST_PORT + 10, 60999))
    asked: list[tuple[int, int]] = []

    def pick(low: int, high: int) -> int:
        asked.append((low, high))
        return low

    port = free_port(pick)
    assert asked == []
    assert port >= controlplane.LOWEST_PORT + 10


def test_a_port_handed_out_is_not_handed_out_again_before_it_is_bound() -> None:
    first = free_port()
    offered = iter([first, first + 1 if first + 1 < ephemeral_range()[0] else first - 1])
    second = free_port(lambda low, high: next(offered))
    assert second != first
