"""Fixtures of the real-Nova tier: the real backing servers, started once per session.

A missing Debian package fails these tests (``tools/realnova/install.sh`` installs them; CI runs it):
the real tier is never skipped.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest
from simcluster.realservices.backends import RealBackends


@pytest.fixture(scope="session")
def backends(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealBackends]:
    servers = RealBackends(pathlib.Path(tmp_path_factory.mktemp("backends"))).start()
    try:
        yield servers
    finally:
        servers.stop()
