"""Connect to database URLs the way nova does, from a nova venv, and say what each connection was.

``probe(python, urls)`` runs this file with ``python`` (a nova venv's interpreter: oslo.db,
SQLAlchemy and PyMySQL as nova uses them). For each URL the script makes an engine with oslo.db's
``create_engine`` (what nova's enginefacade calls; no connect retries), connects once and reads the
session's ``Ssl_cipher``: empty when the session is plaintext. A refused connection reports the
driver's error code and message with the URL's password removed.

The script part imports nothing outside the nova venv's packages and the standard library.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Outcome:
    connected: bool
    cipher: str = ""
    """The session's TLS cipher; empty for a plaintext session (or a refused one)."""
    error: str = ""

    @property
    def summary(self) -> str:
        """``TLS``, ``plaintext`` or ``refused``."""
        if not self.connected:
            return "refused"
        return "TLS" if self.cipher else "plaintext"


def probe(python: pathlib.Path, urls: Sequence[str], *, timeout: float = 120.0) -> list[Outcome]:
    proc = subprocess.run(
        [str(python), __file__],
        input=json.dumps(list(urls)).encode(),
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace")[-2000:]
        raise RuntimeError(f"dbprobe exited {proc.returncode}: {tail}")
    return [Outcome(**item) for item in json.loads(proc.stdout)]


def _connect(url: str) -> dict[str, Any]:  # pragma: no cover - runs in the nova venv
    import sqlalchemy
    from oslo_db.sqlalchemy import engines

    password = sqlalchemy.engine.make_url(url).password or ""
    engine = engines.create_engine(url, max_retries=0)
    try:
        with engine.connect() as conn:
            row = conn.exec_driver_sql("SHOW SESSION STATUS LIKE 'Ssl_cipher'").fetchone()
        return {"connected": True, "cipher": row[1] if row else ""}
    except Exception as exc:  # every failure is an outcome
        orig = getattr(exc, "orig", exc)
        text = f"{type(orig).__name__}: {orig}"
        if password:
            text = text.replace(password, "****")
        return {"connected": False, "error": text[:500]}
    finally:
        engine.dispose()


def _main() -> None:  # pragma: no cover - runs in the nova venv
    urls = json.load(sys.stdin)
    json.dump([_connect(url) for url in urls], sys.stdout)


if __name__ == "__main__":
    _main()
