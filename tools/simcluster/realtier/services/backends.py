"""The real servers behind the MariaDB and RabbitmqCluster objects: one of each, started together.

``RealBackends`` is the stand-in operators' ``Backend`` (``simcluster.standins``): a Database,
User or Grant becomes the statement the mariadb-operator runs, a RabbitmqCluster's default user a
real broker user. ``address`` is where the servers listen (the host's loopback) and ``reach`` where
pods reach them, when that differs (the real-Nova tier: an address of the real nodes' namespace that
``RealNodes.relay`` leads to the host's loopback); the Services of the objects name ``reach``.

With ``pki`` both servers speak TLS with its server certificate: MariaDB offers TLS on its port
(clients choose; users with ``REQUIRE`` must), RabbitMQ listens for AMQP over TLS on
``rabbitmq.tls_port`` beside its plain listener.
"""

from __future__ import annotations

import pathlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from simcluster.platform.controlplane import free_port
from simcluster.realtier.services.mariadb import MariaDBServer
from simcluster.realtier.services.memcached import MemcachedServer
from simcluster.realtier.services.pki import PKI
from simcluster.realtier.services.rabbitmq import RabbitMQServer


@dataclass
class RealBackends:
    workdir: pathlib.Path
    address: str = "127.0.0.1"
    pki: PKI | None = None
    reach: str = ""  # where pods reach the servers; default ``address``
    mariadb: MariaDBServer = field(init=False)
    rabbitmq: RabbitMQServer = field(init=False)
    memcached: MemcachedServer = field(init=False)

    def __post_init__(self) -> None:
        tls = self.pki.server_files() if self.pki is not None else None
        self.mariadb = MariaDBServer(
            self.workdir / "mariadb", address=self.address, port=free_port(), tls=tls
        )
        self.rabbitmq = RabbitMQServer(
            self.workdir / "rabbitmq",
            address=self.address,
            port=free_port(),
            dist_port=free_port(),
            epmd_port=free_port(),
            tls=tls,
            tls_port=free_port(),
        )
        self.memcached = MemcachedServer(self.workdir / "memcached", address=self.address, port=free_port())

    def start(self) -> RealBackends:
        try:
            self.mariadb.start()
            self.memcached.start()
            self.rabbitmq.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for server in (self.rabbitmq, self.memcached, self.mariadb):
            server.stop()

    # -- standins.Backend ------------------------------------------------------------------

    def create_database(self, name: str, *, charset: str, collation: str) -> None:
        self.mariadb.create_database(name, charset=charset, collation=collation)

    def drop_database(self, name: str) -> None:
        self.mariadb.drop_database(name)

    def ensure_user(self, name: str, password: str, *, max_connections: int, host: str) -> None:
        self.mariadb.ensure_user(name, password, max_connections=max_connections, host=host)

    def drop_user(self, name: str, host: str) -> None:
        self.mariadb.drop_user(name, host)

    def grant(
        self,
        privileges: Sequence[str],
        database: str,
        table: str,
        user: str,
        *,
        host: str,
        grant_option: bool,
    ) -> None:
        self.mariadb.grant(privileges, database, table, user, host=host, grant_option=grant_option)

    def revoke_all(self, database: str, table: str, user: str, *, host: str) -> None:
        self.mariadb.revoke_all(database, table, user, host=host)

    def ensure_broker_user(self, name: str, password: str) -> None:
        self.rabbitmq.ensure_user(name, password)

    def delete_broker_user(self, name: str) -> None:
        self.rabbitmq.delete_user(name)

    def endpoint(self, kind: str) -> tuple[str, int]:
        ports = {
            "mariadb": self.mariadb.port,
            "rabbitmq": self.rabbitmq.port,
            "memcached": self.memcached.port,
        }
        return self.reach or self.address, ports[kind]
