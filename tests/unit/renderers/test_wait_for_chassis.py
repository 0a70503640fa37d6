"""The pool's wait-for-chassis init script, run for real against OVSDB-speaking unix sockets.

The script is taken from the rendered DaemonSet and run as its container runs it: ``python3 -c``
as uid/gid 42424 (``setpriv``; Debian's /usr/bin/python3, which that user can read). The "OVSDB"
is a thread answering the script's ``transact`` on a real unix socket. Per spec the script
retries without limit; what it must say on every try is why it waits, an EACCES included.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from nova_operator.models.novacompute import NovaCompute
from nova_operator.renderers import compute_pool as cp

SYSTEM_PYTHON = "/usr/bin/python3"
ECHO = {"method": "echo", "params": [], "id": "echo"}


def _script() -> tuple[list[str], dict[str, str]]:
    pool = NovaCompute.model_validate(
        {
            "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
            "kind": "NovaCompute",
            "metadata": {"name": "rack8", "namespace": "openstack", "uid": "u1"},
            "spec": {"novaRef": {"name": "nova"}, "nodeSelector": {"pool": "rack8"}},
        }
    )
    inputs = cp.PoolInputs(
        image="ghcr.io/c5c3/nova-compute:2025.2",
        config_map="rack8-config-abcdef12",
        contract_secret="nova-compute-config",
        contract_hash="f" * 64,
    )
    ds = cp.daemonset(pool, inputs)
    assert ds is not None
    (wait,) = [c for c in ds["spec"]["template"]["spec"]["initContainers"] if c["name"] == "wait-for-chassis"]
    assert wait["securityContext"]["runAsUser"] == wait["securityContext"]["runAsGroup"] == 42424
    return wait["command"], {e["name"]: e["value"] for e in wait["env"]}


class _Ovsdb:
    """A unix socket that answers each transact with one Open_vSwitch row (after an echo request)."""

    def __init__(self, path: Path, system_id: bool = True) -> None:
        self.path = path
        self.system_id = system_id
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                request = json.loads(conn.recv(65536).decode())
                ids = [["system-id", "chassis-1"]] if self.system_id else []
                reply = {
                    "id": request["id"],
                    "result": [{"rows": [{"external_ids": ["map", ids]}]}],
                    "error": None,
                }
                conn.sendall((json.dumps(ECHO) + json.dumps(reply)).encode())

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def run_dir() -> Iterator[Path]:
    """A directory uid 42424 can traverse (pytest's own tmp_path is root's, mode 0700)."""
    path = Path(tempfile.mkdtemp(prefix="ovs-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


class _Running:
    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def next_line(self) -> str:
        try:
            return self.lines.get(timeout=60)
        except queue.Empty:
            pytest.fail(f"wait-for-chassis printed nothing (exit {self.proc.poll()})")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()  # the reader thread ends at EOF; the pipe is ours to close


def _as_openstack_user(command: list[str], socket_path: Path) -> tuple[list[str], dict[str, str]]:
    assert Path(SYSTEM_PYTHON).is_file(), f"{SYSTEM_PYTHON} is needed to run the script as uid 42424"
    assert command[0] == "python3"
    argv = ["setpriv", "--reuid=42424", "--regid=42424", "--clear-groups", SYSTEM_PYTHON, *command[1:]]
    return argv, {"PATH": "/usr/bin:/bin", "OVSDB_SOCKET": str(socket_path)}


def test_the_rendered_script_waits_for_the_default_socket_path() -> None:
    _, env = _script()
    assert env == {"OVSDB_SOCKET": "/run/openvswitch/db.sock"}


def test_a_socket_the_user_may_not_open_is_reported_as_such_then_the_wait_ends_once_it_may(
    run_dir: Path,
) -> None:
    command, _ = _script()
    path = run_dir / "db.sock"
    ovsdb = _Ovsdb(path)
    path.chmod(0o755)  # root's, like ovsdb-server's own socket: uid 42424 has no write, so no connect
    running = _Running(*_as_openstack_user(command, path))
    try:
        for _ in range(2):  # said on every try, not once
            line = running.next_line()
            assert line.startswith(
                "waiting for the OVN chassis (external_ids:system-id): permission denied on "
            )
            assert f"{path} for uid 42424 gid 42424" in line
        path.chmod(0o777)  # the node prerequisite met: the same process gets through
        assert running.proc.wait(timeout=60) == 0
    finally:
        running.stop()
        ovsdb.close()


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("missing", "does not exist (no Open vSwitch on this node yet)"),
        ("refused", "nothing answers on"),
        ("no-system-id", "no Open_vSwitch row has external_ids:system-id yet"),
    ],
)
def test_every_other_reason_to_wait_is_named(run_dir: Path, state: str, expected: str) -> None:
    command, _ = _script()
    path = run_dir / "db.sock"
    ovsdb = None
    if state == "refused":  # a socket file nobody listens on
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(str(path))
        stale.close()
    elif state == "no-system-id":
        ovsdb = _Ovsdb(path, system_id=False)
    os.chmod(run_dir, 0o755)
    if path.exists():
        path.chmod(0o777)
    running = _Running(*_as_openstack_user(command, path))
    try:
        assert expected in running.next_line()
        assert running.proc.poll() is None  # still waiting: the spec's retry has no upper limit
    finally:
        running.stop()
        if ovsdb is not None:
            ovsdb.close()


def test_a_chassis_with_a_system_id_ends_the_wait(run_dir: Path) -> None:
    command, _ = _script()
    path = run_dir / "db.sock"
    ovsdb = _Ovsdb(path)
    path.chmod(0o777)
    argv, env = _as_openstack_user(command, path)
    try:
        result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    finally:
        ovsdb.close()
    assert result.returncode == 0, result.stdout + result.stderr
