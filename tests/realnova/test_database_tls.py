"""Each database ``tls.mode`` as the operator renders its DSN, against a real MariaDB with TLS.

The DSN comes from the operator's renderer (``secrets.database_dsn``) for a brownfield Nova on the
test server; the files it names under ``/etc/nova-db-tls/cell/`` are the ones the pod would have
projected there (the CA and the client certificate and key of the test PKI), in a directory of the
test instead. nova's own client stack connects (``dbprobe``: oslo.db, SQLAlchemy's pymysql dialect,
PyMySQL, in the nova venv) while the server presents each certificate in turn.

Expected, per mode: ``disabled`` no TLS; ``prefer`` and ``require`` TLS without verification;
``verify-ca`` TLS with the CA checked, not the name; ``verify-full`` both. Against a server that
offers no TLS PyMySQL goes on in plaintext in every mode: only the server can refuse that.
"""

from __future__ import annotations

import pathlib
import shutil
from collections.abc import Iterator

import pytest
import yaml
from simcluster.platform.controlplane import free_port
from simcluster.realtier.services.dbprobe import Outcome, probe
from simcluster.realtier.services.mariadb import MariaDBServer
from simcluster.realtier.services.pki import PKI, KeyPair

from nova_operator.models.nova import Nova
from nova_operator.renderers import secrets
from nova_operator.renderers.pod_env import DB_TLS_DIR

SAMPLE = pathlib.Path(__file__).resolve().parents[2] / "config" / "samples" / "nova_full.yaml"
MODES = ("disabled", "prefer", "require", "verify-ca", "verify-full")
X509_USER, PLAIN_USER, PASSWORD = "nova_x509", "nova_plain", "tls-test-pw"


def row(*outcomes: str) -> dict[str, str]:
    return dict(zip(MODES, outcomes, strict=True))


# server certificate -> user -> mode -> outcome; one user has REQUIRE X509 (mutual TLS), one not
EXPECTED = {
    "server": {
        X509_USER: row("refused", "TLS", "TLS", "TLS", "TLS"),
        PLAIN_USER: row("plaintext", "TLS", "TLS", "TLS", "TLS"),
    },
    "wrong_name": {
        X509_USER: row("refused", "TLS", "TLS", "TLS", "refused"),
        PLAIN_USER: row("plaintext", "TLS", "TLS", "TLS", "refused"),
    },
    "foreign": {
        X509_USER: row("refused", "TLS", "TLS", "refused", "refused"),
        PLAIN_USER: row("plaintext", "TLS", "TLS", "refused", "refused"),
    },
}


def rendered_dsn(server: MariaDBServer, mode: str, user: str, mount: pathlib.Path) -> str:
    """The cell DSN the operator renders for ``mode``, its TLS files read from ``mount``."""
    raw = yaml.safe_load(SAMPLE.read_text())
    block = raw["spec"]["database"]
    block.update(host=server.address, port=server.port)
    block["tls"]["mode"] = mode
    dsn = secrets.database_dsn(Nova.model_validate(raw), "cell", username=user, password=PASSWORD)
    if mode != "disabled":
        assert f"{DB_TLS_DIR['cell']}/" in dsn
    return dsn.replace(f"{DB_TLS_DIR['cell']}/", f"{mount}/")


def _serve(server: MariaDBServer, x509: bool) -> None:
    server.create_database("nova")
    server.ensure_user(PLAIN_USER, PASSWORD, require="NONE")
    server.grant(["ALL PRIVILEGES"], "nova", "*", PLAIN_USER)
    if x509:
        server.ensure_user(X509_USER, PASSWORD, require="X509")
        server.grant(["ALL PRIVILEGES"], "nova", "*", X509_USER)


@pytest.fixture(scope="module")
def mount(tmp_path_factory: pytest.TempPathFactory, pki: PKI) -> pathlib.Path:
    """What the pod finds in its ``cell-db-tls`` volume: ``ca.crt``, ``tls.crt``, ``tls.key``."""
    directory = pathlib.Path(tmp_path_factory.mktemp("nova-db-tls"))
    shutil.copyfile(pki.ca.cert, directory / "ca.crt")
    shutil.copyfile(pki.client.cert, directory / "tls.crt")
    shutil.copyfile(pki.client.key, directory / "tls.key")
    return directory


@pytest.fixture(scope="module")
def tls_db(tmp_path_factory: pytest.TempPathFactory, pki: PKI) -> Iterator[MariaDBServer]:
    """A MariaDB of its own: the tests swap its certificate."""
    server = MariaDBServer(
        pathlib.Path(tmp_path_factory.mktemp("tls-db")), port=free_port(), tls=pki.server_files()
    ).start()
    try:
        _serve(server, x509=True)
        yield server
    finally:
        server.stop()


def _table(
    python: pathlib.Path, server: MariaDBServer, mount: pathlib.Path, users: tuple[str, ...]
) -> dict[str, dict[str, Outcome]]:
    urls = [rendered_dsn(server, mode, user, mount) for user in users for mode in MODES]
    outcomes = iter(probe(python, urls))
    return {user: {mode: next(outcomes) for mode in MODES} for user in users}


@pytest.mark.parametrize("certificate", list(EXPECTED))
def test_each_mode_connects_or_is_refused_as_its_name_says(
    tls_db: MariaDBServer, pki: PKI, mount: pathlib.Path, nova_python: pathlib.Path, certificate: str
) -> None:
    pair: KeyPair = getattr(pki, certificate)
    tls_db.use_certificate(pki.server_files(pair))
    try:
        table = _table(nova_python, tls_db, mount, (X509_USER, PLAIN_USER))
    finally:
        tls_db.use_certificate(pki.server_files())
    got = {user: {mode: o.summary for mode, o in row.items()} for user, row in table.items()}
    errors = {f"{user} {mode}": o.error for user, row in table.items() for mode, o in row.items() if o.error}
    assert got == EXPECTED[certificate], errors
    for user, row in table.items():
        for mode, outcome in row.items():
            if outcome.summary == "refused" and mode != "disabled":
                # refused by the client's verification, not by the server
                assert "CERTIFICATE_VERIFY_FAILED" in outcome.error, (user, mode, outcome.error)
            if outcome.summary == "refused" and mode == "disabled":
                assert "1045" in outcome.error  # REQUIRE X509: the server refuses the plaintext session


def test_no_mode_makes_pymysql_refuse_a_server_without_tls(
    tmp_path: pathlib.Path, mount: pathlib.Path, nova_python: pathlib.Path
) -> None:
    """PyMySQL starts TLS only when the server offers it: a server without TLS gets a plaintext session.

    Recorded as measured: refusing plaintext is the server's part (``REQUIRE SSL``/``X509``, or
    ``require_secure_transport``), which the mode cannot replace."""
    plain = MariaDBServer(tmp_path / "plain", port=free_port()).start()
    try:
        _serve(plain, x509=False)
        table = _table(nova_python, plain, mount, (PLAIN_USER,))
    finally:
        plain.stop()
    assert {mode: o.summary for mode, o in table[PLAIN_USER].items()} == dict.fromkeys(MODES, "plaintext")
