"""A real RabbitMQ broker (Debian's ``rabbitmq-server``) and the user commands its operator runs.

The ``/usr/sbin`` wrapper switches to the ``rabbitmq`` user, so the server script under
``/usr/lib/rabbitmq/bin`` is run directly, as root, with every path in the work directory. The node
name is ``rabbit@localhost`` by default; a second broker on the same machine needs another name and
distribution port. RabbitMQ spawns ``epmd`` (the Erlang port mapper), which outlives the broker and
leaves its process group: ``stop`` asks it to go, and refuses ``rabbitmqctl`` from then on (its VM
would start another).

With ``tls`` the broker also listens for AMQP over TLS on ``tls_port`` (what port 5671 is in a
cluster), with that certificate and key; its CA verifies the client certificates that are offered
(a client without one is admitted, as the cluster operator's default TLS listener does, unless
``client`` is given: then the TLS listener requires a client certificate of the CA, mutual TLS, and
the broker's own readiness check presents ``client``).
``use_certificate`` swaps the certificate in place for new connections.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import socket
import ssl
import subprocess
from dataclasses import dataclass, field

from simcluster.realtier.services.pki import KeyPair, TLSFiles
from simcluster.realtier.services.procs import ServerProcess, ServiceError, run, wait_until

SBIN = pathlib.Path("/usr/lib/rabbitmq/bin")


def amqp_answers(address: str, port: int, *, tls: ssl.SSLContext | None = None) -> bool:
    """The listener answers a protocol header with a method frame (connection.start).

    With ``tls`` the header goes over a TLS session of that context (a failed handshake: False)."""
    try:
        with socket.create_connection((address, port), timeout=2) as raw:
            raw.settimeout(5)
            # a TLS socket takes the raw one's descriptor over: closed by its own ``with``
            with tls.wrap_socket(raw, server_hostname=address) if tls is not None else raw as s:
                s.sendall(b"AMQP\x00\x00\x09\x01")
                return s.recv(1) == b"\x01"  # a method frame: connection.start
    except OSError:
        return False


@dataclass
class RabbitMQServer(ServerProcess):
    address: str = "127.0.0.1"
    port: int = 5672
    node: str = "rabbit@localhost"
    dist_port: int = 25672
    epmd_port: int = 4369
    start_timeout: float = 240.0
    tls: TLSFiles | None = None
    tls_port: int = 5671
    client: KeyPair | None = None  # mutual TLS: the TLS listener refuses a client without a certificate
    _stopped: bool = field(default=False, init=False)  # by ``stop()``: no more rabbitmqctl

    def env(self) -> dict[str, str]:
        w = self.workdir
        return {
            "HOME": str(w),
            "RABBITMQ_HOME": "/usr/lib/rabbitmq",
            "RABBITMQ_MNESIA_BASE": str(w / "mnesia"),
            "RABBITMQ_LOG_BASE": str(w / "log"),
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_IP_ADDRESS": self.address,
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_CONFIG_FILE": str(w / "rabbitmq"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(w / "enabled_plugins"),
            "RABBITMQ_PID_FILE": str(w / "rabbitmq.pid"),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "ERL_EPMD_PORT": str(self.epmd_port),
            "RABBITMQ_ERLANG_COOKIE": "",
        }

    def start(self) -> RabbitMQServer:
        if not (SBIN / "rabbitmq-server").exists():
            raise ServiceError("rabbitmq-server is not installed (Debian package rabbitmq-server)")
        w = self.workdir
        (w / "log").mkdir(parents=True, exist_ok=True)
        (w / "rabbitmq.conf").write_text(
            "loopback_users = none\n"
            f"listeners.tcp.default = {self.address}:{self.port}\n"
            "log.console = true\nlog.console.level = warning\nlog.file = false\n" + self._tls_conf()
        )
        (w / "enabled_plugins").write_text("[].\n")
        cookie = w / ".erlang.cookie"
        if not cookie.exists():
            cookie.write_text(os.urandom(16).hex())
            cookie.chmod(0o400)
        env = {k: v for k, v in self.env().items() if k != "RABBITMQ_ERLANG_COOKIE"}
        self._stopped = False
        self._child = self._spawner.spawn("rabbitmq", [str(SBIN / "rabbitmq-server")], env=env)
        wait_until(
            self._answers, self._child, what="rabbitmq-server", timeout=self.start_timeout, interval=1.0
        )
        return self

    def _tls_conf(self) -> str:
        if self.tls is None:
            return ""
        placed = self.tls.install(self.workdir / "tls")
        return (
            f"listeners.ssl.default = {self.address}:{self.tls_port}\n"
            f"ssl_options.cacertfile = {placed.ca}\n"
            f"ssl_options.certfile = {placed.cert}\n"
            f"ssl_options.keyfile = {placed.key}\n"
            "ssl_options.verify = verify_peer\n"
            f"ssl_options.fail_if_no_peer_cert = {'true' if self.client is not None else 'false'}\n"
        )

    def use_certificate(self, tls: TLSFiles) -> None:
        """Serve ``tls`` to new TLS connections: the files at the same paths, Erlang's PEM cache cleared."""
        if self.tls is None:
            raise ServiceError("the broker was started without TLS")
        self.tls = tls
        tls.install(self.workdir / "tls")
        self.ctl("eval", "ssl:clear_pem_cache().")

    def client_context(self) -> ssl.SSLContext:
        """A client's TLS context that trusts the broker's CA, checks its name and presents ``client``."""
        if self.tls is None:
            raise ServiceError("the broker was started without TLS")
        context = ssl.create_default_context(cafile=str(self.tls.ca))
        if self.client is not None:
            context.load_cert_chain(str(self.client.cert), str(self.client.key))
        return context

    def stop(self) -> None:
        if self.alive:
            with contextlib.suppress(ServiceError, subprocess.TimeoutExpired):
                self.ctl("stop", timeout=30)
        self._stopped = True
        super().stop()
        self._stop_epmd()

    def _stop_epmd(self) -> None:
        # epmd daemonises itself out of the broker's process group; ask it to go
        subprocess.run(
            ["epmd", "-port", str(self.epmd_port), "-kill"],
            env={**os.environ, "ERL_EPMD_ADDRESS": "127.0.0.1"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )

    def _answers(self) -> bool:
        """The AMQP listener answers a protocol header with connection.start: the broker serves.

        A socket check instead of ``rabbitmqctl await_startup``: each rabbitmqctl call boots an Erlang
        VM (seconds of CPU on a busy machine). With TLS, the TLS listener must answer too."""
        if not amqp_answers(self.address, self.port):
            return False
        return self.tls is None or amqp_answers(self.address, self.tls_port, tls=self.client_context())

    def ctl(self, *args: str, timeout: float = 60.0) -> str:
        """``rabbitmqctl`` against this node; ``ServiceError`` once the broker was stopped, since the
        CLI's Erlang VM would start an epmd of its own on the broker's port, which nothing stops (a
        stand-in acting on the broker during the cluster's teardown left one behind per session)."""
        if self._stopped:
            raise ServiceError(f"rabbitmqctl {args[0] if args else ''}: the broker {self.node} is stopped")
        env = {k: v for k, v in self.env().items() if k != "RABBITMQ_ERLANG_COOKIE"}
        return run([str(SBIN / "rabbitmqctl"), "-n", self.node, "-q", *args], env=env, timeout=timeout)

    # -- what the cluster operator and the topology operator do --------------------------------

    def ensure_user(self, name: str, password: str, *, tags: str = "administrator") -> None:
        users = self.users()
        if name in users:
            self.ctl("change_password", "--", name, password)
        else:
            self.ctl("add_user", "--", name, password)
        self.ctl("set_user_tags", name, tags)
        self.ctl("set_permissions", "-p", "/", name, ".*", ".*", ".*")

    def delete_user(self, name: str) -> None:
        if name in self.users():
            self.ctl("delete_user", "--", name)

    def users(self) -> set[str]:
        out = self.ctl("list_users", "--no-table-headers")
        return {line.split("\t")[0] for line in out.splitlines() if line.strip()}

    def authenticates(self, name: str, password: str) -> bool:
        try:
            self.ctl("authenticate_user", "--", name, password)
        except ServiceError:
            return False
        return True

    def stop_app(self) -> None:
        """The broker stops serving (the node stays up): what a RabbitMQ outage looks like to clients."""
        self.ctl("stop_app")

    def start_app(self) -> None:
        self.ctl("start_app")
