#!/usr/bin/env bash
# Builds CoreDNS for real nodes' cluster DNS (tools/realnode/dns.py) from Go modules into a cache outside
# the repo, and prints that directory. main.go here imports only the plugins the cluster's Corefile uses,
# so most of the module is never compiled. The directory's name carries CoreDNS's and Go's versions and
# a digest of go.sum and main.go, so a change of either builds anew beside the old one. Idempotent: a
# second run prints the directory at once. tools/realnode/build.sh (make realnode) calls it.
# Env: ENVTEST_CACHE (default /var/cache/nova-envtest; Go's module and build caches are shared with the
# other build scripts, and client-go is pinned to the kubelet's version so its packages are shared too).
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
source "$HERE/lib/gocache.sh" .coredns.lock
V="$(gomod_version coredns github.com/coredns/coredns)"
SUM="$(cat "$HERE/coredns/go.sum" "$HERE/coredns/main.go" | sha256sum | cut -c1-12)"
OUT="$CACHE/coredns-$V-$(go env GOVERSION)-$SUM"
[[ -x "$OUT/coredns" ]] && { echo "$OUT"; exit 0; }
mkdir -p "$OUT"
go_build coredns . "-s -w -X=github.com/coredns/coredns/coremain.GitCommit=$V" "$HERE/coredns"
"$OUT/coredns" -version >&2
echo "$OUT"
