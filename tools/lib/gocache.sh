# The Go setup every build script shares (tools/envtest, deploytools, prometheus and realnode build.sh):
# sourced, never run. It builds nothing itself:
#   source "$(dirname "$0")/../lib/gocache.sh" [<lock file name>]
# sets CACHE (ENVTEST_CACHE, default /var/cache/nova-envtest) and the Go environment (the module and
# build caches under CACHE, shared by every script; the local toolchain; no cgo), then waits for the
# script's lock in CACHE: a second caller of the same script waits for the first, then finds its
# output. Without a name the script takes its lock itself (take_lock <name>), after it found what it
# was asked for missing: a caller that needs only binaries already built does not wait for a build of
# others (CI builds kwok beside the tests while the real tier asks for the control plane).
# The output directories' names are each script's own (the caches are keyed by them).
# Defines take_lock, gomod_version, k8s_ldflags and go_build (see each).
CACHE="${ENVTEST_CACHE:-/var/cache/nova-envtest}"
if [[ -d /usr/local/go/bin ]]; then export PATH="/usr/local/go/bin:$PATH"; fi
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-modcacherw
export GOMODCACHE="${GOMODCACHE:-$CACHE/gomod}" GOCACHE="${GOCACHE:-$CACHE/gobuild}"
mkdir -p "$CACHE"

# take_lock <lock file name>: wait until no other caller holds it (released when the script exits).
take_lock() { exec 9>"$CACHE/$1"; flock 9; }
if [[ -n "${1:-}" ]]; then take_lock "$1"; fi
GO_TOOLS="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# gomod_version <module dir under tools/> <module path>: the version that go.mod pins.
gomod_version() { (cd "$GO_TOOLS/$1" && go list -m -f '{{.Version}}' "$2"); }

# k8s_ldflags <Kubernetes version> [build date]: stripped, with the version a Kubernetes binary reports.
k8s_ldflags() {
  local kv="$1" minor flags="-s -w" p
  minor="$(cut -d. -f2 <<<"$kv")"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X=$p.gitVersion=$kv -X=$p.gitMajor=1 -X=$p.gitMinor=$minor -X=$p.gitTreeState=clean"
    if [[ -n "${2:-}" ]]; then flags+=" -X=$p.buildDate=$2"; fi
  done
  echo "$flags"
}

# go_build <name> <package> <ldflags> <module dir> [go build flags...]: $OUT/<name>, unless it is there
# (written as <name>.partial and renamed, so an interrupted build leaves no half binary).
go_build() {
  local name="$1" pkg="$2" ldf="$3" dir="$4" t0=$SECONDS
  shift 4
  [[ -x "$OUT/$name" ]] && return 0
  (cd "$dir" && go build -trimpath -pgo=off "$@" -ldflags="$ldf" -o "$OUT/$name.partial" "$pkg") >&2
  mv "$OUT/$name.partial" "$OUT/$name"
  echo "built $name in $((SECONDS - t0)) s" >&2
}
