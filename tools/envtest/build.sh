#!/usr/bin/env bash
# Builds the control-plane binaries from Go modules into a cache outside the repo and prints that directory.
#   kube-apiserver, etcd, kube-controller-manager, kube-scheduler  (tools/envtest/go.mod, Kubernetes v1.37.x)
#   kwok                                                           (tools/kwok/go.mod, its own module graph)
# Idempotent: a second run with the same versions prints the directory at once.
# Env: ENVTEST_CACHE (default /var/cache/nova-envtest), ENVTEST_ONLY_CORE=1 to skip the simulated-cluster binaries,
# ENVTEST_NO_KWOK=1 to skip kwok only (the real-Nova tier and `make run` have no fake nodes).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
# One build at a time per cache: a second caller that finds a binary it wants missing waits for the
# first, then finds the binaries (one that finds all it wants prints them at once, even during a build
# of kwok).
source "$HERE/../lib/gocache.sh"
cd "$HERE"
KV="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
KWOK_V="$(cd ../kwok && go list -m -f '{{.Version}}' sigs.k8s.io/kwok)"
OUT="$CACHE/bin-$KV-kwok$KWOK_V-$(go env GOVERSION)"
controllers=1 kwok=1
[[ "${ENVTEST_ONLY_CORE:-0}" == 1 ]] && controllers=0 kwok=0
[[ "${ENVTEST_NO_KWOK:-0}" == 1 ]] && kwok=0
want=(kube-apiserver etcd)
((controllers)) && want+=(kube-controller-manager kube-scheduler)
((kwok)) && want+=(kwok)
missing=()
for b in "${want[@]}"; do [[ -x "$OUT/$b" ]] || missing+=("$b"); done
if [[ ${#missing[@]} -eq 0 ]] && { ((!kwok)) || [[ -f "$OUT/kwok-stages.yaml" ]]; }; then
  echo "$OUT"
  exit 0
fi
take_lock .build.lock
LDF="$(k8s_ldflags "$KV" "$(date -u +%Y-%m-%dT%H:%M:%SZ)")"
mkdir -p "$OUT"
go_build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$LDF" "$HERE"
go_build etcd go.etcd.io/etcd/server/v3 "-s -w" "$HERE"
if ((controllers)); then
  go_build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$LDF" "$HERE"
  go_build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$LDF" "$HERE"
fi
if ((kwok)); then
  go_build kwok sigs.k8s.io/kwok/cmd/kwok "-s -w" "$HERE/../kwok"
  # kwok's stock stages ship in its module directory; concatenate them (without kustomization.yaml).
  KWOK_DIR="$(cd ../kwok && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)"
  {
    for d in node/fast node/heartbeat pod/fast; do
      for f in "$KWOK_DIR/kustomize/stage/$d"/*.yaml; do
        [[ "$(basename "$f")" == kustomization.yaml ]] && continue
        echo "---"; cat "$f"
      done
    done
  } > "$OUT/kwok-stages.yaml.partial"
  mv "$OUT/kwok-stages.yaml.partial" "$OUT/kwok-stages.yaml"
fi
"$OUT/kube-apiserver" --version >&2
# The first line of the version only, without a pipe: under pipefail, head closing the pipe early
# kills the writer with SIGPIPE and the whole script with it, silently (seen on a busy machine).
version="$("$OUT/etcd" --version)"
echo "${version%%$'\n'*}" >&2
echo "$OUT"
