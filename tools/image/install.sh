#!/bin/sh
# The image's install, used by the Dockerfile and by tests/integration/test_image.py (no container
# engine here): the package and its runtime dependencies only, into a fresh virtualenv at PREFIX,
# byte-compiled (the root filesystem is read-only at run time), pip itself removed afterwards.
#   install.sh PREFIX SRC      SRC holds pyproject.toml, README.md and nova_operator/
set -eu
PREFIX="$1"
SRC="$2"
PYTHON="${PYTHON:-python3}"
"$PYTHON" -m venv "$PREFIX"
"$PREFIX/bin/python" -m pip install --quiet --no-cache-dir --disable-pip-version-check "$SRC"
"$PREFIX/bin/python" -m compileall -q "$PREFIX/lib"
"$PREFIX/bin/python" -m pip uninstall --quiet --yes pip
