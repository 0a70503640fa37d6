"""The console path on the wire, without a new dependency: a WebSocket upgrade written on a socket
(RFC 6455, as noVNC's browser sends it), the server's frames read back, and a VNC server stand-in
where the fake driver says the instance's console is.

``nova.virt.fake.FakeDriver`` reports every console at ``fakevncconsole.com:6969`` with an internal
access path, so nova-novncproxy, once it has validated a token (and asked the instance's compute
host whether that console port is right), connects there and sends ``CONNECT <path> HTTP/1.1``.
``VNCStandIn`` is that server, reached by the name through a Service and an alias in the pods'
``/etc/hosts``: the CONNECT it receives is the proof that a token opened the way to the instance's
console, and its absence that a token did not. It answers as a console server behind such a path
would (200, then the RFB 3.8 greeting and the security type None), but the greeting does not reach
the browser with this driver: nova's websocketproxy looks for ``"\r\n\r\n"`` (a str) in the bytes
it read (``bytes.find(str)``, a TypeError on Python 3) and drops the connection. Only drivers
without an internal access path (libvirt) take the RFB path.
"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import threading
from dataclasses import dataclass, field

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
RFB_VERSION = b"RFB 003.008\n"
SECURITY_NONE = b"\x01\x01"  # RFB 3.8 security types: a count of one, type 1 (None)


@dataclass
class Upgrade:
    """The answer to a WebSocket upgrade: status, headers (lower-case names), the open socket and
    whatever bytes already followed the headers."""

    status: int
    headers: dict[str, str]
    sock: socket.socket
    rest: bytes

    def accept_matches(self, key: str) -> bool:
        want = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        return self.headers.get("sec-websocket-accept") == want

    def read_frame(self, timeout: float = 30.0) -> bytes | None:
        """The payload of the next data frame from the server; None when it closed instead (EOF,
        a reset or a close frame)."""
        self.sock.settimeout(timeout)
        while True:
            head = self._read(2)
            if head is None:
                return None
            opcode, length = head[0] & 0x0F, head[1] & 0x7F
            if length == 126:
                ext = self._read(2)
                length = int.from_bytes(ext, "big") if ext else 0
            elif length == 127:
                ext = self._read(8)
                length = int.from_bytes(ext, "big") if ext else 0
            mask = self._read(4) if head[1] & 0x80 else b""
            payload = self._read(length) if length else b""
            if payload is None or mask is None:
                return None
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 0x8:  # close
                return None
            if opcode in (0x1, 0x2, 0x0):
                return payload
            # ping/pong: not data, read on

    def send_binary(self, payload: bytes) -> None:
        """A masked binary frame (a client's frames must be masked)."""
        mask = os.urandom(4)
        size = len(payload)
        head = bytes([0x82]) + (
            bytes([0x80 | size])
            if size < 126
            else bytes([0x80 | 126]) + size.to_bytes(2, "big")
            if size < 1 << 16
            else bytes([0x80 | 127]) + size.to_bytes(8, "big")
        )
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def close(self) -> None:
        self.sock.close()

    def _read(self, n: int) -> bytes | None:
        while len(self.rest) < n:
            try:
                chunk = self.sock.recv(65536)
            except (ConnectionResetError, TimeoutError, OSError):
                return None
            if not chunk:
                return None
            self.rest += chunk
        out, self.rest = self.rest[:n], self.rest[n:]
        return out


def websocket_upgrade(
    address: str, port: int, path: str, host: str, *, origin: str | None = None, timeout: float = 30.0
) -> tuple[Upgrade, str]:
    """``GET path`` with the upgrade headers a browser sends (``origin``: the page's, which nova checks
    against ``Host`` and the console URL's scheme; None: a non-browser client); the answer and the
    ``Sec-WebSocket-Key`` sent."""
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [f"GET {path} HTTP/1.1", f"Host: {host}", *([f"Origin: {origin}"] if origin else [])]
    lines += ["Upgrade: websocket", "Connection: Upgrade", f"Sec-WebSocket-Key: {key}"]
    lines += ["Sec-WebSocket-Version: 13", "", ""]
    sock = socket.create_connection((address, port), timeout=timeout)
    sock.sendall("\r\n".join(lines).encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("iso-8859-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Upgrade(status, headers, sock, rest), key


@dataclass
class VNCStandIn:
    """A TCP server that answers nova-novncproxy as a hypervisor's console would (see the module's
    text); ``requests`` are the CONNECT lines it received."""

    address: str
    port: int = 0
    requests: list[str] = field(default_factory=list)
    _sock: socket.socket | None = None
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> VNCStandIn:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.address, self.port))
        sock.listen(8)
        sock.settimeout(0.5)
        self._sock, self.port = sock, sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, name="vnc stand-in", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._sock is not None:
            self._sock.close()

    def _serve(self) -> None:
        assert self._sock is not None
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._session, args=(conn,), daemon=True).start()

    def _session(self, conn: socket.socket) -> None:
        conn.settimeout(30)
        with conn:
            try:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(4096)
                    if not chunk:
                        return
                    data += chunk
                self.requests.append(data.split(b"\r\n", 1)[0].decode(errors="replace"))
                conn.sendall(b"HTTP/1.1 200 OK\r\n\r\n" + RFB_VERSION)
                version = conn.recv(len(RFB_VERSION))  # a client that got the greeting answers with its own
                if version == RFB_VERSION:
                    conn.sendall(SECURITY_NONE)
                while conn.recv(4096):  # until the proxy lets go
                    pass
            except OSError:
                return
