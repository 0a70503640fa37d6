#!/bin/sh
# The image's install, used by the Dockerfile and by tests/integration/test_image.py (which replays
# the Dockerfile's build stages into a fresh directory): the package and its runtime dependencies
# only, in a virtualenv at PREFIX, byte-compiled (the root filesystem is read-only at run time).
#   install.sh deps PREFIX SRC        the virtualenv with the dependencies pyproject.toml names and the
#                                     package's metadata and console script (SRC holds pyproject.toml
#                                     and README.md, not the code yet); pip itself removed afterwards
#   install.sh code PREFIX SRC STAGE  SRC/nova_operator into PREFIX's site-packages, byte-compiled,
#                                     and the same files under STAGE (STAGE/PREFIX/...), for a last
#                                     layer of their own
set -eu
MODE="$1"
PREFIX="$2"
SRC="$3"
PYTHON="${PYTHON:-python3}"
case "$MODE" in
deps)
  [ ! -e "$SRC/nova_operator" ] || { echo "install.sh deps: $SRC must not hold the code yet" >&2; exit 2; }
  "$PYTHON" -m venv "$PREFIX"
  "$PREFIX/bin/python" -m pip install --quiet --no-cache-dir --disable-pip-version-check "$SRC"
  "$PREFIX/bin/python" -m compileall -q "$PREFIX/lib"
  "$PREFIX/bin/python" -m pip uninstall --quiet --yes pip
  ;;
code)
  STAGE="$4"
  SITE="$("$PREFIX/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
  rm -rf "$SITE/nova_operator"
  cp -R "$SRC/nova_operator" "$SITE/nova_operator"
  find "$SITE/nova_operator" -name __pycache__ -prune -exec rm -rf {} +
  # checked-hash: the cached bytecode stays valid whatever times the files carry in the image
  "$PREFIX/bin/python" -m compileall -q --invalidation-mode checked-hash "$SITE/nova_operator"
  mkdir -p "$STAGE$SITE"
  cp -R "$SITE/nova_operator" "$STAGE$SITE/nova_operator"
  ;;
*)
  echo "usage: install.sh deps PREFIX SRC | install.sh code PREFIX SRC STAGE" >&2
  exit 2
  ;;
esac
