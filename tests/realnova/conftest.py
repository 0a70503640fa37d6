"""Fixtures of the real-Nova tier: the real backing servers, started once per session.

A missing Debian package fails these tests (``tools/realnova/install.sh`` installs them; CI runs it):
the real tier is never skipped. The servers speak TLS too (``pki``: a CA, their certificate, a
client certificate and the certificates a verifying client must refuse).
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest
from catalogs.generate import venv_dir
from simcluster.realservices.backends import RealBackends
from simcluster.realservices.pki import PKI, make_pki

# The release whose nova venv runs the clients nova uses (oslo.db, SQLAlchemy, PyMySQL, kombu).
NOVA_RELEASE = "2026.1"


@pytest.fixture(scope="session")
def nova_python() -> pathlib.Path:
    """The interpreter of that release's nova venv (``tools/catalogs/ensure_venvs.sh`` makes it)."""
    python = venv_dir(NOVA_RELEASE) / "bin" / "python"
    if not python.exists():
        pytest.fail(f"no nova venv for {NOVA_RELEASE} ({python}): run tools/catalogs/ensure_venvs.sh")
    return python


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    """Server certificates for ``localhost`` and ``127.0.0.1`` (where the backends listen)."""
    return make_pki(pathlib.Path(tmp_path_factory.mktemp("pki")), dns=("localhost",), ips=("127.0.0.1",))


@pytest.fixture(scope="session")
def backends(tmp_path_factory: pytest.TempPathFactory, pki: PKI) -> Iterator[RealBackends]:
    servers = RealBackends(pathlib.Path(tmp_path_factory.mktemp("backends")), pki=pki).start()
    try:
        yield servers
    finally:
        servers.stop()
