"""A real memcached (Debian's ``memcached``), for Keystone's token cache and nova's cache.

With ``tls`` (Debian's build has TLS: ``-Z``) every listener speaks TLS only, with that certificate
and key; with ``client`` as well, the server requires a client certificate of the CA
(``ssl_verify_mode=2``) and its own readiness check presents ``client``.
"""

from __future__ import annotations

import pathlib
import socket
import ssl
from dataclasses import dataclass

from simcluster.realtier.services.pki import KeyPair, TLSFiles
from simcluster.realtier.services.procs import ServerProcess, ServiceError, wait_until

# memcached's ssl_verify_mode: 2 requires a peer certificate (0 none, 1 request, 3 once).
VERIFY_REQUIRE = 2


@dataclass
class MemcachedServer(ServerProcess):
    address: str = "127.0.0.1"
    port: int = 11211
    memory_mib: int = 64
    tls: TLSFiles | None = None
    client: KeyPair | None = None  # with tls: a client certificate is required, and this one is shown

    def start(self) -> MemcachedServer:
        if not pathlib.Path("/usr/bin/memcached").exists():
            raise ServiceError("memcached is not installed (Debian package memcached)")
        argv = [
            "/usr/bin/memcached",
            "-u",
            "root",
            "-l",
            self.address,
            "-p",
            str(self.port),
            "-m",
            str(self.memory_mib),
        ]
        if self.tls is not None:
            placed = self.tls.install(self.workdir / "tls")
            options = [f"ssl_chain_cert={placed.cert}", f"ssl_key={placed.key}", f"ssl_ca_cert={placed.ca}"]
            if self.client is not None:
                options.append(f"ssl_verify_mode={VERIFY_REQUIRE}")
            argv += ["-Z", "-o", ",".join(options)]
        self._child = self._spawner.spawn("memcached", argv)
        wait_until(self.stats_ok, self._child, what="memcached", timeout=20)
        return self

    def client_context(self, *, present: bool = True) -> ssl.SSLContext:
        """A client's TLS context that trusts the server's CA and checks its name; it presents ``client``
        unless ``present`` is false."""
        if self.tls is None:
            raise ServiceError("memcached was started without TLS")
        context = ssl.create_default_context(cafile=str(self.tls.ca))
        if present and self.client is not None:
            context.load_cert_chain(str(self.client.cert), str(self.client.key))
        return context

    def answers(self, tls: ssl.SSLContext | None, server_hostname: str | None = None) -> bool:
        """``version`` is answered over a plain connection (``tls`` None) or a TLS session of ``tls``."""
        try:
            with socket.create_connection((self.address, self.port), timeout=2) as raw:
                raw.settimeout(5)
                name = server_hostname or self.address
                # a TLS socket takes the raw one's descriptor over: closed by its own ``with``
                with raw if tls is None else tls.wrap_socket(raw, server_hostname=name) as s:
                    s.sendall(b"version\r\n")
                    return s.recv(64).startswith(b"VERSION")
        except OSError:
            return False

    def stats_ok(self) -> bool:
        return self.answers(self.client_context() if self.tls is not None else None)
