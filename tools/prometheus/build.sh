#!/usr/bin/env bash
# Builds prometheus and promtool from the Go module proxy (tools/prometheus/go.mod,
# github.com/prometheus/prometheus) into a cache outside the repo and prints that directory.
# Built with the remove_all_sd tag: only the static and file service discovery the tests use are
# compiled in (promtool still links the Kubernetes SD it checks configs with), and without the
# embedded web UI: the tests talk to the HTTP API only.
# Idempotent: a second run with the same versions prints the directory at once.
# Env: ENVTEST_CACHE (default /var/cache/nova-envtest; the Go module and build caches are shared
# with tools/envtest/build.sh and tools/deploytools/build.sh).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
# Its own lock: a second caller waits for the first, then finds the binaries.
source "$HERE/../lib/gocache.sh" .prometheus.lock
cd "$HERE"
MOD=github.com/prometheus/prometheus
MV="$(go list -m -f '{{.Version}}' "$MOD")"
# The Go module v0.MMM.P is Prometheus release 3.MMM-as-minor.P (v0.316.0 is 3.16.0).
IFS=. read -r _ MM P <<<"${MV#v}"
PV="3.$((10#$MM - 300)).$P"
OUT="$CACHE/prometheus-$PV-$(go env GOVERSION)"
if [[ -x "$OUT/prometheus" && -x "$OUT/promtool" ]]; then echo "$OUT"; exit 0; fi
mkdir -p "$OUT"
V=github.com/prometheus/common/version
LDF="-s -w -X=$V.Version=$PV -X=$V.Branch=HEAD -X=$V.BuildUser=nova-operator -X=$V.Revision=$MV"
for name in prometheus promtool; do
  go_build "$name" "$MOD/cmd/$name" "$LDF" "$HERE" -tags=remove_all_sd
done
# The first line of the version only, without a pipe: under pipefail, head closing the pipe early
# kills the writer with SIGPIPE and the whole script with it, silently (seen on a busy machine).
version="$("$OUT/prometheus" --version)"
echo "${version%%$'\n'*}" >&2
echo "$OUT"
