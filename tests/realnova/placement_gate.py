"""A front of the real Placement that can hold a build: every request is passed on to Placement as it
came, but while the gate is closed a ``GET /allocations/{consumer}`` (nova-compute's first look at a
build's allocations, before it claims anything on its host) waits until the gate opens.

A pool reaches it through ``[placement] endpoint_override``; nothing else of the tier does, so what
it holds is that pool's builds, and only while a test wants them in flight.
"""

from __future__ import annotations

import http.client
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ALLOCATIONS = re.compile(r"^/allocations/([0-9a-fA-F-]{32,36})$")
# Hop-by-hop headers (RFC 9110 7.6.1) and those http.client sets itself.
NOT_PASSED = frozenset({"connection", "keep-alive", "transfer-encoding", "host", "content-length"})


class PlacementGate:
    """``start()`` listens on ``address`` (a free port); ``close()``/``open()`` the gate; ``held``
    are the consumers whose allocation read waited (in order of arrival)."""

    def __init__(self, address: str, placement_url: str) -> None:
        target = urllib.parse.urlsplit(placement_url)
        self.target = (target.hostname or "", target.port or 80)
        self.address = address
        self.port = 0
        self.held: list[str] = []
        self._open = threading.Event()
        self._open.set()
        self._arrived = threading.Condition()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> PlacementGate:
        gate = self

        class Handler(BaseHTTPRequestHandler):
            def _pass_on(self) -> None:
                gate.wait_if_held(self.command, self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in NOT_PASSED}
                conn = http.client.HTTPConnection(*gate.target, timeout=120)
                try:
                    conn.request(self.command, self.path, body, headers)
                    resp = conn.getresponse()
                    data = resp.read()
                    self.send_response(resp.status, resp.reason)
                    for key, value in resp.getheaders():
                        if key.lower() not in NOT_PASSED:
                            self.send_header(key, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                finally:
                    conn.close()

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _pass_on

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer((self.address, 0), Handler)
        server.daemon_threads = True
        self._server, self.port = server, server.server_address[1]
        self._thread = threading.Thread(target=server.serve_forever, name="placement gate", daemon=True)
        self._thread.start()
        return self

    def wait_if_held(self, method: str, path: str) -> None:
        found = ALLOCATIONS.match(urllib.parse.urlsplit(path).path)
        if method != "GET" or found is None or self._open.is_set():
            return
        with self._arrived:
            self.held.append(found.group(1))
            self._arrived.notify_all()
        self._open.wait()

    def close(self) -> None:
        self._open.clear()

    def open(self) -> None:
        self._open.set()

    def wait_held(self, consumer: str, timeout: float) -> bool:
        """True once ``consumer``'s allocation read is being held (within ``timeout`` seconds)."""
        with self._arrived:
            return self._arrived.wait_for(lambda: consumer in self.held, timeout)

    def stop(self) -> None:
        self.open()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)
