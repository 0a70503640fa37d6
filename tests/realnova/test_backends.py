"""The real MariaDB, RabbitMQ and memcached servers, and the statements the stand-in operators run."""

from __future__ import annotations

import os
import pathlib
import signal
import socket

import pytest
from simcluster.platform.controlplane import free_port
from simcluster.realtier.services.backends import RealBackends
from simcluster.realtier.services.mariadb import MariaDBServer, ident, literal
from simcluster.realtier.services.procs import ServiceError

# A password the API server admits that SQL quoting must carry literally.
HARD_PASSWORD = "p'a\"s$s\\w`o;r--d"


def test_identifiers_and_literals_are_quoted() -> None:
    assert ident("a`b") == "`a``b`"
    assert literal("it's \\ here") == "'it''s \\\\ here'"


def test_database_has_the_charset_and_collation_asked_for(backends: RealBackends) -> None:
    db = backends.mariadb
    db.create_database("rt_charset", charset="utf8", collation="utf8_general_ci")
    try:
        # utf8 is MariaDB 10.11's alias of utf8mb3
        assert db.database_charset("rt_charset") == ("utf8mb3", "utf8mb3_general_ci")
    finally:
        db.drop_database("rt_charset")
    assert "rt_charset" not in db.databases()


def test_user_signs_in_with_its_password_only_and_grants_decide_the_schema(backends: RealBackends) -> None:
    db = backends.mariadb
    db.create_database("rt_grants", charset="utf8", collation="utf8_general_ci")
    backends.ensure_user("rt_user", HARD_PASSWORD, max_connections=3, host="%")
    try:
        assert db.max_user_connections("rt_user") == 3
        assert db.login("rt_user", HARD_PASSWORD) is None
        refused = db.login("rt_user", "wrong")
        assert refused is not None
        assert "Access denied" in refused
        denied = db.login("rt_user", HARD_PASSWORD, database="rt_grants")
        assert denied is not None
        assert "1044" in denied
        backends.grant(["ALL PRIVILEGES"], "rt_grants", "*", "rt_user", host="%", grant_option=False)
        assert db.login("rt_user", HARD_PASSWORD, database="rt_grants") is None
        # a rotation: the old password is refused by the server from then on
        backends.ensure_user("rt_user", "rotated", max_connections=5, host="%")
        assert db.login("rt_user", "rotated", database="rt_grants") is None
        assert db.login("rt_user", HARD_PASSWORD) is not None
        assert db.max_user_connections("rt_user") == 5
        backends.revoke_all("rt_grants", "*", "rt_user", host="%")
        backends.revoke_all("rt_grants", "*", "rt_user", host="%")  # nothing left to revoke: no error
        assert db.login("rt_user", "rotated", database="rt_grants") is not None
    finally:
        backends.drop_user("rt_user", "%")
        db.drop_database("rt_grants")
    assert "rt_user" not in db.users()
    backends.revoke_all("rt_grants", "*", "rt_user", host="%")  # user gone: no error


def test_a_failed_statement_does_not_echo_the_password(backends: RealBackends) -> None:
    with pytest.raises(ServiceError) as err:
        backends.mariadb.sql(f"CREATE USER 'x'@'%' IDENTIFIED BY '{HARD_PASSWORD[:3]}zz-secret-zz' BROKEN")
    assert "zz-secret-zz" not in str(err.value)
    assert "1064" in str(err.value)


def test_broker_user_is_created_rotated_and_deleted(backends: RealBackends) -> None:
    mq = backends.rabbitmq
    backends.ensure_broker_user("rt_default_user", "first-password")
    try:
        assert mq.authenticates("rt_default_user", "first-password")
        backends.ensure_broker_user("rt_default_user", "second-password")
        assert mq.authenticates("rt_default_user", "second-password")
        assert not mq.authenticates("rt_default_user", "first-password")
    finally:
        backends.delete_broker_user("rt_default_user")
    assert "rt_default_user" not in mq.users()
    assert not mq.authenticates("rt_default_user", "second-password")


def test_broker_accepts_amqp_connections(backends: RealBackends) -> None:
    mq = backends.rabbitmq
    with socket.create_connection((mq.address, mq.port), timeout=5) as s:
        s.sendall(b"AMQP\x00\x00\x09\x01")
        frame = s.recv(7)
    assert frame[:1] == b"\x01"  # a method frame: connection.start


def test_memcached_answers(backends: RealBackends) -> None:
    assert backends.memcached.stats_ok()


def _pids_in(workdir: pathlib.Path) -> list[int]:
    """Processes whose command line names ``workdir``."""
    found = []
    for proc in pathlib.Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if str(workdir).encode() in cmdline:
            found.append(int(proc.name))
    return found


def test_stopping_leaves_no_process_and_a_restart_keeps_the_data(tmp_path: pathlib.Path) -> None:
    server = MariaDBServer(tmp_path / "db", port=free_port()).start()
    try:
        server.create_database("rt_kept", charset="utf8", collation="utf8_general_ci")
        assert _pids_in(tmp_path)
        server.restart()
        assert "rt_kept" in server.databases()
    finally:
        server.stop()
    assert _pids_in(tmp_path) == []


def test_a_server_that_dies_at_start_is_reported_with_its_log(tmp_path: pathlib.Path) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        server = MariaDBServer(tmp_path / "db", port=taken.getsockname()[1], start_timeout=60)
        with pytest.raises(ServiceError, match="mariadbd exited"):
            server.start()
    finally:
        taken.close()
        server.stop()
    assert _pids_in(tmp_path) == []


def test_a_killed_broker_group_leaves_nothing(tmp_path: pathlib.Path) -> None:
    from simcluster.realtier.services.rabbitmq import RabbitMQServer

    mq = RabbitMQServer(
        tmp_path / "mq", port=free_port(), dist_port=free_port(), epmd_port=free_port(), start_timeout=120
    ).start()
    pids = _pids_in(tmp_path)
    assert pids
    mq.stop()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, signal.SIG_DFL)
    assert _pids_in(tmp_path) == []
    # what a stand-in does while a cluster is torn down: refused, so no rabbitmqctl VM starts an epmd
    with pytest.raises(ServiceError, match="is stopped"):
        mq.ensure_user("late", "password")
    with pytest.raises(ConnectionRefusedError):  # no epmd on the broker's port
        socket.create_connection(("127.0.0.1", mq.epmd_port), timeout=2).close()
