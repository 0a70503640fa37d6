"""A port on the host that leads to a Service of the mixed tier, for pods on its real nodes.

The real nodes live in a network namespace of their own that reaches the host only at the pod
bridge's gateway, on the ports ``RealNodes.relay`` forwards; the pods of the kubelet stand-in's nodes
(on that bridge) are beyond it. ``ServiceBridge`` listens on ``address:port`` of the host (the gateway,
with ``port`` among the relayed ones) and connects each client to the Service's ClusterIP, looked up
at each connection (the Service may be made after the bridge starts); the host reaches ClusterIPs
through the stand-in's rules. A client it cannot connect gets a reset, as from a refused server.
The operator's pods reach the sample Nova's compute API this way
(``operator_chart``) until the control nodes are real too.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading

from simcluster.client.kube import Kube, KubeError

CONNECT_TIMEOUT = 10.0
CHUNK = 65536


class ServiceBridge:
    def __init__(
        self, kube: Kube, namespace: str, name: str, port: int, address: str, listen_port: int
    ) -> None:
        self.kube = kube
        self.service = (namespace, name, port)
        self.address = (address, listen_port)
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()

    @property
    def url(self) -> str:
        return f"http://{self.address[0]}:{self.address[1]}"

    def start(self) -> ServiceBridge:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(self.address)
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, name="service-bridge", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
        with self._lock:
            for conn in list(self._open):
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                conn.close()
            self._open.clear()

    def target(self) -> tuple[str, int] | None:
        """The Service's ClusterIP and port, or None while it has none."""
        namespace, name, port = self.service
        try:
            svc = self.kube.get(f"/api/v1/namespaces/{namespace}/services/{name}")
        except (KubeError, OSError):
            return None
        ip = svc.get("spec", {}).get("clusterIP")
        return (str(ip), port) if ip and ip != "None" else None

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        self._track(client)
        target = self.target()
        try:
            if target is None:
                raise ConnectionRefusedError
            upstream = socket.create_connection(target, timeout=CONNECT_TIMEOUT)
        except OSError:
            # a reset, as a refused or unreachable server gives: not an answer cut short
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self._forget(client)
            return
        upstream.settimeout(None)
        self._track(upstream)
        done = threading.Thread(target=self._pipe, args=(upstream, client), daemon=True)
        done.start()
        self._pipe(client, upstream)
        done.join()
        self._forget(client)
        self._forget(upstream)

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(CHUNK):
                dst.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def _track(self, conn: socket.socket) -> None:
        with self._lock:
            self._open.add(conn)

    def _forget(self, conn: socket.socket) -> None:
        with self._lock:
            self._open.discard(conn)
        conn.close()
