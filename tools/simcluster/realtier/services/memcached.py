"""A real memcached (Debian's ``memcached``), for Keystone's token cache and nova's cache."""

from __future__ import annotations

import pathlib
import socket
from dataclasses import dataclass

from simcluster.realtier.services.procs import ServerProcess, ServiceError, wait_until


@dataclass
class MemcachedServer(ServerProcess):
    address: str = "127.0.0.1"
    port: int = 11211
    memory_mib: int = 64

    def start(self) -> MemcachedServer:
        if not pathlib.Path("/usr/bin/memcached").exists():
            raise ServiceError("memcached is not installed (Debian package memcached)")
        self._child = self._spawner.spawn(
            "memcached",
            [
                "/usr/bin/memcached",
                "-u",
                "root",
                "-l",
                self.address,
                "-p",
                str(self.port),
                "-m",
                str(self.memory_mib),
            ],
        )
        wait_until(self.stats_ok, self._child, what="memcached", timeout=20)
        return self

    def stats_ok(self) -> bool:
        try:
            with socket.create_connection((self.address, self.port), timeout=1) as s:
                s.sendall(b"version\r\n")
                return s.recv(64).startswith(b"VERSION")
        except OSError:
            return False
