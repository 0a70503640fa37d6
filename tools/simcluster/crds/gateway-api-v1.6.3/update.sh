#!/usr/bin/env bash
# Refreshes the Gateway API CRDs in this directory from the sigs.k8s.io/gateway-api Go module
# (standard channel, the four kinds the Nova operator and the Gateway stand-in use).
# usage: tools/simcluster/crds/gateway-api-v1.6.3/update.sh [version]   (default: this dir's version)
# Another version: copy the directory to gateway-api-<version> and update launch.py's path.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
V="${1:-${HERE##*/gateway-api-}}"
CACHE="${ENVTEST_CACHE:-/var/cache/nova-envtest}"
export GOTOOLCHAIN=local GOFLAGS=-modcacherw GOMODCACHE="${GOMODCACHE:-$CACHE/gomod}"
TMP="$(mktemp -d)"; trap 'rm -rf "$TMP"' EXIT
cd "$TMP" && go mod init nova.invalid/gatewayapi-crds >/dev/null 2>&1
DIR="$(go mod download -json "sigs.k8s.io/gateway-api@$V" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
for k in gatewayclasses gateways httproutes referencegrants; do
  install -m 0644 "$DIR/config/crd/standard/gateway.networking.k8s.io_$k.yaml" "$HERE/"
done
echo "copied from $DIR" >&2
