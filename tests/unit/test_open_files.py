"""Descriptors under a flood of idle connections (issue 26 item 9), in subprocesses with a low limit.

1,100 idle connections to the metrics port once left the operator unable to open a socket (the
soft limit was 1024 and every accepted connection held a descriptor until the client left). Now
the servers hold at most ``MAX_CONNECTIONS`` and the soft limit is raised to the hard one.
"""

from __future__ import annotations

import contextlib
import json
import pathlib
import resource
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Callable

LOW = 256
IDLE_CONNECTIONS = 400  # more than the child's limit

CHILD = textwrap.dedent(
    """
    import asyncio, socket, sys
    from nova_operator.runtime.health import HttpServer, health_routes

    async def main() -> None:
        server = HttpServer("127.0.0.1", 0, health_routes(lambda: True))
        await server.start()
        print(server.port, flush=True)
        await asyncio.to_thread(sys.stdin.readline)  # the parent holds its idle connections now
        opened = []
        try:
            for _ in range(20):
                opened.append(socket.socket())
            print("sockets ok", flush=True)
        except OSError as exc:
            print(f"sockets failed: {exc}", flush=True)

    asyncio.run(main())
    """
)


def limit(soft: int, hard: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return apply


def test_hundreds_of_idle_connections_leave_the_process_able_to_open_sockets() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=limit(LOW, LOW),
    )
    held: list[socket.socket] = []
    try:
        assert child.stdin is not None
        assert child.stdout is not None
        port = int(child.stdout.readline())
        for _ in range(IDLE_CONNECTIONS):
            try:
                held.append(socket.create_connection(("127.0.0.1", port), timeout=2))
            except OSError:
                break  # the backlog is full: the child is not accepting any more
        # Accepts are in order: once a later connection is answered or closed, the idle ones
        # before it have been accepted (and, over the cap, closed).
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=5) as last:
            last.settimeout(5)
            last.recv(1)
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "sockets ok"
        assert child.wait(10) == 0
    finally:
        for s in held:
            s.close()
        if child.poll() is None:
            child.kill()
            child.wait()
        for pipe in (child.stdin, child.stdout):
            if pipe is not None:
                pipe.close()


def test_the_soft_open_files_limit_is_raised_to_the_hard_one_at_start(tmp_path: pathlib.Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        "clusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n"
        "users:\n- name: u\n  user:\n    token: t\n"
        "contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n"
        "current-context: c\n"
    )
    hard = min(4096, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
    args = [f"--kubeconfig={kubeconfig}", "--log-format=json", "--metrics-bind-address=0"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "nova_operator", *args, "--health-probe-bind-address=0"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        preexec_fn=limit(LOW, hard),
    )
    try:
        assert proc.stderr is not None
        started = json.loads(proc.stderr.readline())
        assert started["msg"] == "starting"
        assert started["open_files_limit"] == hard
        assert started["open_files_limit_raised_from"] == LOW
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        if proc.stderr is not None:
            proc.stderr.close()
