#!/usr/bin/env bash
# Builds the install tools from Go modules into a cache outside the repo and prints that directory.
#   helm       (tools/helm/go.mod, helm.sh/helm/v3)
#   kustomize  (tools/kustomize/go.mod, sigs.k8s.io/kustomize/kustomize/v5)
#   kubectl    (tools/kubectl/go.mod: k8s.io/kubernetes at the control plane's version, same replaces)
#   the ServiceMonitor and PrometheusRule CRDs (tools/prometheus-crds/go.mod: copied, not built)
# Idempotent: a second run with the same versions prints the directory at once.
# Env: ENVTEST_CACHE (default /var/cache/nova-envtest; the Go module and build caches are shared
# with tools/envtest/build.sh).
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
# Its own lock: these builds need not wait for the control plane's (Go's caches are safe to share).
source "$HERE/lib/gocache.sh" .deploytools.lock
HV="$(gomod_version helm helm.sh/helm/v3)"
KZV="$(gomod_version kustomize sigs.k8s.io/kustomize/kustomize/v5)"
KV="$(gomod_version kubectl k8s.io/kubernetes)"
[[ "$KV" == "$(gomod_version envtest k8s.io/kubernetes)" ]] || { echo "tools/kubectl and tools/envtest pin different Kubernetes versions" >&2; exit 1; }
PROM="github.com/prometheus-operator/prometheus-operator"
PV="$(gomod_version prometheus-crds "$PROM")"
OUT="$CACHE/deploytools-helm$HV-kustomize$KZV-kubectl$KV-promop$PV-$(go env GOVERSION)"
mkdir -p "$OUT"
# helm's default Kubernetes version (helm template, lint) is that of its client-go, as its Makefile sets it.
HK="$(gomod_version helm k8s.io/client-go)"
HLDF="-s -w -X=helm.sh/helm/v3/internal/version.version=$HV"
for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  HLDF+=" -X=$p.k8sVersionMajor=1 -X=$p.k8sVersionMinor=$(cut -d. -f2 <<<"$HK")"
done
go_build helm helm.sh/helm/v3/cmd/helm "$HLDF" "$HERE/helm"
go_build kustomize sigs.k8s.io/kustomize/kustomize/v5 "-s -w" "$HERE/kustomize"
go_build kubectl k8s.io/kubernetes/cmd/kubectl "$(k8s_ldflags "$KV")" "$HERE/kubectl"
for kind in servicemonitors prometheusrules; do
  crd="monitoring.coreos.com_$kind.yaml"
  [[ -f "$OUT/$crd" ]] && continue
  dir="$(cd "$HERE/prometheus-crds" && go mod download "$PROM" && go list -m -f '{{.Dir}}' "$PROM")"
  cp "$dir/example/prometheus-operator-crd/$crd" "$OUT/$crd.partial"
  mv "$OUT/$crd.partial" "$OUT/$crd"
done
echo "$OUT"
