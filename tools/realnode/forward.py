"""A TCP forwarder from a port on another network namespace's loopback to the same port on ours.

``python -m realnode.forward NETNS_PATH PORT`` listens on ``127.0.0.1:PORT`` inside the network
namespace at ``NETNS_PATH`` (e.g. ``/proc/<pid>/ns/net``) and connects each client to
``127.0.0.1:PORT`` in the namespace it was started in. The nodes' kubelets and kube-proxy reach the
host's API server this way, at the address its serving certificate names, without any link, route or
rule between the namespaces. It prints ``ready`` once listening.

The process enters the other namespace only to create its listening socket (a socket stays in the
namespace it was made in), then returns to its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import socket
import sys

CLONE_NEWNET = 0x40000000


def setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def listen_in(netns: str, port: int) -> socket.socket:
    """A listening socket on ``127.0.0.1:port`` of the namespace at ``netns``."""
    own = os.open("/proc/self/ns/net", os.O_RDONLY)
    other = os.open(netns, os.O_RDONLY)
    try:
        setns(other)
        try:
            return socket.create_server(("127.0.0.1", port), backlog=128)
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


async def serve(server_socket: socket.socket, port: int) -> None:
    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(_pipe(client_r, up_w), _pipe(up_r, client_w))
        for w in (client_w, up_w):
            w.close()
            with contextlib.suppress(ConnectionError, OSError):
                await w.wait_closed()

    server = await asyncio.start_server(handle, sock=server_socket)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> int:
    netns, port = argv[0], int(argv[1])
    asyncio.run(serve(listen_in(netns, port), port))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
