"""A real memcached (Debian's ``memcached``), for Keystone's token cache and nova's cache."""

from __future__ import annotations

import pathlib
import socket
from dataclasses import dataclass, field

from simcluster.realservices.procs import Child, ServiceError, Spawner, wait_until


@dataclass
class MemcachedServer:
    workdir: pathlib.Path
    address: str = "127.0.0.1"
    port: int = 11211
    memory_mib: int = 64
    _spawner: Spawner = field(init=False)
    _child: Child | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._spawner = Spawner(self.workdir)

    @property
    def alive(self) -> bool:
        return self._child is not None and self._child.alive

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

    def stop(self) -> None:
        self._spawner.stop_all()
        self._child = None

    def stats_ok(self) -> bool:
        try:
            with socket.create_connection((self.address, self.port), timeout=1) as s:
                s.sendall(b"version\r\n")
                return s.recv(64).startswith(b"VERSION")
        except OSError:
            return False
