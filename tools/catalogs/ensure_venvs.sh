#!/usr/bin/env bash
# Create (or reuse) one virtualenv per supported release with the real `nova` package from
# PyPI and its dependencies, plus the sdist's etc/nova/nova-config-generator.conf, the
# list of oslo.config namespaces nova's own sample config is generated from.
#
#   bash tools/catalogs/ensure_venvs.sh            # all releases in tools/catalogs/releases.txt
#   NOVA_VENV_CACHE=/elsewhere bash tools/catalogs/ensure_venvs.sh 2026.1
#
# The venvs live outside the repository (default /var/cache/nova-operator/nova-venvs/<release>);
# a venv is reused when its marker names the wanted nova version and constraints. Cold: about
# a minute per release on 2 cores; warm: returns at once. Used by the catalog generator
# (tools/catalogs/generate.py) and by the oslo-config-validator test of the renderers.
#
# Besides nova, each venv holds the Python packages the image contract names
# (nova_operator/image_contract.py: uWSGI, PyMySQL, pymemcache, python-memcached,
# python-binary-memcached), so the tests can run the real uWSGI with the rendered command lines
# and a nova image can be built from the same venv.
#
# tools/catalogs/constraints-<release>.txt pins every package of the venv: the versions of that
# release's own upper-constraints (openstack/requirements, stable/<release>), kept to the
# packages the venv holds, so a cold venv on a fresh machine holds the oslo libraries that
# release ships and reproduces the committed catalog. `generate.py --freeze` rewrites them from
# the current venvs; without one, the newest compatible versions install. A venv is rebuilt
# when its nova version, its constraints file or the image's package list changes.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${NOVA_VENV_CACHE:-/var/cache/nova-operator/nova-venvs}"
# Debian's interpreter, not the machine's default python3 (pyenv's, in root's home, mode 0700): the nova
# image of the real-Nova tier is built from these venvs, and its processes run as uid 42424. uWSGI
# links the libpython of the python3-config it finds on PATH, so PATH is kept to the system's while
# installing.
python="${NOVA_VENV_PYTHON:-/usr/bin/python3.11}"
build_path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
mkdir -p "$cache"
# pip's cache beside the venvs, shared with tools/realnova/venvs.sh (same interpreter): uWSGI, which
# every venv has, compiles once (half a CPU-minute each), and the common packages download once.
pip_cache="$(dirname "$cache")/pip"

# The machine-readable option data oslo-config-validator reads (--opt-data), written once
# per venv by nova's own generator config, so a validation need not load every namespace.
opt_data() {
  "$1/bin/oslo-config-generator" --config-file "$1/nova-config-generator.conf" --format yaml \
    --output-file "$1/nova-opt-data.yaml.tmp" 2>/dev/null
  mv "$1/nova-opt-data.yaml.tmp" "$1/nova-opt-data.yaml"
}

# The image contract's Python packages (standard-library script: no installed operator needed).
mapfile -t image_packages < <("$python" "$here/../../nova_operator/image_contract.py" pip-requirements)
((${#image_packages[@]})) || { echo "no pip requirements from nova_operator/image_contract.py" >&2; exit 1; }

want=("$@")
exec 9>"$cache/.lock"
flock 9

while read -r release version; do
  [[ -z "$release" || "$release" == \#* ]] && continue
  if ((${#want[@]})); then
    match=0
    for w in "${want[@]}"; do [[ "$w" == "$release" ]] && match=1; done
    ((match)) || continue
  fi
  dir="$cache/$release"
  constraints="$here/constraints-$release.txt"
  marker="nova==$version ${image_packages[*]} python=$("$python" -c 'import sys; print(sys.executable, sys.version.split()[0])')"
  pin=()
  if [[ -f "$constraints" ]]; then
    marker="$marker $(sha256sum "$constraints" | cut -c1-16)"
    pin=(-c "$constraints")
  fi
  if [[ -f "$dir/.installed" && "$(cat "$dir/.installed")" == "$marker" ]]; then
    if [[ ! -s "$dir/nova-opt-data.yaml" ]]; then
      opt_data "$dir"
    fi
    echo "nova venv $release (nova $version): cached at $dir" >&2
    continue
  fi
  echo "nova venv $release: installing nova==$version into $dir" >&2
  start=$SECONDS
  tmp="$dir.tmp.$$"
  # what a stopped install left (under the lock, no other install is running)
  rm -rf "$dir".tmp.*
  "$python" -m venv "$tmp"
  "$tmp/bin/python" -m pip install -q --disable-pip-version-check --cache-dir "$pip_cache" --upgrade pip
  # osprofiler is an extra of nova, but nova-config-generator.conf lists its namespace.
  PATH="$tmp/bin:$build_path" "$tmp/bin/python" -m pip install -q --disable-pip-version-check --cache-dir "$pip_cache" \
    "${pin[@]}" "nova[osprofiler]==$version" \
    "${image_packages[@]}"
  sdist="$(mktemp -d)"
  "$tmp/bin/python" -m pip download -q --disable-pip-version-check --cache-dir "$pip_cache" --no-deps --no-binary :all: \
    -d "$sdist" "nova==$version"
  tar -xzf "$sdist"/nova-"$version".tar.gz -C "$sdist" "nova-$version/etc/nova/nova-config-generator.conf"
  cp "$sdist/nova-$version/etc/nova/nova-config-generator.conf" "$tmp/nova-config-generator.conf"
  rm -rf "$sdist"
  # fail here, not in a test, when the install is broken
  "$tmp/bin/python" -c "import nova, oslo_config, pymysql, pymemcache, memcache, bmemcached"
  "$tmp/bin/uwsgi" --version >/dev/null
  echo "$marker" >"$tmp/.installed"
  # venvs hard-code their path: rebuild scripts by moving only after success and fixing shebangs.
  rm -rf "$dir"
  mv "$tmp" "$dir"
  grep -rlI --null "$tmp" "$dir/bin" | xargs -0 -r sed -i "s#$tmp#$dir#g"
  opt_data "$dir"
  echo "nova venv $release: ready in $((SECONDS - start))s" >&2
done <"$here/releases.txt"
