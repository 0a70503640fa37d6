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
CACHE="${ENVTEST_CACHE:-/var/cache/nova-envtest}"
[[ -d /usr/local/go/bin ]] && export PATH="/usr/local/go/bin:$PATH"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-modcacherw
export GOMODCACHE="${GOMODCACHE:-$CACHE/gomod}" GOCACHE="${GOCACHE:-$CACHE/gobuild}"
mkdir -p "$CACHE"
# Its own lock: these builds need not wait for the control plane's (Go's caches are safe to share).
exec 9>"$CACHE/.deploytools.lock"
flock 9
version() { (cd "$HERE/$1" && go list -m -f '{{.Version}}' "$2"); }
HV="$(version helm helm.sh/helm/v3)"
KZV="$(version kustomize sigs.k8s.io/kustomize/kustomize/v5)"
KV="$(version kubectl k8s.io/kubernetes)"
[[ "$KV" == "$(version envtest k8s.io/kubernetes)" ]] || { echo "tools/kubectl and tools/envtest pin different Kubernetes versions" >&2; exit 1; }
PROM="github.com/prometheus-operator/prometheus-operator"
PV="$(version prometheus-crds "$PROM")"
OUT="$CACHE/deploytools-helm$HV-kustomize$KZV-kubectl$KV-promop$PV-$(go env GOVERSION)"
MINOR="$(cut -d. -f2 <<<"$KV")"
mkdir -p "$OUT"
build() {  # name, package, ldflags, module dir
  local name="$1" pkg="$2" ldf="$3" dir="$4" t0=$SECONDS
  [[ -x "$OUT/$name" ]] && return 0
  (cd "$dir" && go build -trimpath -pgo=off -ldflags="$ldf" -o "$OUT/$name.partial" "$pkg") >&2
  mv "$OUT/$name.partial" "$OUT/$name"
  echo "built $name in $((SECONDS - t0)) s" >&2
}
# helm's default Kubernetes version (helm template, lint) is that of its client-go, as its Makefile sets it.
HK="$(version helm k8s.io/client-go)"
HLDF="-s -w -X=helm.sh/helm/v3/internal/version.version=$HV"
for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  HLDF+=" -X=$p.k8sVersionMajor=1 -X=$p.k8sVersionMinor=$(cut -d. -f2 <<<"$HK")"
done
build helm helm.sh/helm/v3/cmd/helm "$HLDF" "$HERE/helm"
build kustomize sigs.k8s.io/kustomize/kustomize/v5 "-s -w" "$HERE/kustomize"
KLDF="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  KLDF+=" -X=$p.gitVersion=$KV -X=$p.gitMajor=1 -X=$p.gitMinor=$MINOR -X=$p.gitTreeState=clean"
done
build kubectl k8s.io/kubernetes/cmd/kubectl "$KLDF" "$HERE/kubectl"
for kind in servicemonitors prometheusrules; do
  crd="monitoring.coreos.com_$kind.yaml"
  [[ -f "$OUT/$crd" ]] && continue
  dir="$(cd "$HERE/prometheus-crds" && go mod download "$PROM" && go list -m -f '{{.Dir}}' "$PROM")"
  cp "$dir/example/prometheus-operator-crd/$crd" "$OUT/$crd.partial"
  mv "$OUT/$crd.partial" "$OUT/$crd"
done
echo "$OUT"
