"""The real MariaDB and RabbitMQ over TLS, with the test PKI, to the clients nova uses.

Database clients are nova's own (oslo.db's engine: SQLAlchemy's pymysql dialect, PyMySQL) run in
the nova venv by ``dbprobe``; the broker client is kombu with the ``ssl`` options oslo.messaging
builds from ``[oslo_messaging_rabbit] ssl``/``ssl_ca_file``/``ssl_cert_file``/``ssl_key_file``.
"""

from __future__ import annotations

import json
import pathlib
import ssl
import subprocess
import textwrap
from typing import Any

from simcluster.platform.controlplane import free_port
from simcluster.realtier.services.backends import RealBackends
from simcluster.realtier.services.dbprobe import probe
from simcluster.realtier.services.mariadb import MariaDBServer
from simcluster.realtier.services.pki import PKI
from simcluster.realtier.services.rabbitmq import amqp_answers


def _url(server: MariaDBServer, user: str, password: str, **query: str) -> str:
    params = "&".join(f"{k}={v}" for k, v in {"charset": "utf8", **query}.items())
    return f"mysql+pymysql://{user}:{password}@{server.address}:{server.port}/?{params}"


def test_mariadb_serves_tls_that_a_pymysql_client_verifies_against_the_ca(
    backends: RealBackends, pki: PKI, nova_python: pathlib.Path
) -> None:
    db = backends.mariadb
    assert db.offers_tls()
    db.ensure_user("rt_tls_any", "pw-any")
    try:
        verified, other_ca, plaintext = probe(
            nova_python,
            [
                _url(db, "rt_tls_any", "pw-any", ssl_ca=str(pki.ca.cert)),
                _url(db, "rt_tls_any", "pw-any", ssl_ca=str(pki.other_ca.cert)),
                _url(db, "rt_tls_any", "pw-any"),
            ],
        )
    finally:
        db.drop_user("rt_tls_any")
    # a CA and PyMySQL's default hostname check: the server's certificate names 127.0.0.1
    assert verified.summary == "TLS", verified.error
    assert other_ca.summary == "refused"
    assert "CERTIFICATE_VERIFY_FAILED" in other_ca.error
    assert plaintext.summary == "plaintext"  # TLS is offered, not required, to a user without REQUIRE


def test_a_require_x509_user_needs_tls_and_a_client_certificate_of_the_ca(
    backends: RealBackends, pki: PKI, nova_python: pathlib.Path
) -> None:
    db = backends.mariadb
    db.ensure_user("rt_tls_x509", "pw-x509", require="X509")
    ca, cert, key = str(pki.ca.cert), str(pki.client.cert), str(pki.client.key)
    try:
        with_cert, without_cert, plaintext = probe(
            nova_python,
            [
                _url(db, "rt_tls_x509", "pw-x509", ssl_ca=ca, ssl_cert=cert, ssl_key=key),
                _url(db, "rt_tls_x509", "pw-x509", ssl_ca=ca),
                _url(db, "rt_tls_x509", "pw-x509"),
            ],
        )
        assert db.sql("SELECT ssl_type FROM mysql.user WHERE User='rt_tls_x509'") == [["X509"]]
        db.ensure_user("rt_tls_x509", "pw-x509")  # require=None: the requirement stays
        assert db.sql("SELECT ssl_type FROM mysql.user WHERE User='rt_tls_x509'") == [["X509"]]
    finally:
        db.drop_user("rt_tls_x509")
    assert with_cert.summary == "TLS", with_cert.error
    for refused in (without_cert, plaintext):
        assert refused.summary == "refused"
        assert "1045" in refused.error  # Access denied


def test_require_secure_transport_refuses_plaintext_clients(
    tmp_path: pathlib.Path, pki: PKI, nova_python: pathlib.Path
) -> None:
    db = MariaDBServer(
        tmp_path / "db", port=free_port(), tls=pki.server_files(), require_secure_transport=True
    ).start()
    try:
        assert db.sql("SHOW GLOBAL VARIABLES LIKE 'require_secure_transport'") == [
            ["require_secure_transport", "ON"]
        ]
        db.ensure_user("rt_any", "pw-any")
        tls, plaintext = probe(
            nova_python, [_url(db, "rt_any", "pw-any", ssl_ca=str(pki.ca.cert)), _url(db, "rt_any", "pw-any")]
        )
    finally:
        db.stop()
    assert tls.summary == "TLS", tls.error
    assert plaintext.summary == "refused"
    assert "1045" in plaintext.error  # MariaDB 10.11 answers an insecure transport with Access denied


def test_the_broker_answers_amqp_over_tls_to_a_client_of_its_ca(backends: RealBackends, pki: PKI) -> None:
    mq = backends.rabbitmq
    assert mq.tls is not None
    assert amqp_answers(mq.address, mq.tls_port, tls=ssl.create_default_context(cafile=str(pki.ca.cert)))
    other = ssl.create_default_context(cafile=str(pki.other_ca.cert))
    assert not amqp_answers(mq.address, mq.tls_port, tls=other)  # the handshake fails
    assert amqp_answers(mq.address, mq.port)  # the plain listener stays


# kombu with the ssl options oslo.messaging's rabbit driver builds (_fetch_ssl_params): a CA means
# CERT_REQUIRED; no server_hostname, so amqp checks the chain but not the name.
KOMBU_LOGIN = textwrap.dedent(
    """
    import json, ssl, sys
    import kombu
    args = json.load(sys.stdin)
    params = {"ca_certs": args["ca"], "cert_reqs": ssl.CERT_REQUIRED}
    if args.get("cert"):
        params.update(certfile=args["cert"], keyfile=args["key"])
    conn = kombu.Connection(args["url"], ssl=params, connect_timeout=10)
    try:
        conn.connect()
        sock = conn.connection.transport.sock
        print(json.dumps({"ok": True, "cipher": sock.cipher()[0], "peer": sock.getpeercert()["subject"]}))
    except Exception as exc:
        print(json.dumps({"ok": False, "error": type(exc).__name__ + ": " + str(exc)}))
    finally:
        conn.release()
    """
)


def _kombu_login(python: pathlib.Path, args: dict[str, str]) -> dict[str, Any]:
    proc = subprocess.run(
        [str(python), "-c", KOMBU_LOGIN], input=json.dumps(args), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def test_nova_messaging_client_logs_in_over_tls(
    backends: RealBackends, pki: PKI, nova_python: pathlib.Path
) -> None:
    mq = backends.rabbitmq
    backends.ensure_broker_user("rt_tls_user", "tls-password")
    url = f"amqp://rt_tls_user:tls-password@{mq.address}:{mq.tls_port}//"
    try:
        ca_only = _kombu_login(nova_python, {"url": url, "ca": str(pki.ca.cert)})
        mutual = _kombu_login(
            nova_python,
            {"url": url, "ca": str(pki.ca.cert), "cert": str(pki.client.cert), "key": str(pki.client.key)},
        )
        other_ca = _kombu_login(nova_python, {"url": url, "ca": str(pki.other_ca.cert)})
    finally:
        backends.delete_broker_user("rt_tls_user")
    assert ca_only["ok"], ca_only
    assert ca_only["cipher"]
    assert ["commonName", "server"] in [list(rdn) for rdns in ca_only["peer"] for rdn in rdns]
    assert mutual["ok"], mutual
    assert not other_ca["ok"]
    assert "CERTIFICATE_VERIFY_FAILED" in str(other_ca["error"])


def test_nova_messaging_client_checks_the_brokers_ca_but_not_its_name(
    backends: RealBackends, pki: PKI, nova_python: pathlib.Path
) -> None:
    """oslo.messaging hands kombu no ``server_hostname``: a certificate of the CA for another name passes.

    Recorded as measured (oslo.messaging has no option for it); a client that checks names refuses it."""
    mq = backends.rabbitmq
    backends.ensure_broker_user("rt_tls_user", "tls-password")
    url = f"amqp://rt_tls_user:tls-password@{mq.address}:{mq.tls_port}//"
    mq.use_certificate(pki.server_files(pki.wrong_name))
    try:
        login = _kombu_login(nova_python, {"url": url, "ca": str(pki.ca.cert)})
        name_checked = amqp_answers(mq.address, mq.tls_port, tls=mq.client_context())
    finally:
        mq.use_certificate(pki.server_files())
        backends.delete_broker_user("rt_tls_user")
    assert login["ok"], login
    assert ["commonName", "wrong-name"] in [list(rdn) for rdns in login["peer"] for rdn in rdns]
    assert not name_checked
    assert amqp_answers(mq.address, mq.tls_port, tls=mq.client_context())  # restored
