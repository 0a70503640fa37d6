"""``realnode.forward``'s two ways across a network namespace, without a cluster: ``relay --to`` (an
address of the namespace only leads to a server on the host's loopback) and ``publish`` (a port of the
host's loopback leads to a server inside the namespace). The namespace is a ``sleep`` started with
``unshare --net``; the servers are sockets of this test."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from realnode.forward import listen_in, setns
from simcluster.platform.controlplane import REPO, free_port

IN_NETNS = "10.86.0.1"  # an address the host does not have


@pytest.fixture
def netns() -> Iterator[str]:
    """The path of a fresh network namespace with ``lo`` up (and ``IN_NETNS`` on it)."""
    holder = subprocess.Popen(["unshare", "--net", "--", "sleep", "infinity"])
    path = f"/proc/{holder.pid}/ns/net"
    own = os.readlink("/proc/self/ns/net")
    deadline = time.monotonic() + 10
    while os.readlink(path) == own:  # unshare has not made it yet
        assert time.monotonic() < deadline, "no network namespace"
        time.sleep(0.02)
    for argv in (["ip", "link", "set", "lo", "up"], ["ip", "addr", "add", f"{IN_NETNS}/32", "dev", "lo"]):
        subprocess.run(["nsenter", f"--net={path}", "--", *argv], check=True)
    yield path
    holder.kill()
    holder.wait()


def _serve_once(sock: socket.socket, reply: bytes) -> None:
    """Answer one client: ``reply`` followed by what it sent."""

    def run() -> None:
        with sock:
            conn, _ = sock.accept()
            with conn:
                conn.sendall(reply + conn.recv(100))

    threading.Thread(target=run, daemon=True).start()


@contextlib.contextmanager
def _forward(*args: str) -> Iterator[None]:
    """``python -m realnode.forward ARGS`` while the block runs, once it said ready."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "tools")}
    with subprocess.Popen(
        [sys.executable, "-m", "realnode.forward", *args], stdout=subprocess.PIPE, text=True, env=env
    ) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        try:
            yield
        finally:
            proc.kill()


def _in(netns: str, fn: Callable[[], bytes]) -> bytes:
    """``fn()`` in a thread that entered ``netns`` (a thread's network namespace is its own)."""
    out: list[bytes] = []
    failed: list[BaseException] = []

    def run() -> None:
        fd = os.open(netns, os.O_RDONLY)
        setns(fd)
        os.close(fd)
        try:
            out.append(fn())
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    if failed:
        raise failed[0]
    return out[0]


def _ask(address: str, port: int) -> bytes:
    with socket.create_connection((address, port), timeout=10) as conn:
        conn.sendall(b"ping")
        conn.shutdown(socket.SHUT_WR)
        return conn.recv(100)


def test_relay_to_the_hosts_loopback_from_an_address_of_the_namespace(netns: str) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    _serve_once(server, b"host:")
    with _forward("relay", netns, IN_NETNS, str(port), "--to", "127.0.0.1"):
        assert _in(netns, lambda: _ask(IN_NETNS, port)) == b"host:ping"


def test_publish_a_port_of_the_hosts_loopback_to_a_server_in_the_namespace(netns: str) -> None:
    (inside,) = listen_in(netns, 0, ["127.0.0.1"])
    target = inside.getsockname()[1]
    _serve_once(inside, b"netns:")
    with pytest.raises(ConnectionRefusedError):  # the server is not the host's
        _ask("127.0.0.1", target)
    port = free_port()
    with _forward("publish", netns, "127.0.0.1", str(port), "127.0.0.1", str(target)):
        assert _ask("127.0.0.1", port) == b"netns:ping"
