#!/usr/bin/env bash
# Builds what a real node runs beside Debian's containerd, from Go modules (and one C file) into a cache
# outside the repo, and prints that directory:
#   kubelet, kube-proxy  (tools/kubelet/go.mod: k8s.io/kubernetes at the control plane's version, same replaces)
#   pause                (the sandbox's process: build/pause/linux/pause.c of that module, gcc -static)
# and, by tools/coredns/build.sh into a directory of its own, CoreDNS (the nodes' cluster DNS).
# The directory's name carries the Kubernetes and Go versions and a digest of go.sum, so a change of either
# builds anew beside the old one. Idempotent: a second run prints the directory at once.
# Env: ENVTEST_CACHE (default /var/cache/nova-envtest; the Go module and build caches are shared with
# tools/envtest/build.sh).
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
# Its own lock: these builds need not wait for the control plane's (Go's caches are safe to share).
source "$HERE/lib/gocache.sh" .realnode.lock
KV="$(gomod_version kubelet k8s.io/kubernetes)"
[[ "$KV" == "$(gomod_version envtest k8s.io/kubernetes)" ]] || {
  echo "tools/kubelet and tools/envtest pin different Kubernetes versions" >&2
  exit 1
}
bash "$HERE/coredns/build.sh" >/dev/null
SUM="$(sha256sum "$HERE/kubelet/go.sum" | cut -c1-12)"
OUT="$CACHE/realnode-$KV-$(go env GOVERSION)-$SUM"
want=(kubelet kube-proxy pause)
missing=0
for b in "${want[@]}"; do [[ -x "$OUT/$b" ]] || missing=1; done
((missing)) || { echo "$OUT"; exit 0; }
LDF="$(k8s_ldflags "$KV")"
mkdir -p "$OUT"
go_build kubelet k8s.io/kubernetes/cmd/kubelet "$LDF" "$HERE/kubelet"
go_build kube-proxy k8s.io/kubernetes/cmd/kube-proxy "$LDF" "$HERE/kubelet"
if [[ ! -x "$OUT/pause" ]]; then
  src="$(cd "$HERE/kubelet" && go mod download k8s.io/kubernetes && go list -m -f '{{.Dir}}' k8s.io/kubernetes)"
  gcc -Os -static -DVERSION="$KV" -o "$OUT/pause.partial" "$src/build/pause/linux/pause.c"
  strip "$OUT/pause.partial"
  mv "$OUT/pause.partial" "$OUT/pause"
fi
"$OUT/kubelet" --version >&2
echo "$OUT"
