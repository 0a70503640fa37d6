"""``ServiceBridge``: a client of its port talks to the Service's ClusterIP, looked up per connection;
while the Service has none the client gets a reset; ``stop`` ends the open connections too."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest
from simcluster.client.kube import Kube, KubeError
from simcluster.platform.controlplane import free_port
from simcluster.realtier.service_bridge import ServiceBridge


class FakeKube(Kube):
    def __init__(self) -> None:
        self.service: dict[str, Any] | None = None
        self.paths: list[str] = []

    def get(self, path: str) -> dict[str, Any]:
        self.paths.append(path)
        if self.service is None:
            raise KubeError(404, "not found")
        return self.service


def _echo_server() -> tuple[socket.socket, int]:
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                while data := conn.recv(1024):
                    conn.sendall(b"echo:" + data)

    threading.Thread(target=serve, daemon=True).start()
    return server, server.getsockname()[1]


def test_a_client_reaches_the_service_found_at_its_connection() -> None:
    server, port = _echo_server()
    kube = FakeKube()
    bridge = ServiceBridge(kube, "openstack", "nova", port, "127.0.0.1", free_port()).start()
    try:
        assert bridge.url == f"http://127.0.0.1:{bridge.address[1]}"
        # no Service yet: a reset, as from a refused server; it can come before the client's
        # connect has returned (the bridge accepts and resets at once), so the connect is inside
        with (
            pytest.raises(ConnectionResetError),
            socket.create_connection(bridge.address, timeout=10) as client,
        ):
            client.recv(16)
        kube.service = {"spec": {"clusterIP": "127.0.0.1"}}  # made after the bridge started
        with socket.create_connection(bridge.address, timeout=10) as client:
            client.sendall(b"GET /")
            assert client.recv(64) == b"echo:GET /"
        assert kube.paths[-1] == "/api/v1/namespaces/openstack/services/nova"
        with socket.create_connection(bridge.address, timeout=10) as client:
            client.sendall(b"open")
            assert client.recv(64) == b"echo:open"
            bridge.stop()  # ends the connection that is open, too
            assert client.recv(64) == b""
        refused = socket.socket()
        assert refused.connect_ex(bridge.address) != 0
        refused.close()
    finally:
        bridge.stop()
        server.close()


def test_a_headless_service_is_no_target() -> None:
    kube = FakeKube()
    kube.service = {"spec": {"clusterIP": "None"}}
    assert ServiceBridge(kube, "ns", "svc", 80, "127.0.0.1", 1).target() is None
    kube.service = {"spec": {"clusterIP": "10.96.0.7"}}
    assert ServiceBridge(kube, "ns", "svc", 80, "127.0.0.1", 1).target() == ("10.96.0.7", 80)
