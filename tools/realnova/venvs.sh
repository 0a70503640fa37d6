#!/usr/bin/env bash
# The OpenStack services around the Nova under test, from PyPI, one venv each (their pins conflict:
# placement 15 needs oslo.policy < 6), cached in /var/cache/nova-operator/realnova/<service>:
#
#   keystone   keystone + python-openstackclient (the identity service, the CLI make run offers)
#   placement  openstack-placement
#   glance     glance (file store)
#
# Each venv also has uWSGI (it serves them), PyMySQL and python-memcached. A venv is reused while its
# marker names the same package list; cold, about 3 minutes on 2 cores. Prints the cache directory.
# The interpreter is Debian's /usr/bin/python3.11, which any uid can read.
set -euo pipefail
cache="${REALNOVA_VENV_CACHE:-/var/cache/nova-operator/realnova}"
python="${REALNOVA_PYTHON:-/usr/bin/python3.11}"
mkdir -p "$cache"
# pip's cache, shared with tools/catalogs/ensure_venvs.sh (same interpreter): uWSGI compiles once.
pip_cache="$(dirname "$cache")/pip"
exec 9>"$cache/.lock"
flock 9

common=(uWSGI==2.0.31 PyMySQL python-memcached pymemcache)
# uWSGI embeds the interpreter it finds on PATH (python3-config): keep any other Python (pyenv's, in
# root's home, which uid 42424 cannot read) off PATH while building, so it links Debian's libpython.
build_path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
declare -A packages=(
  [keystone]="keystone==29.1.0 python-openstackclient==9.0.1"
  [placement]="openstack-placement==15.0.0 oslo.policy<6"
  [glance]="glance==32.0.0 oslo.policy<6"
)
built=0
for svc in keystone placement glance; do
  dir="$cache/$svc"
  want="${packages[$svc]} ${common[*]} (debian libpython)"
  if [[ -f "$dir/.ready" && "$(cat "$dir/.ready")" == "$want" ]]; then
    continue
  fi
  built=1
  rm -rf "$dir"
  "$python" -m venv "$dir"
  # Debian's pip (23) builds no wheel for uWSGI without the wheel package: nothing would be cached
  "$dir/bin/python" -m pip install -q --disable-pip-version-check --cache-dir "$pip_cache" --upgrade pip
  # shellcheck disable=SC2086
  PATH="$dir/bin:$build_path" "$dir/bin/python" -m pip install -q --disable-pip-version-check --cache-dir "$pip_cache" \
    ${packages[$svc]} ${common[*]} >&2
  echo "$want" > "$dir/.ready"
done
# readable by every uid (a warm run skips the walk over the venvs' files)
((built)) && chmod -R a+rX "$cache"
echo "$cache"
