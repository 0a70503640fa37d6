"""tools/catalogs/ensure_venvs.sh reuses a cached venv only when it was built from what is wanted now.

The venv's marker names the nova version, the image contract's Python packages, the interpreter it
was made with and the hash of the release's constraints file; any change means a rebuild. The
interpreter is a stub here, so a rebuild shows as the "installing" line and the stub's failure,
with no network and no pip.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "tools" / "catalogs" / "ensure_venvs.sh"
CONSTRAINTS = REPO / "tools" / "catalogs" / "constraints-2026.1.txt"
STUB = """#!/bin/sh
# the image contract's package list is real; anything else (making a venv) fails on purpose
case "$1" in *image_contract.py) exec python3 "$@" ;; esac
# what the script asks to name the interpreter in the marker
if [ "$1" = "-c" ]; then echo "/usr/bin/python3.11 3.11.2"; exit 0; fi
echo "stub python: $*" >&2
exit 3
"""


STUB_PYTHON = "/usr/bin/python3.11 3.11.2"


def _marker(packages: str, constraints: bytes, python: str = STUB_PYTHON) -> str:
    return f"nova==33.0.2{packages} python={python} {hashlib.sha256(constraints).hexdigest()[:16]}"


def _run(cache: Path, marker: str) -> subprocess.CompletedProcess[str]:
    venv = cache / "2026.1"
    venv.mkdir(parents=True, exist_ok=True)
    (venv / ".installed").write_text(marker + "\n")
    (venv / "nova-opt-data.yaml").write_text("options: {}\n")
    stub = cache / "python"
    stub.write_text(STUB)
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "NOVA_VENV_CACHE": str(cache), "NOVA_VENV_PYTHON": str(stub)}
    return subprocess.run(
        ["bash", str(SCRIPT), "2026.1"], env=env, capture_output=True, text=True, timeout=60, check=False
    )


PACKAGES = " uWSGI==2.0.31 PyMySQL pymemcache python-memcached python-binary-memcached"


def test_a_venv_built_from_what_is_wanted_is_reused(tmp_path: Path) -> None:
    result = _run(tmp_path, _marker(PACKAGES, CONSTRAINTS.read_bytes()))
    assert result.returncode == 0, result.stderr
    assert "nova venv 2026.1 (nova 33.0.2): cached" in result.stderr


@pytest.mark.parametrize(
    ("packages", "constraints", "python"),
    [
        (PACKAGES, b"oslo.policy==6.0.1\n", STUB_PYTHON),  # other constraints: e.g. another release's pins
        ("", None, STUB_PYTHON),  # built before the image contract's packages were installed
        # made with another interpreter (pyenv's, in root's home, which the nova image cannot carry)
        (PACKAGES, None, "/root/.pyenv/versions/3.11.7/bin/python3.11 3.11.7"),
    ],
    ids=["constraints-changed", "no-image-packages", "other-interpreter"],
)
def test_a_venv_built_from_anything_else_is_rebuilt(
    tmp_path: Path, packages: str, constraints: bytes | None, python: str
) -> None:
    result = _run(tmp_path, _marker(packages, constraints or CONSTRAINTS.read_bytes(), python))
    assert "nova venv 2026.1: installing nova==33.0.2" in result.stderr, result.stderr
    assert result.returncode != 0  # the stub interpreter cannot make a venv
    assert (tmp_path / "2026.1" / ".installed").exists()  # the old venv stays until a new one is ready
