"""A real MariaDB server (Debian's ``mariadb-server``) and the statements the MariaDB operator runs.

``MariaDBServer.start()`` initialises a data directory once (``mariadb-install-db``) and runs
``mariadbd`` as root on ``address:port`` with a Unix socket in the work directory; root signs in over
that socket only. The statement helpers are what the mariadb-operator's Database, User and Grant
controllers do on the server: ``CREATE DATABASE ... CHARACTER SET ... COLLATE ...``,
``CREATE USER ... IDENTIFIED BY ... WITH MAX_USER_CONNECTIONS n``, ``GRANT ...``, and the drops.

With ``tls`` (a CA, a certificate and a key) the server offers TLS on its TCP port: the CA verifies
client certificates (``REQUIRE X509`` users), ``use_certificate`` swaps the server's certificate in
place (``FLUSH SSL``), and ``require_secure_transport`` refuses every TCP client that does not use TLS.

Identifiers are quoted with backticks (doubled inside) and strings with single quotes (doubled,
backslashes doubled), so any name or password the API server admits reaches the server literally.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from simcluster.realtier.services.pki import TLSFiles
from simcluster.realtier.services.procs import ServerProcess, ServiceError, run, wait_until

# Enough for every role's pools of a few Novas (the rendered caps are per user).
MAX_CONNECTIONS = 1000

Require = Literal["NONE", "SSL", "X509"]
_REQUIRE: dict[Require, str] = {"NONE": "NONE", "SSL": "SSL", "X509": "X509"}


def ident(name: str) -> str:
    """A backtick-quoted identifier."""
    return "`" + name.replace("`", "``") + "`"


def literal(value: str) -> str:
    """A single-quoted string literal (the server's default sql_mode: backslash escapes apply)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def account(user: str, host: str = "%") -> str:
    return f"{literal(user)}@{literal(host)}"


@dataclass
class MariaDBServer(ServerProcess):
    address: str = "127.0.0.1"
    port: int = 3306
    start_timeout: float = 60.0
    tls: TLSFiles | None = None
    require_secure_transport: bool = False

    @property
    def datadir(self) -> pathlib.Path:
        return self.workdir / "data"

    @property
    def socket(self) -> pathlib.Path:
        return self.workdir / "mysqld.sock"

    @property
    def tls_dir(self) -> pathlib.Path:
        return self.workdir / "tls"

    def _tls_args(self) -> list[str]:
        if self.tls is None:
            if self.require_secure_transport:
                raise ServiceError("require_secure_transport needs tls")
            return []
        placed = self.tls.install(self.tls_dir)
        args = [f"--ssl-ca={placed.ca}", f"--ssl-cert={placed.cert}", f"--ssl-key={placed.key}"]
        if self.require_secure_transport:
            args.append("--require-secure-transport=ON")
        return args

    def use_certificate(self, tls: TLSFiles) -> None:
        """Serve ``tls`` from now on (new connections), without a restart: ``FLUSH SSL``."""
        if self.tls is None:
            raise ServiceError("the server was started without TLS")
        self.tls = tls
        tls.install(self.tls_dir)
        self.sql("FLUSH SSL")

    def start(self) -> MariaDBServer:
        if shutil.which("mariadbd") is None and not pathlib.Path("/usr/sbin/mariadbd").exists():
            raise ServiceError("mariadbd is not installed (Debian package mariadb-server)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        if not (self.datadir / "mysql").is_dir():
            run(
                [
                    "mariadb-install-db",
                    "--no-defaults",
                    "--user=root",
                    f"--datadir={self.datadir}",
                    "--auth-root-authentication-method=normal",
                    "--skip-test-db",
                ],
                timeout=120,
            )
        self._child = self._spawner.spawn(
            "mariadbd",
            [
                "/usr/sbin/mariadbd",
                "--no-defaults",
                "--user=root",
                f"--datadir={self.datadir}",
                f"--socket={self.socket}",
                f"--port={self.port}",
                f"--bind-address={self.address}",
                f"--pid-file={self.workdir / 'mysqld.pid'}",
                f"--max-connections={MAX_CONNECTIONS}",
                "--innodb-buffer-pool-size=128M",
                "--innodb-flush-log-at-trx-commit=0",
                "--skip-name-resolve",
                "--character-set-server=utf8mb4",
                "--collation-server=utf8mb4_general_ci",
                *self._tls_args(),
            ],
        )
        wait_until(self._pings, self._child, what="mariadbd", timeout=self.start_timeout)
        return self

    def restart(self) -> None:
        self.stop()
        self.start()

    def _pings(self) -> bool:
        proc = subprocess.run(
            ["mariadb-admin", "--no-defaults", f"--socket={self.socket}", "-uroot", "ping"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        return proc.returncode == 0

    # -- statements ------------------------------------------------------------------------

    def sql(self, statement: str, *, database: str | None = None) -> list[list[str]]:
        """Run statements as root over the socket; the rows of the last result, tab-split."""
        argv = [
            "mariadb",
            "--no-defaults",
            f"--socket={self.socket}",
            "-uroot",
            "--batch",
            "--skip-column-names",
        ]
        if database:
            argv.append(f"--database={database}")
        proc = subprocess.run(
            [*argv, "-e", statement],
            capture_output=True,
            check=False,
        )
        if proc.returncode != 0:
            # the statement may hold a password: report the server's error only
            # the client echoes a failed statement, which may hold a password: keep the error line only
            # and the error line quotes it ("near '...'"): keep the code and the text before any quote
            errors = [
                ln for ln in proc.stderr.decode(errors="replace").splitlines() if ln.startswith("ERROR")
            ]
            first = errors[-1].split("'", 1)[0].strip() if errors else f"exit {proc.returncode}"
            raise ServiceError(f"mariadb: {first}")
        return [line.split("\t") for line in proc.stdout.decode().splitlines()]

    def login(self, user: str, password: str, *, database: str | None = None) -> str | None:
        """None when ``user`` signs in over TCP with ``password``, else the server's refusal."""
        argv = [
            "mariadb",
            "--no-defaults",
            f"--host={self.address}",
            f"--port={self.port}",
            f"--user={user}",
            "--batch",
            "-e",
            "SELECT 1",
        ]
        if database:
            argv.append(f"--database={database}")
        proc = subprocess.run(
            argv,
            env={"MYSQL_PWD": password, "PATH": "/usr/bin:/bin"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            check=False,
        )
        return None if proc.returncode == 0 else proc.stderr.decode(errors="replace").strip()

    def create_database(
        self, name: str, *, charset: str = "utf8", collation: str = "utf8_general_ci"
    ) -> None:
        self.sql(
            f"CREATE DATABASE IF NOT EXISTS {ident(name)} "
            f"CHARACTER SET {ident(charset)} COLLATE {ident(collation)}"
        )

    def drop_database(self, name: str) -> None:
        self.sql(f"DROP DATABASE IF EXISTS {ident(name)}")

    def offers_tls(self) -> bool:
        """The server's ``have_ssl``: YES once its TLS files loaded."""
        return self.sql("SHOW GLOBAL VARIABLES LIKE 'have_ssl'") == [["have_ssl", "YES"]]

    def databases(self) -> set[str]:
        return {row[0] for row in self.sql("SHOW DATABASES")}

    def database_charset(self, name: str) -> tuple[str, str]:
        rows = self.sql(
            "SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA "
            f"WHERE SCHEMA_NAME = {literal(name)}"
        )
        if not rows:
            raise ServiceError(f"no database {name}")
        return rows[0][0], rows[0][1]

    def ensure_user(
        self,
        name: str,
        password: str,
        *,
        max_connections: int = 0,
        host: str = "%",
        require: Require | None = None,
    ) -> None:
        """Create the user or set its password and connection cap (what a User's reconcile does).

        ``require`` sets what the user's connections must use (``SSL``: TLS, ``X509``: TLS with a
        client certificate the server's CA signed, ``NONE``: nothing); None leaves it as it is."""
        acct = account(name, host)
        tls = f"REQUIRE {_REQUIRE[require]} " if require is not None else ""
        self.sql(
            f"CREATE USER IF NOT EXISTS {acct} IDENTIFIED BY {literal(password)}; "
            f"ALTER USER {acct} IDENTIFIED BY {literal(password)} "
            f"{tls}WITH MAX_USER_CONNECTIONS {int(max_connections)}"
        )

    def drop_user(self, name: str, host: str = "%") -> None:
        self.sql(f"DROP USER IF EXISTS {account(name, host)}")

    def users(self) -> set[str]:
        return {row[0] for row in self.sql("SELECT User FROM mysql.user")}

    def max_user_connections(self, name: str, host: str = "%") -> int:
        rows = self.sql(
            f"SELECT max_user_connections FROM mysql.user WHERE User={literal(name)} AND Host={literal(host)}"
        )
        if not rows:
            raise ServiceError(f"no user {name}")
        return int(rows[0][0])

    def grant(
        self,
        privileges: Sequence[str],
        database: str,
        table: str,
        user: str,
        *,
        host: str = "%",
        grant_option: bool = False,
    ) -> None:
        privs = ", ".join(p.upper() for p in privileges) or "USAGE"
        db = "*" if database == "*" else ident(database)
        tbl = "*" if table == "*" else ident(table)
        option = " WITH GRANT OPTION" if grant_option else ""
        self.sql(f"GRANT {privs} ON {db}.{tbl} TO {account(user, host)}{option}")

    def revoke_all(self, database: str, table: str, user: str, *, host: str = "%") -> None:
        db = "*" if database == "*" else ident(database)
        tbl = "*" if table == "*" else ident(table)
        for what in ("ALL PRIVILEGES", "GRANT OPTION"):
            try:
                self.sql(f"REVOKE {what} ON {db}.{tbl} FROM {account(user, host)}")
            except ServiceError as exc:
                if "1141" not in str(exc) and "1147" not in str(exc) and "1133" not in str(exc):
                    raise  # 1141/1147: no such grant, 1133: no such user: nothing to revoke

    def connections_of(self, user: str) -> int:
        rows = self.sql(f"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER={literal(user)}")
        return int(rows[0][0]) if rows else 0
