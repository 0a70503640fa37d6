"""TCP forwarding between the host's network namespace and the nodes'.

``python -m realnode.forward listen NETNS_PATH PORT [ADDRESS...]`` listens on ``ADDRESS:PORT``
(``127.0.0.1`` by default) inside the network namespace at ``NETNS_PATH`` (e.g. ``/proc/<pid>/ns/net``)
and connects each client to ``127.0.0.1:PORT`` in the namespace it was started in. The nodes' kubelets
and kube-proxy reach the host's API server this way, at the address its serving certificate names,
and pods through the ``kubernetes`` Service, without any link, route or rule between the namespaces.

``python -m realnode.forward relay NETNS_PATH ADDRESS PORT... [--to UPSTREAM]`` listens on
``ADDRESS:PORT`` for each port inside the namespace and connects each client to ``UPSTREAM:PORT``
(default the same ``ADDRESS``) in the namespace it was started in: servers on the host (at an address
of the host's own) are reached at that same address from the nodes, so one EndpointSlice serves both
sides; or, with ``--to 127.0.0.1``, servers on the host's loopback are
reached at ``ADDRESS`` (an address of the nodes' namespace only) from the nodes and their pods.

``python -m realnode.forward publish NETNS_PATH ADDRESS PORT TARGET TARGET_PORT`` is the other way
round: it listens on ``ADDRESS:PORT`` of the namespace it was started in (the host's loopback) and
connects each client to ``TARGET:TARGET_PORT`` inside the other (e.g. a Service's ClusterIP, which
the nodes' kube-proxy rules lead on): what runs in the cluster is reached from the user's shell.

``python -m realnode.forward connect NETNS_PATH NAME`` is an HTTP CONNECT proxy on the abstract unix
socket ``@NAME`` of the namespace it was started in, whose connections are made inside the other: the
API server's egress selector sends its traffic to the kubelets (logs, exec, port-forward) there.

Each prints ``ready`` once listening. A socket stays in the namespace it was made in: the process
enters the other namespace only to make the sockets that belong there.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import os
import socket
import sys

CLONE_NEWNET = 0x40000000


def setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def enter(netns: str) -> None:
    """This process into the namespace at ``netns``: from now on every socket it makes (its
    connections) is made there; the sockets it made before stay where they were made."""
    fd = os.open(netns, os.O_RDONLY)
    try:
        setns(fd)
    finally:
        os.close(fd)


def listen_in(netns: str, port: int, addresses: list[str]) -> list[socket.socket]:
    """Listening sockets on ``address:port`` of the namespace at ``netns``."""
    own = os.open("/proc/self/ns/net", os.O_RDONLY)
    other = os.open(netns, os.O_RDONLY)
    try:
        setns(other)
        try:
            return [socket.create_server((address, port), backlog=128) for address in addresses]
        finally:
            setns(own)
    finally:
        os.close(own)
        os.close(other)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()


async def serve(server_sockets: list[socket.socket], port: int, upstream: str = "127.0.0.1") -> None:
    """Each listening socket's clients to ``upstream:port``."""
    await serve_all([(sock, upstream, port) for sock in server_sockets])


async def serve_all(routes: list[tuple[socket.socket, str, int]]) -> None:
    """Each listening socket's clients to its own ``host:port``, from this process's namespace."""

    async def handle(
        host: str, port: int, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter
    ) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(host, port)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(_pipe(client_r, up_w), _pipe(up_r, client_w))
        for w in (client_w, up_w):
            w.close()
            with contextlib.suppress(ConnectionError, OSError):
                await w.wait_closed()

    servers = [
        await asyncio.start_server(functools.partial(handle, host, port), sock=sock)
        for sock, host, port in routes
    ]
    print("ready", flush=True)
    await asyncio.gather(*(server.serve_forever() for server in servers))


async def serve_connect(server_socket: socket.socket) -> None:
    """HTTP CONNECT host:port -> a TCP connection from the namespace this process is in."""

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            head = await client_r.readuntil(b"\r\n\r\n")
            method, target = head.split(b"\r\n", 1)[0].decode().split(" ")[:2]
            host, port = target.rsplit(":", 1)
            if method != "CONNECT":
                raise ValueError(method)
            up_r, up_w = await asyncio.open_connection(host.strip("[]"), int(port))
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            with contextlib.suppress(ConnectionError, OSError):
                client_w.write(b"HTTP/1.1 502 Bad Gateway\r\n\r\n")
            client_w.close()
            return
        client_w.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await asyncio.gather(_pipe(client_r, up_w), _pipe(up_r, client_w))
        for w in (client_w, up_w):
            w.close()
            with contextlib.suppress(ConnectionError, OSError):
                await w.wait_closed()

    server = await asyncio.start_unix_server(handle, sock=server_socket)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> int:
    mode, netns = argv[0], argv[1]
    if mode == "listen":
        port = int(argv[2])
        asyncio.run(serve(listen_in(netns, port, argv[3:] or ["127.0.0.1"]), port))
    elif mode == "relay":
        rest = argv[3:]
        upstream = argv[2]
        if "--to" in rest:
            at = rest.index("--to")
            upstream, rest = rest[at + 1], rest[:at] + rest[at + 2 :]
        address, ports = argv[2], [int(p) for p in rest]
        routes = [(listen_in(netns, p, [address])[0], upstream, p) for p in ports]
        asyncio.run(serve_all(routes))
    elif mode == "publish":
        address, port, target, target_port = argv[2], int(argv[3]), argv[4], int(argv[5])
        listener = socket.create_server((address, port), backlog=128)  # here, before entering
        enter(netns)
        asyncio.run(serve_all([(listener, target, target_port)]))
    elif mode == "connect":
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind("\0" + argv[2])  # abstract: no file, gone with the process
        listener.listen(128)
        enter(netns)
        asyncio.run(serve_connect(listener))
    else:
        raise SystemExit(f"unknown mode {mode}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
